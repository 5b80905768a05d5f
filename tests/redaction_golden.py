"""The golden outputs of the redactor: what ``redact`` makes of a fixed corpus, per ruleset version.

The index stores ``REDACTION_VERSION`` and rebuilds when it changes; nothing else (no digest of the
code) makes it rebuild. So masking must never change while the version stays: this module records,
per input, a digest of the output, and :func:`check` names the inputs whose output moved.

    .venv/bin/python -m tests.redaction_golden            # check (what the test runs)
    .venv/bin/python -m tests.redaction_golden --update   # record new inputs; after a version bump, all

``--update`` refuses to record a changed output while the version is the one recorded: bump
``REDACTION_VERSION`` (redaction/rules.py) first, so every index rebuilds with the new masking.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from redaction import REDACTION_VERSION, redact

DATA = Path(__file__).resolve().parent / "data"
GOLDEN = DATA / "redaction" / "golden.json"
#: Committed corpora whose texts are golden inputs (independent evaluation sets join when present).
#: The fresh corpus's tuning half (``*_fresh_tune.jsonl``) is in; its held-out half
#: (``*_heldout.jsonl``) stays out: whoever tunes the redactor works on the golden, and the held-out
#: texts must not reach them through a failing digest.
SOURCES = (DATA / "redaction" / "formats.jsonl",
           *sorted(p for p in (DATA / "redaction_eval").glob("*.jsonl") if not p.stem.endswith("_heldout")))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def inputs(sources: Iterable[Path] = SOURCES) -> list[str]:
    out: dict[str, None] = {}
    for path in sources:
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    out[json.loads(line)["text"]] = None
    return list(out)


def outputs(texts: Iterable[str], redactor: Callable[[str], object] = redact) -> dict[str, str]:
    """input digest -> output digest."""
    return {_digest(t): _digest(redactor(t).text) for t in texts}


@dataclass(frozen=True)
class Check:
    recorded_version: str
    changed: list[str]  # input digests whose output differs from the recorded one
    new: list[str]      # inputs with no recorded output

    def problem(self) -> str | None:
        if self.recorded_version != REDACTION_VERSION:
            return (f"the golden outputs are of ruleset {self.recorded_version}, REDACTION_VERSION is "
                    f"{REDACTION_VERSION}: record the new version's with `python -m tests.redaction_golden --update`")
        if self.changed:
            return (f"masking changed for {len(self.changed)} golden input(s) (first: {self.changed[0]}) but "
                    f"REDACTION_VERSION is still {REDACTION_VERSION}: bump it in redaction/rules.py (every index "
                    "rebuilds once with the new masking), then run `python -m tests.redaction_golden --update`")
        if self.new:
            return (f"{len(self.new)} golden input(s) have no recorded output: run "
                    "`python -m tests.redaction_golden --update`")
        return None


def load(golden: Path = GOLDEN) -> tuple[str, dict[str, str]]:
    data = json.loads(golden.read_text(encoding="utf-8"))
    return data["version"], data["outputs"]


def check(texts: Iterable[str] | None = None, redactor: Callable[[str], object] = redact,
          golden: Path = GOLDEN) -> Check:
    version, recorded = load(golden)
    now = outputs(inputs() if texts is None else texts, redactor)
    return Check(version, sorted(k for k, v in now.items() if k in recorded and recorded[k] != v),
                 sorted(k for k in now if k not in recorded))


def update(texts: Iterable[str] | None = None, redactor: Callable[[str], object] = redact,
           golden: Path = GOLDEN) -> str:
    version, recorded = load(golden) if golden.is_file() else ("", {})
    now = outputs(inputs() if texts is None else texts, redactor)
    if version == REDACTION_VERSION:
        changed = [k for k, v in now.items() if k in recorded and recorded[k] != v]
        if changed:
            raise SystemExit(Check(version, changed, []).problem())
    golden.write_text(json.dumps({"version": REDACTION_VERSION, "outputs": dict(sorted(now.items()))},
                                 indent=0) + "\n", encoding="utf-8")
    return f"recorded {len(now)} golden outputs of ruleset {REDACTION_VERSION} in {golden}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.redaction_golden", description=__doc__.split("\n\n")[0])
    ap.add_argument("--update", action="store_true", help="record new inputs (all of them after a version bump)")
    args = ap.parse_args(argv)
    if args.update:
        print(update())
        return 0
    problem = check().problem()
    print(problem or f"golden outputs of ruleset {REDACTION_VERSION}: unchanged")
    return 1 if problem else 0


if __name__ == "__main__":
    sys.exit(main())
