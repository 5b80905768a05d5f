"""The project's own redaction corpus (tests/data/redaction/formats.jsonl, built by
tests/data/redaction/build_formats.py): every documented vendor format and every
generated older format, in eight contexts, every occurrence masked."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from redaction import redact
from redaction.vendor_formats import VENDOR_FORMATS
from tests.redaction_corpus import leaked

CORPUS = Path(__file__).parent / "data" / "redaction" / "formats.jsonl"
ROWS = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
BY_FORMAT: dict[str, list[dict]] = defaultdict(list)
for _row in ROWS:
    BY_FORMAT[_row["format"]].append(_row)


def test_the_corpus_is_broad():
    formats = {r["format"] for r in ROWS}
    contexts = {r["context"] for r in ROWS if r["expect"] == "secret"}
    assert len(formats) >= 150
    assert contexts == {"prose", "env", "json", "yaml", "header", "cli", "xml", "repeated"}


def test_recall_on_the_own_corpus_is_at_least_99_percent():
    positives = [r for r in ROWS if r["expect"] == "secret"]
    missed = [r for r in positives if leaked(r["secret"], redact(r["text"]).text)]
    recall = 1 - len(missed) / len(positives)
    print(f"own corpus recall: {len(positives) - len(missed)}/{len(positives)} = {recall:.2%}; missed: "
          + ", ".join(sorted(f"{r['format']}/{r['context']}" for r in missed)))
    assert recall >= 0.99


@pytest.mark.parametrize("fmt", [f.id for f in VENDOR_FORMATS])
def test_each_vendor_format_is_masked_in_every_context_and_near_misses_are_left(fmt):
    rows = BY_FORMAT[fmt]
    positives = [r for r in rows if r["expect"] == "secret"]
    assert len(positives) == 8
    for r in positives:
        out = redact(r["text"]).text
        assert not leaked(r["secret"], out), (r["context"], out)
        assert redact(out).text == out
    for r in (r for r in rows if r["expect"] == "clean"):
        assert redact(r["text"]).text == r["text"], r["context"]


def test_near_miss_share_is_reported():
    near = [r for r in ROWS if r["expect"] == "clean"]
    changed = [r for r in near if redact(r["text"]).changed]
    print(f"near misses changed: {len(changed)}/{len(near)}")
    assert near
