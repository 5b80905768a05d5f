"""Chunking: properties (Hypothesis) and a check with the real tokenizer."""

from __future__ import annotations

import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from indexer.core.chunking import (
    CHUNKING_VERSION,
    DEFAULT_MAX_TOKENS,
    DEFAULT_OVERLAP_TOKENS,
    MAX_CHARS_PER_TOKEN,
    chunk_document,
)
from indexer.embedding import model_files

_TOK = re.compile(r"\w+|[^\w\s]")


def words(text: str) -> int:
    return len(_TOK.findall(text))


def chars(text: str) -> int:
    """A counter where long words cost a lot (forces the in-word split path)."""
    return sum(1 + len(w) // 4 for w in text.split())


word = st.sampled_from(["alpha", "beta", "gamma", "delta", "x", "it's", "(ok)", "ü", "--", "a.b"])
giant = st.text(alphabet="abcdefghij0123", min_size=30, max_size=200)
line = st.one_of(
    st.just(""),
    st.just("   "),
    st.lists(word, min_size=1, max_size=8).map(" ".join),
    st.lists(word, min_size=20, max_size=120).map(" ".join),  # often longer than the window
    st.tuples(word, giant, word).map(" ".join),
)
doc = st.lists(line, min_size=0, max_size=40).map("\n".join)
limits = st.integers(min_value=3, max_value=60).flatmap(
    lambda m: st.tuples(st.just(m), st.integers(min_value=0, max_value=m))
)


def check_invariants(text: str, chunks, count, max_tokens: int, first_line: int = 1) -> None:
    lines = text.split("\n")
    assert [c.index for c in chunks] == list(range(len(chunks)))
    prev_start = prev_end = first_line - 1
    for c in chunks:
        assert c.text.strip(), "blank chunk"
        assert count(c.text) <= max_tokens, (c, count(c.text))
        assert first_line <= c.start_line <= c.end_line <= len(lines) + first_line - 1
        assert c.start_line >= prev_start and c.end_line >= prev_end, "out of order"
        prev_start, prev_end = c.start_line, c.end_line
        body = lines[c.start_line - first_line : c.end_line - first_line + 1]
        if c.start_line == c.end_line and c.text != body[0]:
            assert c.text in body[0], "a piece of a long line must come from that line"
        else:
            assert c.text == "\n".join(body)
    for i, ln in enumerate(lines):
        if not ln.strip():
            continue
        no = i + first_line
        covering = [c for c in chunks if c.start_line <= no <= c.end_line]
        assert covering, f"line {no} not covered"
        if not any(ln in c.text.split("\n") for c in covering):  # the line was split into pieces
            pieces = " ".join(c.text for c in covering)
            for w in ln.split():
                if count(w) <= max_tokens and len(w) <= max_tokens * MAX_CHARS_PER_TOKEN:
                    assert w in pieces.split(), f"word {w!r} of line {no} lost"
                else:
                    assert w in "".join(pieces.split()), "giant word lost"


@settings(max_examples=300, deadline=None)
@given(doc, limits, st.sampled_from([words, chars]), st.integers(min_value=1, max_value=9))
def test_chunk_properties(text: str, lim: tuple[int, int], count, first_line: int) -> None:
    max_tokens, overlap = lim
    chunks = chunk_document(text, count_tokens=count, max_tokens=max_tokens, overlap_tokens=overlap, first_line=first_line)
    check_invariants(text, chunks, count, max_tokens, first_line)
    again = chunk_document(text, count_tokens=count, max_tokens=max_tokens, overlap_tokens=overlap, first_line=first_line)
    assert again == chunks, "not deterministic"


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(word, min_size=1, max_size=6).map(" ".join), min_size=1, max_size=60), limits)
def test_overlap_is_bounded_and_progress_is_made(lines: list[str], lim: tuple[int, int]) -> None:
    max_tokens, overlap = lim
    text = "\n".join(lines)
    chunks = chunk_document(text, count_tokens=words, max_tokens=max_tokens, overlap_tokens=overlap)
    for a, b in zip(chunks, chunks[1:]):
        if a.start_line == a.end_line == b.start_line == b.end_line:
            continue  # pieces of one long line
        assert b.start_line > a.start_line
        shared = range(b.start_line, a.end_line + 1)
        assert sum(words(lines[i - 1]) for i in shared) <= overlap


def test_small_document_is_one_chunk() -> None:
    text = "Session: x\nTurn: 1\n\nUser: hi\nAssistant: hello"
    [c] = chunk_document(text, count_tokens=words, max_tokens=200, overlap_tokens=40)
    assert (c.index, c.start_line, c.end_line, c.text) == (0, 1, 5, text)


def test_blank_and_empty_documents() -> None:
    assert chunk_document("", count_tokens=words, max_tokens=10, overlap_tokens=2) == []
    assert chunk_document("\n  \n\t\n", count_tokens=words, max_tokens=10, overlap_tokens=2) == []
    [c] = chunk_document("\n\nhello\n\n", count_tokens=words, max_tokens=10, overlap_tokens=2)
    assert (c.start_line, c.end_line, c.text) == (3, 3, "hello")


def test_long_line_is_split_and_keeps_its_line_number() -> None:
    long = " ".join(f"w{i}" for i in range(100))
    text = f"first line\n{long}\nlast line"
    chunks = chunk_document(text, count_tokens=words, max_tokens=30, overlap_tokens=5)
    pieces = [c for c in chunks if c.start_line == c.end_line == 2]
    assert len(pieces) >= 4
    assert all(words(c.text) <= 30 for c in pieces)
    assert chunks[0].text == "first line" and chunks[-1].text == "last line"


def test_unbroken_giant_strings_are_split_by_characters() -> None:
    """BERT maps any word over 100 characters to one [UNK]: the character floor still splits it."""

    def unk(t: str) -> int:
        return sum(1 if len(w) > 100 else len(_TOK.findall(w)) for w in t.split())

    blob = "QUJD" * 250_000  # 1 MB of base64, one "word"
    t0 = time.monotonic()
    chunks = chunk_document(f"User: here it is\n{blob}\nAssistant: ok", count_tokens=unk, max_tokens=200, overlap_tokens=40)
    assert time.monotonic() - t0 < 5
    pieces = [c for c in chunks if c.start_line == c.end_line == 2]
    assert "".join(c.text for c in pieces) == blob
    assert all(len(c.text) <= 200 * MAX_CHARS_PER_TOKEN for c in chunks)


def test_defaults_fit_minilm_window() -> None:
    assert DEFAULT_MAX_TOKENS + 2 <= model_files.MAX_TOKENS
    assert 0 < DEFAULT_OVERLAP_TOKENS < DEFAULT_MAX_TOKENS
    assert CHUNKING_VERSION


def test_real_tokenizer_limits_hold() -> None:
    """Per-line counts add up for WordPiece: chunks measured whole stay within the limit."""
    from tokenizers import Tokenizer

    folder = model_files.packaged_model_dir()
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()

    def count(t: str) -> int:
        return len(tok.encode(t, add_special_tokens=False).ids)

    paragraph = (
        "User: can you check why the deploy of billing-api v2.3.1 failed at 03:14 UTC? "
        "Assistant: The migration `0042_add_invoice_index` timed out after 300s on the "
        "primary; I re-ran it with lock_timeout=5s and it passed. Naïve café résumé 🙂."
    )
    text = "\n".join([paragraph] * 40 + ["x" * 3000, "", paragraph])
    chunks = chunk_document(text, count_tokens=count, max_tokens=DEFAULT_MAX_TOKENS, overlap_tokens=DEFAULT_OVERLAP_TOKENS)
    check_invariants(text, chunks, count, DEFAULT_MAX_TOKENS)
    assert all(count(c.text) + 2 <= model_files.MAX_TOKENS for c in chunks)


def test_embedding_text_drops_role_labels_only():
    from indexer.core.chunking import embedding_text

    text = "User: what is the plan?\n\nAssistant: ship on Friday.\nUser:no space\n  User: indented\nSummary: done"
    assert embedding_text(text) == "what is the plan?\n\nship on Friday.\nUser:no space\n  User: indented\ndone"
    assert embedding_text("My User: field") == "My User: field"


def test_the_sink_embeds_chunks_without_role_labels(tmp_path):
    from fake_embedder import FakeEmbedder

    from exporters.lancedb import LanceSink
    from indexer.core.types import DocKind, Document, Source

    seen: list[str] = []

    class Recording(FakeEmbedder):
        def embed(self, texts):
            seen.extend(texts)
            return super().embed(texts)

    body = "User: the ferry leaves at nine\n\nAssistant: noted"
    text = "Session: s\nTurn: t\n\n" + body
    doc = Document(path="sessions/s/turns/t.md", source=Source.SESSIONS, persona="p", session="s", turn_id="t",
                   kind=DocKind.TURN, title="t", text=text, body=body, content_hash="h", body_start_line=4)
    sink = LanceSink(tmp_path / "db", Recording())
    try:
        sink.upsert("p", [doc])
    finally:
        sink.close()
    assert seen == ["the ferry leaves at nine\n\nnoted"]
