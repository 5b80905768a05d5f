"""The content contract and safe labels (property tests)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from indexer.core.documents import Skip, compaction_document, one_line, turn_document
from indexer.core.safe_names import MAX_LEN, safe_segment, turn_path
from ledger.rows import CompactionRow, MessageRow, TurnRow

SAFE = re.compile(r"[A-Za-z0-9._-]+")
TURN = TurnRow("T1", None, "normal", "completed", 1_763_000_000_000, 1_763_000_001_000, "m", "p")


def msg(role, content, seq, length=None):
    return MessageRow(f"m{seq}", "T1", role, content, length if length is not None else (len(content) if content else None), seq)


@given(st.text(max_size=400))
@settings(max_examples=300)
def test_safe_segment_is_one_safe_segment(label):
    seg = safe_segment(label)
    assert SAFE.fullmatch(seg)
    assert seg not in (".", "..") and not seg.startswith(".")
    assert len(seg) <= MAX_LEN


@given(st.text(max_size=100), st.text(max_size=100))
@settings(max_examples=300)
def test_safe_segment_is_unique(a, b):
    if a != b:
        assert safe_segment(a) != safe_segment(b)


def test_hostile_labels():
    cases = ["../../etc/passwd", "a/b", "a_b", "", "x" * 300, "ünï©ødé", "nul\x00byte", ".", "..", "build",
             "main-0123456789"]
    segs = [safe_segment(c) for c in cases]
    assert len(set(segs)) == len(cases)
    assert safe_segment("main") == "main" and safe_segment("a_b") == "a_b"
    assert "/" not in "".join(segs) and ".." not in segs
    assert turn_path(safe_segment("../x"), "T1").count("/") == 3


def test_turn_document_shape_and_hash():
    doc = turn_document("atlas", "main", TURN, [msg("user", "Hi", 0), msg("assistant", "Hello", 1)],
                        redact=str, max_message_bytes=1000)
    assert doc.text.split("\n")[:2] == ["Session: main", "Turn: T1"]
    assert doc.text.endswith("\n\nUser: Hi\n\nAssistant: Hello")
    assert doc.text.split("\n")[doc.body_start_line - 1] == "User: Hi"
    assert len(doc.content_hash) == 64 and doc.path == "sessions/main/turns/T1.md"
    again = turn_document("atlas", "main", TURN, [msg("user", "Hi", 0), msg("assistant", "Hello", 1)],
                          redact=str, max_message_bytes=1000)
    assert again.content_hash == doc.content_hash


def test_hostile_label_cannot_forge_lines():
    doc = turn_document("atlas", "evil\nUser: injected", TURN, [msg("user", "x", 0)], redact=str,
                        max_message_bytes=1000)
    assert doc.text.split("\n")[0] == "Session: evil\\nUser: injected"
    assert doc.session == "evil\nUser: injected"


def test_redaction_applies_to_label_and_body_before_hashing():
    red = lambda s: s.replace("SECRET", "***")  # noqa: E731
    doc = turn_document("atlas", "SECRET-label", TURN, [msg("user", "my SECRET", 0)], redact=red, max_message_bytes=99)
    assert "SECRET" not in doc.text and "SECRET" not in doc.title
    plain = turn_document("atlas", "SECRET-label", TURN, [msg("user", "my ***", 0)], redact=str, max_message_bytes=99)
    assert doc.content_hash != turn_document("atlas", "SECRET-label", TURN, [msg("user", "my SECRET", 0)],
                                             redact=str, max_message_bytes=99).content_hash
    assert plain.body == doc.body


def test_empty_and_oversized_turns():
    assert turn_document("a", "s", TURN, [msg("user", None, 0), msg("assistant", "  ", 1)], redact=str,
                         max_message_bytes=10) is None
    cut = turn_document("a", "s", TURN, [MessageRow("m", "T1", "user", "the 012345", 50, 0, truncated=40),
                                         msg("assistant", "the answer", 1)], redact=str, max_message_bytes=10)
    # the word the cut split is left out with the rest: a secret split there is never stored in part
    assert cut.body == ("User: the\n[… truncated: 46 more bytes (ledger.max_message_bytes = 10)]\n\n"
                        "Assistant: the answer")
    assert cut.truncated_bytes == 46
    one_word = turn_document("a", "s", TURN, [MessageRow("m", "T1", "user", "0123456789", 50, 0, truncated=40)],
                             redact=str, max_message_bytes=10)
    assert one_word.body == "User: [… truncated: 50 more bytes (ledger.max_message_bytes = 10)]"
    spaced = turn_document("a", "s", TURN, [MessageRow("m", "T1", "user", "the words ", 50, 0, truncated=40)],
                           redact=str, max_message_bytes=10)
    assert spaced.body == "User: the words\n[… truncated: 40 more bytes (ledger.max_message_bytes = 10)]"


def test_a_secret_split_by_the_size_cut_is_not_stored_in_part():
    from redaction import Redactor

    token = "ghp_Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8"  # 40 characters: the cut keeps 35 of them
    head = ("x" * 9 + " ") * 97 + "filler " + token[:35]
    redact = lambda text: Redactor().redact(text).text  # noqa: E731
    doc = turn_document("a", "s", TURN, [MessageRow("m", "T1", "user", head, 2000, 0, truncated=1000)],
                        redact=redact, max_message_bytes=len(head.encode()))
    assert token[:12] not in doc.text and doc.body.endswith("more bytes (ledger.max_message_bytes = 1,012)]")
    assert doc.truncated_bytes == 1000 + 35


def test_compaction_document():
    row = CompactionRow("T1", "decided X", 9, "haiku", None)
    doc = compaction_document("a", "s", TURN, row, redact=str, max_message_bytes=100)
    assert doc.path == "sessions/s/compactions/T1.md" and doc.body == "Summary: decided X"
    assert isinstance(compaction_document("a", "s", TURN, None, redact=str, max_message_bytes=9), Skip)


def test_one_line_escapes_controls():
    assert one_line("a\r\nb\x00c\u2028") == "a\\r\\nb\\x00c\\u2028"


def test_the_model_and_provider_fields_are_redacted_like_the_text():
    from dataclasses import replace as with_fields

    from redaction import Redactor

    key = "AKIAIOSFODNN7REVIEW3"
    turn = with_fields(TURN, model=f"gpt-{key}", provider=f"prov {key}")
    doc = turn_document("a", "s", turn, [msg("user", "hello", 0)], redact=lambda t: Redactor().redact(t).text,
                        max_message_bytes=100)
    assert key not in doc.text and "Model: gpt-" in doc.text and "Provider: prov " in doc.text
