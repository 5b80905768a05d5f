"""Corpus regression tests: recall on secrets_dev, zero changes on clean_chat.

Targets come from the issue: recall >= 98% on ``expect: secret`` cases
(scored as in ../shared/redaction/README.md) and 0/117 clean_chat lines
changed. Skipped with a reason when ../shared is not present.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from redaction import redact
from tests.redaction_corpus import leaked

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "redaction"
pytestmark = pytest.mark.skipif(not (CORPUS / "secrets_dev.jsonl").is_file(),
                                reason=f"redaction corpus not found at {CORPUS} (checkout without ../shared)")

RECALL_TARGET = 0.98


def _load(name: str) -> list[dict]:
    with (CORPUS / name).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_recall_on_secrets_dev() -> None:
    secrets = [r for r in _load("secrets_dev.jsonl") if r["expect"] == "secret"]
    missed = [r for r in secrets if leaked(r["secret"], redact(r["text"]).text)]
    recall = 1 - len(missed) / len(secrets)
    assert recall >= RECALL_TARGET, (
        f"recall {recall:.1%} < {RECALL_TARGET:.0%}; missed: " + ", ".join(sorted({r["rule"] for r in missed})))


def test_clean_chat_untouched() -> None:
    rows = _load("clean_chat.jsonl")
    changed = [(r["category"], r["text"][:80]) for r in rows if redact(r["text"]).changed]
    assert not changed, f"{len(changed)}/{len(rows)} clean lines changed: {changed}"


def test_secrets_dev_idempotent() -> None:
    for r in _load("secrets_dev.jsonl"):
        once = redact(r["text"]).text
        assert redact(once).text == once, r["rule"]
