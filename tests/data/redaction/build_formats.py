"""Build tests/data/redaction/formats.jsonl: the project's own redaction corpus.

    .venv/bin/python tests/data/redaction/build_formats.py

Deterministic (fixed seed), offline. Every documented vendor format of
``redaction.vendor_formats`` and every realistic generator of
``tests/redaction_corpus`` (the older rules' formats) yields synthetic values
(random, never real), each placed in eight contexts: bare in prose, an env
assignment, JSON, YAML, an HTTP header, a CLI flag, an XML element, and
repeated (once with context, once bare later). Near-miss negatives per format:
the prefix with a body too short, and the prefix with a placeholder body.

Fields: {format, context, text, secret, expect} (+ ``source``: "table" or
"generator"). Scoring rule (tests/redaction_corpus.py): after redaction no run
of 12 characters of ``secret`` may remain anywhere in the text.
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from redaction.vendor_formats import VENDOR_FORMATS  # noqa: E402
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

_TOKEN = re.compile(r"\\.|\[[^\]]+\](?:\{\d+(?:,\d*)?\})?|.")
_CLASS = re.compile(r"\[([^\]]+)\](?:\{(\d+)(?:,(\d*))?\})?")


def _chars(spec: str) -> str:
    out, i = [], 0
    spec = spec.replace("\\-", "\x00")
    while i < len(spec):
        if i + 2 < len(spec) and spec[i + 1] == "-":
            out.extend(chr(c) for c in range(ord(spec[i]), ord(spec[i + 2]) + 1))
            i += 3
        else:
            out.append(spec[i])
            i += 1
    return "".join(out).replace("\x00", "-")


def _random_body(rng: random.Random, alphabet: str, n: int) -> str:
    while True:
        s = "".join(rng.choice(alphabet) for _ in range(n))
        digits = any(c.isdigit() for c in s)
        letters = [c for c in s if c.isalpha()]
        mixed = any(c.isupper() for c in letters) and any(c.islower() for c in letters)
        if digits and (mixed or not any(c.isupper() for c in alphabet) or not any(c.islower() for c in alphabet)):
            return s


def _from_regex(rng: random.Random, regex: str) -> str:
    """A string matching the small regex subset the table's tails use."""
    out = []
    for tok in _TOKEN.findall(regex):
        m = _CLASS.fullmatch(tok)
        if m and m.group(2) is None:  # one character of the class
            out.append(rng.choice(_chars(m.group(1))))
        elif m:
            lo = int(m.group(2))
            hi = lo if m.group(3) is None else (int(m.group(3)) if m.group(3) else lo + 20)
            out.append(_random_body(rng, _chars(m.group(1)), rng.randint(lo, hi)))
        elif tok.startswith("\\"):
            out.append(tok[1:])
        else:
            out.append(tok)
    return "".join(out)


def table_values(rng: random.Random):
    for f in VENDOR_FORMATS:
        body = _random_body(rng, _chars(f.body), rng.randint(f.min_len, f.max_len))
        yield f.id, f.prefix + body + _from_regex(rng, f.suffix), f.prefix, True


def generator_values(rng: random.Random):
    """(kind, secret, None, has_format). A secret whose rule is a context rule
    (a password, a URL's password, a bearer value) has no shape of its own:
    nothing can find it bare in prose, so it is placed only in contexts that
    name it."""
    from redaction.rules import TOKEN_RULES

    token_rule_ids = {r.id for r in TOKEN_RULES}
    for kind, gen in sorted(GENERATORS.items()):
        _fragment, secret, rule = gen(rng)
        if "\n" not in secret and "\\n" not in secret:  # key blocks are tested in their own shape elsewhere
            yield kind, secret, None, rule in token_rule_ids


def cases(rng: random.Random):
    for source, values in (("table", table_values(rng)), ("generator", generator_values(rng))):
        for fmt, secret, prefix, has_format in values:
            name = re.sub(r"[^a-z]", "", fmt.split("-")[0]) or "svc"
            for context, template in CONTEXTS.items():
                if context == "prose" and not has_format:
                    continue
                text = template.format(v=secret, name=name, NAME=f"{name.upper()}_TOKEN")
                yield {"format": fmt, "context": context, "text": text, "secret": secret, "expect": "secret",
                       "source": source}
            if prefix:
                short = prefix + "abc12"
                placeholder = prefix + "x" * 24
                for context, value in (("too-short", short), ("placeholder", placeholder)):
                    yield {"format": fmt, "context": context, "text": f"the format looks like {value} in the docs",
                           "secret": value, "expect": "clean", "source": source}


def main() -> int:
    rng = random.Random(SEED)
    rows = list(cases(rng))
    with OUT.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    formats = len({r["format"] for r in rows})
    print(f"wrote {len(rows)} cases ({formats} formats) to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
