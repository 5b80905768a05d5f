"""Second independent chat corpus for the redaction evaluation (issue 34).

    .venv/bin/python -m bench.redaction_fresh2_gen [--check]

Written without reading the redactor, its tests or the first fresh corpus: credentials stated the way
people paste them in agent chats, support threads, ops channels and pair sessions, across
bench/redaction_fresh2_tpl_{a,b,c}.py (families of phrasing templates) and near misses that must
stay unchanged in bench/redaction_fresh2_clean.py. Every line gets fresh random values from a
`random.Random` seeded by the template id, so the files are reproducible byte for byte and adding a
template does not shift any other line.

Template syntax: `⟦kind⟧` inserts a value of a generator in bench/redaction_fresh2_values.py;
`⟦kind.2⟧` is a second, independent value of that kind (the same `⟦kind.N⟧` twice in one template is
the same value, so "every occurrence" is checked); `⟦kind#0⟧` is piece 0 of a multi-piece value;
`⟦kind|, ⟧` joins the pieces with `, `. Every inserted value of a SECRET kind is listed in the
record's `secrets` (for multi-piece values, every piece).

Writes tests/data/redaction_eval/chat_fresh2_{tune,heldout}.jsonl and
clean_chat_fresh2_{tune,heldout}.jsonl: even template numbers → tune, odd → held-out.
`--check` compares with the committed files instead of writing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import (  # noqa: E402
    redaction_fresh2_clean,
    redaction_fresh2_tpl_a,
    redaction_fresh2_tpl_b,
    redaction_fresh2_tpl_c,
)
from bench.redaction_fresh2_values import GENERATORS, SECRET, Parts  # noqa: E402

DATA = ROOT / "tests" / "data" / "redaction_eval"
PER_TEMPLATE = 5
SOURCE = "written for issue 34 (fresh2): independent chat phrasings, random values"
SLOT = re.compile(r"⟦(\w+)(?:\.(\d+))?(?:#(\d+))?(?:\|([^⟧]*))?⟧")
SPLITS = ("fresh2_tune", "fresh2_heldout")


def seed_of(template_id: str, i: int) -> int:
    return int.from_bytes(hashlib.sha256(f"fresh2:{template_id}:{i}".encode()).digest()[:8], "big")


def render(template: str, rng: random.Random) -> tuple[str, list[str], list[str]]:
    """Return (text, secrets, context values) for one instance of a template."""
    values: dict[tuple[str, str], str | Parts] = {}
    pieces: list[tuple[str, bool]] = []
    pos = 0
    for m in SLOT.finditer(template):
        kind, inst, part, sep = m.group(1), m.group(2) or "1", m.group(3), m.group(4)
        if kind not in GENERATORS:
            raise ValueError(f"unknown kind {kind!r} in template {template!r}")
        pieces.append((template[pos:m.start()], False))
        pos = m.end()
        key = (kind, inst)
        if key not in values:
            values[key] = GENERATORS[kind](rng)
        v = values[key]
        secret = kind in SECRET
        if isinstance(v, Parts):
            if part is not None:
                pieces.append((v.parts[int(part)], secret))
            else:
                joiner = (v.sep if sep is None else sep).replace("\\n", "\n")
                for j, p in enumerate(v.parts):
                    if j:
                        pieces.append((joiner, False))
                    pieces.append((p, secret))
        else:
            pieces.append((v, secret))
    pieces.append((template[pos:], False))
    text = "".join(p for p, _ in pieces)
    secrets = list(dict.fromkeys(p for p, s in pieces if s))
    context = [p for p, s in pieces if not s]
    return text, secrets, context


def instance(template: str, template_id: str, i: int) -> tuple[str, list[str]]:
    """Draw values until no secret also occurs in the non-secret text (the check must be exact)."""
    rng = random.Random(seed_of(template_id, i))
    for _ in range(50):
        text, secrets, context = render(template, rng)
        skeleton = "\x00".join(context)
        if secrets and not any(s in skeleton for s in secrets):
            return text, secrets
    raise ValueError(f"{template_id}: could not draw values that avoid the surrounding text")


def split_of(number: int) -> str:
    return SPLITS[number % 2]


def chat_rows() -> Iterator[dict]:
    for module in (redaction_fresh2_tpl_a, redaction_fresh2_tpl_b, redaction_fresh2_tpl_c):
        for family, templates in module.FAMILIES.items():
            for n, template in enumerate(templates):
                tid = f"{family}.{n:02d}"
                for i in range(PER_TEMPLATE):
                    text, secrets = instance(template, tid, i)
                    yield {"family": family, "secrets": secrets, "source": SOURCE, "split": split_of(n),
                           "template": tid, "text": text}


def clean_rows() -> Iterator[dict]:
    seen: set[str] = set()
    for family, templates in redaction_fresh2_clean.FAMILIES.items():
        for n, template in enumerate(templates):
            tid = f"{family}.{n:02d}"
            for i in range(PER_TEMPLATE):
                for attempt in range(50):      # redraw a line that repeats an earlier one
                    text = redaction_fresh2_clean.render(template, random.Random(seed_of(tid, i + 1000 * attempt)))
                    if text not in seen:
                        break
                seen.add(text)
                yield {"family": family, "secrets": [], "source": SOURCE, "split": split_of(n), "template": tid,
                       "text": text}


def files() -> dict[Path, str]:
    out: dict[Path, list[str]] = {}
    for stem, rows in (("chat_fresh2", chat_rows()), ("clean_chat_fresh2", clean_rows())):
        for split in SPLITS:
            out[DATA / f"{stem}_{split.split('_')[1]}.jsonl"] = []
        for row in rows:
            out[DATA / f"{stem}_{row['split'].split('_')[1]}.jsonl"].append(
                json.dumps(row, ensure_ascii=False, sort_keys=True))
    return {p: "\n".join(lines) + "\n" for p, lines in out.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the committed files, write nothing")
    args = ap.parse_args(argv)
    stale = []
    for path, text in files().items():
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(path.name)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)} ({text.count(chr(10))} lines)", file=sys.stderr)
    if stale:
        print(f"stale: {', '.join(stale)}; run python -m bench.redaction_fresh2_gen", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
