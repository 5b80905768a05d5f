"""Build tests/data/redaction/formats.jsonl: the project's own redaction corpus.

    .venv/bin/python tests/data/redaction/build_formats.py

Deterministic (every format has its own seeded generator, so adding a format
changes no other format's values), offline. Two sources of formats:

* every ``TokenRule`` with a literal prefix (or a run gate) and no context
  gate words: the hand-written rules of ``rules.py`` (source ``rules``), the
  table of ``vendor_formats`` (``table``) and ``vendor_rules`` (``vendor_rules``).
  Synthetic values are drawn from the rule's own pattern (its documented
  shape: prefix, alphabet, length), random and never real, and kept only if
  they have that shape's structure (the rule's body checks);
* every realistic generator of ``tests/redaction_corpus`` (``generator``),
  including context formats (passwords, URL credentials) that have no shape
  of their own and are therefore not placed bare in prose.

Each value is placed in eight contexts: bare in prose, an env assignment,
JSON, YAML, an HTTP header, a CLI flag, an XML element, and repeated (once
with context, then bare, twice). Per prefixed format two near-miss negatives
(``expect: clean``): the prefix with a body far too short, and the prefix
with a placeholder body (``xxxx…`` or ``<your-token>``).

Fields: {format, context, text, secret, expect, split, source, rule}.
``split`` is ``heldout`` for ~25 % of formats, chosen by a hash of the format
name (never by results); ``rule`` is the rule id expected to name the value.
Scoring rule (tests/redaction_corpus.py): after redaction no run of 12
characters of ``secret`` may remain anywhere in the text.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import string
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import re._constants as C  # noqa: E402
import re._parser as sre_parse  # noqa: E402

from redaction.engine import _valid  # noqa: E402
from redaction.rules import TOKEN_RULES, TokenRule, _literal_prefix  # noqa: E402
from redaction.vendor_formats import VENDOR_FORMATS  # noqa: E402
from redaction.vendor_rules import VENDOR_TOKEN_RULES  # noqa: E402
from tests.redaction_corpus import GENERATORS  # noqa: E402

OUT = Path(__file__).with_name("formats.jsonl")
SEED = 20261122

CONTEXTS = {
    "prose": "here is what the dashboard gave me: {v} - use it for the deploy",
    "env": "export {NAME}={v}",
    "json": '{{"service": "{name}", "api_key": "{v}", "region": "eu-west-1"}}',
    "yaml": "{name}:\n  url: https://api.example.com\n  token: {v}\n",
    "header": "curl -H 'X-Api-Key: {v}' https://api.example.com/v1/items",
    "cli": "{name} login --token {v} --profile prod",
    "xml": "<config><apiKey>{v}</apiKey><timeout>30</timeout></config>",
    "repeated": "I set {NAME}={v} yesterday. Then the job log printed {v} in clear, twice: {v}",
}

# Characters never drawn where a class offers others: they would change the
# surrounding context (quotes, escapes, line breaks) rather than the value.
_AVOID = set("\"'\\`<>&\t\n\r\x0b\x0c ")
_PRINTABLE = [c for c in string.printable if c not in _AVOID]
_CATEGORY = {
    C.CATEGORY_DIGIT: string.digits,
    C.CATEGORY_WORD: string.ascii_letters + string.digits + "_",
    C.CATEGORY_SPACE: " ",
}


def heldout(fmt: str) -> bool:
    return int(hashlib.sha256(fmt.encode()).hexdigest(), 16) % 4 == 0


def _class_chars(items) -> list[str]:
    chars: set[str] = set()
    negate = False
    for op, av in items:
        if op is C.NEGATE:
            negate = True
        elif op is C.LITERAL:
            chars.add(chr(av))
        elif op is C.RANGE:
            chars.update(chr(c) for c in range(av[0], av[1] + 1))
        elif op is C.CATEGORY:
            chars.update(_CATEGORY.get(av, ""))
    if negate:
        chars = set(_PRINTABLE) - chars
    usable = sorted(chars - _AVOID)
    return usable or sorted(chars)


def _sample(rng: random.Random, seq, groups: dict[int, list[int]], out: list[str]) -> None:
    for op, av in seq:
        if op is C.LITERAL:
            out.append(chr(av))
        elif op is C.ANY:
            out.append(rng.choice(string.ascii_letters + string.digits))
        elif op is C.IN:
            out.append(rng.choice(_class_chars(av)))
        elif op is C.BRANCH:
            _sample(rng, rng.choice(av[1]), groups, out)
        elif op is C.SUBPATTERN:
            start = len("".join(out))
            _sample(rng, av[3], groups, out)
            if av[0] is not None:
                groups[av[0]] = [start, len("".join(out))]
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", None)):
            lo, hi, sub = av
            if hi is C.MAXREPEAT or hi >= 4096:
                hi = lo + 16
            n = rng.randint(lo, min(hi, lo + 48))
            for _ in range(n):
                _sample(rng, sub, groups, out)
        elif op is getattr(C, "ATOMIC_GROUP", None):
            _sample(rng, av, groups, out)
        # ASSERT, ASSERT_NOT, AT: boundaries, nothing to emit


def sample_rule(rule: TokenRule, rng: random.Random, tries: int = 400) -> tuple[str, str] | None:
    """(match text, secret) drawn from the rule's pattern, with the rule's structure; None if none found."""
    parsed = sre_parse.parse(rule.pattern)
    rx = re.compile(rule.pattern)
    s_group = rx.groupindex.get("s")
    for _ in range(tries):
        out: list[str] = []
        groups: dict[int, list[int]] = {}
        _sample(rng, parsed, groups, out)
        text = "".join(out)
        m = rx.fullmatch(text)
        if not m:
            continue
        secret = m.group("s") if s_group else text
        if "xxxx" in secret.lower() or not _valid(rule, secret):
            continue
        return text, secret
    return None


def _table_ids() -> set[str]:
    return {f.id for f in VENDOR_FORMATS}


def rule_formats() -> list[tuple[str, TokenRule, str]]:
    """(format name, rule, source) for every sampled TokenRule; duplicate ids get ``#n``."""
    vendor = {id(r) for r in VENDOR_TOKEN_RULES}
    table = _table_ids()
    seen: dict[str, int] = {}
    out = []
    for rule in TOKEN_RULES:
        if rule.gates:
            continue  # needs context words: not a format found by shape alone
        if not rule.run_gates and len(_literal_prefix(rule.pattern)) < 1:
            continue
        seen[rule.id] = seen.get(rule.id, 0) + 1
        name = rule.id if seen[rule.id] == 1 else f"{rule.id}#{seen[rule.id]}"
        source = "vendor_rules" if id(rule) in vendor else "table" if rule.id in table else "rules"
        out.append((name, rule, source))
    return out


def _near_misses(fmt: str, prefix: str) -> list[tuple[str, str]]:
    placeholder = prefix + ("x" * 32 if heldout(fmt + ":ph") else "<your-token>")
    return [("too-short", prefix + "abc12"), ("placeholder", placeholder)]


def _rows(fmt: str, rule_id: str | None, secret: str, value: str, source: str, bare: bool, prefix: str):
    name = re.sub(r"[^a-z]", "", fmt.split("-")[0]) or "svc"
    split = "heldout" if heldout(fmt) else "tune"
    for context, template in CONTEXTS.items():
        if context == "prose" and not bare:
            continue
        text = template.format(v=value, name=name, NAME=f"{name.upper()}_TOKEN")
        yield {"format": fmt, "context": context, "text": text, "secret": secret, "expect": "secret",
               "split": split, "source": source, "rule": rule_id}
    if len(prefix) >= 2:
        for context, miss in _near_misses(fmt, prefix):
            yield {"format": fmt, "context": context, "text": f"the format looks like {miss} in the docs",
                   "secret": miss, "expect": "clean", "split": split, "source": source, "rule": rule_id}


def cases():
    for fmt, rule, source in rule_formats():
        got = sample_rule(rule, random.Random(f"{SEED}:{fmt}"))
        if got is None:
            print(f"no sample for {fmt}", file=sys.stderr)
            continue
        value, secret = got
        prefix = "" if rule.run_gates else _literal_prefix(rule.pattern)
        yield from _rows(fmt, rule.id, secret, value, source, True, prefix)
    token_rule_ids = {r.id for r in TOKEN_RULES}
    for kind, gen in sorted(GENERATORS.items()):
        fragment, secret, rule_id = gen(random.Random(f"{SEED}:gen:{kind}"))
        if "\n" in secret or "\\n" in secret:
            continue  # key blocks are tested in their own shape elsewhere
        # Bare in prose only when the value alone is the format (the fragment
        # is the secret); an AWS secret key or a webhook path is recognised by
        # what surrounds it.
        bare = rule_id in token_rule_ids and fragment == secret
        yield from _rows(f"gen:{kind}", rule_id, secret, secret, "generator", bare, "")


def main() -> int:
    rows = list(cases())
    with OUT.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    formats = {r["format"] for r in rows}
    held = {r["format"] for r in rows if r["split"] == "heldout"}
    print(f"wrote {len(rows)} cases ({len(formats)} formats, {len(held)} heldout) to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
