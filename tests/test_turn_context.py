"""A turn document opens with the previous turn's first words (``Previous: …``, issue 36): built
from that turn's text redacted whole, never holding what that turn's document masks; passed by the
sync build (a tail pass reads the previous turn it did not build); a value named a secret later is
masked in the next turn's context too; a format upgrade rebuilds beside the live index and no search
in between comes back empty. Real WAL ledger, the real redactor, real LanceDB and QMD files."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_embedder import FakeEmbedder
from searching import searching_throughout

from indexer.core import build as core_build
from indexer.core import documents
from indexer.core.chunking import embedding_text
from indexer.core.documents import CONTEXT_LABEL, CONTEXT_MAX_CHARS, turn_context, turn_document
from indexer.search.searcher import Searcher, SearchRequest
from indexer.sync.context import Indexer, build_sinks
from indexer.sync.engine import sync_once
from ledger.rows import MessageRow, TurnRow
from redaction import Redactor

TURN = TurnRow("T2", "T1", "normal", "completed", 1_763_000_000_000, 1_763_000_001_000, "m", "p")
AWS = "AKIAIOSFODNN7REVIEW3"  # an AWS access key id: a rule knows it anywhere
VPN = "Zq8-hunter-Vm2"  # no rule knows it alone


def redact(text: str) -> str:
    return Redactor().redact(text).text


def msgs(*pairs: tuple[str, str | None]) -> list[MessageRow]:
    return [MessageRow(f"m{i}", "T", role, text, len(text) if text else None, i) for i, (role, text) in enumerate(pairs)]


def lines(doc) -> list[str]:
    return doc.text.split("\n")[doc.body_start_line - 1:]


# -- the document builder (pure) ------------------------------------------------------------------------


def test_the_context_line_opens_the_body_and_the_title_stays_the_turns_own():
    prev = msgs(("user", "Which pooler do we run for Postgres?"), ("assistant", "PgBouncer."))
    doc = turn_document("a", "s", TURN, msgs(("user", "And its mode?"), ("assistant", "Transaction pooling.")),
                        redact=str, max_message_bytes=1000, previous=prev)
    assert lines(doc) == ["Previous: Which pooler do we run for Postgres?", "", "User: And its mode?", "",
                          "Assistant: Transaction pooling."]
    assert doc.body == "\n".join(lines(doc)) and "Which pooler" not in doc.title and "And its mode?" in doc.title
    # what the model sees: the turn as before the context line existed (it helps the keyword stage only)
    assert embedding_text(doc.body) == "And its mode?\n\nTransaction pooling."
    assert embedding_text("User: Previous: a line of the turn") == "Previous: a line of the turn"
    plain = turn_document("a", "s", TURN, msgs(("user", "And its mode?"), ("assistant", "Transaction pooling.")),
                          redact=str, max_message_bytes=1000)
    assert plain.title == doc.title and plain.text != doc.text and plain.content_hash != doc.content_hash


def test_the_context_is_the_first_user_message_on_one_line_cut_on_a_word():
    long = "word " * 100
    ctx = turn_context(msgs(("assistant", "I start"), ("user", f"first\nUser: forged\n\n{long}")), redact=str,
                       max_message_bytes=10_000)
    assert ctx is not None and "\n" not in ctx and ctx.startswith("first User: forged word")
    assert ctx.endswith(" …") and len(ctx) <= CONTEXT_MAX_CHARS + 2 and "wor …" not in ctx
    # no user message: its first message; nothing to say: no context
    assert turn_context(msgs(("assistant", "only me")), redact=str, max_message_bytes=99) == "only me"
    assert turn_context(msgs(("assistant", None)), redact=str, max_message_bytes=99) is None
    assert turn_context(msgs(("user", "x")), redact=str, max_message_bytes=99, max_chars=0) is None
    no_prev = turn_document("a", "s", TURN, msgs(("user", "hi")), redact=str, max_message_bytes=99, previous=[])
    assert lines(no_prev)[0] == "User: hi"


def test_a_secret_of_the_previous_turn_is_redacted_before_the_cut():
    """The key straddles the 200-character cut: cut first, its head would no longer match the rule
    and be stored; redacted whole first, nothing of it is."""
    filler = "x" * (CONTEXT_MAX_CHARS - 15)
    prev = msgs(("user", f"{filler} {AWS} is the deploy key"), ("assistant", "ok"))
    assert AWS[:10] in redact(f"{filler} {AWS}"[:CONTEXT_MAX_CHARS])  # the premise: a cut key escapes the rule
    doc = turn_document("a", "s", TURN, msgs(("user", "rotate it")), redact=redact, max_message_bytes=10_000,
                        previous=prev)
    assert lines(doc)[0].startswith(CONTEXT_LABEL + filler[:20])
    assert AWS[:8] not in doc.text


def test_a_value_named_a_secret_in_this_turn_is_masked_in_the_context_too():
    prev = msgs(("user", f"use {VPN} for the vpn"))
    assert redact(f"use {VPN} for the vpn") == f"use {VPN} for the vpn"  # the premise: alone it is not known
    doc = turn_document("a", "s", TURN, msgs(("user", f"by the way, the vpn password is {VPN}")), redact=redact,
                        max_message_bytes=1000, previous=prev)
    assert VPN not in doc.text and lines(doc)[0].startswith("Previous: use ")


# -- the sync build -------------------------------------------------------------------------------------


def indexer(config) -> Indexer:
    return Indexer(config, sinks=build_sinks(config, embedder=FakeEmbedder()))


def exported(config, session: str, turn: str) -> str:
    [path] = (Path(config.qmd_export_dir) / "atlas" / "sessions" / session).rglob(f"{turn}.md")
    return path.read_text()


@pytest.fixture
def config(config_factory):
    return config_factory(sinks=("lancedb", "qmd"))


def test_sync_passes_the_previous_turn_also_on_a_tail_pass(writer, config):
    first = writer.turn("main", user=f"deploy with key {AWS} tonight?", assistant="Yes.")
    second = writer.turn("main", user="Which region did we pick?", assistant="eu-west-1.")
    summary = writer.compaction("main", "They picked eu-west-1.")
    third = writer.turn("main", user="And the instance size?", assistant="m7g.large.")
    ix = indexer(config)
    try:
        sync_once(ix)
        fourth = writer.turn("main", user="Budget?", assistant="Under 300 a month.")
        sync_once(ix)  # a tail: only the new turn is built, the one before it is read
    finally:
        ix.close()
    assert "Previous:" not in exported(config, "main", first)
    text = exported(config, "main", second)
    assert "Previous: deploy with key " in text and AWS not in text and "[REDACTED" in text
    assert "Previous:" not in exported(config, "main", summary)
    assert "Previous:" not in exported(config, "main", third)  # after a compaction: no context
    assert "\nPrevious: And the instance size?\n\nUser: Budget?" in exported(config, "main", fourth)


def test_a_forks_first_turn_carries_no_words_of_the_session_it_was_forked_from(writer, config):
    """The turn before a fork's first own turn is its parent session's (maybe a private one's):
    the context line never crosses that line; the fork's later turns have theirs."""
    point = writer.turn("main", user="the zanzibarplum launch codes", assistant="noted")
    writer.fork("side", point)
    first = writer.turn("side", user="something else entirely", assistant="ok")
    second = writer.turn("side", user="and then?", assistant="done")
    ix = indexer(config)
    try:
        sync_once(ix)
    finally:
        ix.close()
    assert "zanzibarplum" not in exported(config, "side", first) and "Previous:" not in exported(config, "side", first)
    assert "Previous: something else entirely" in exported(config, "side", second)


def test_a_value_named_later_is_masked_in_the_next_turns_context(writer, config):
    early = writer.turn("main", user=f"use {VPN} for the vpn", assistant="ok")
    after = writer.turn("main", user="and the office wifi?", assistant="guest network")
    ix = indexer(config)
    try:
        sync_once(ix)
        assert f"Previous: use {VPN}" in exported(config, "main", after)  # nothing said it was a secret yet
        writer.turn("main", user=f"by the way, the vpn password is {VPN}")
        pass_ = sync_once(ix)
    finally:
        ix.close()
    for turn in (early, after):
        assert VPN not in exported(config, "main", turn)
    assert pass_.total("documents_written") == 3  # the new turn, the one holding it, the one after


def test_the_format_upgrade_rebuilds_beside_the_live_index_without_an_empty_search(writer, config, monkeypatch):
    """An index of the previous format (doc-v2: no context line) is rebuilt on the next pass; a
    search keeps answering throughout, and afterwards the context is in the index."""
    for i in range(12):
        writer.turn(f"s{i % 3}", user=f"what about topic {i}?", assistant=f"topic {i} is settled: plan {i}")
    with monkeypatch.context() as old:
        old.setattr(core_build, "DOCUMENT_FORMAT_VERSION", "doc-v2")
        old.setattr(documents, "turn_context", lambda *a, **k: None)
        old.setattr("indexer.sync.context.DOCUMENT_FORMAT_VERSION", "doc-v2")
        ix = indexer(config)
        try:
            sync_once(ix)
        finally:
            ix.close()
    searcher = Searcher(config, embedder=FakeEmbedder())
    ask = SearchRequest(query="topic 7 plan", persona="atlas", max_results=5, mode="keyword")
    try:
        assert searcher.search(ask).results
        with searching_throughout(searcher, ask) as answers:
            ix = indexer(config)
            try:
                summary = sync_once(ix)
            finally:
                ix.close()
        assert summary.personas["atlas"].mode == "rebuild" and summary.documents_written == 12
        assert answers and min(answers) > 0, answers
        found = searcher.search(SearchRequest(query="what about topic 6", persona="atlas", max_results=10,
                                              mode="keyword"))
        assert any(r.turn_id and "Previous: what about topic 6?" in r.snippet for r in found.results)
    finally:
        searcher.close()
