"""Ranking in context, through the real pipeline (WAL ledger → sync → LanceDB → Searcher).

The fake embedder is enough here: what is tested is where turns sit (their
position in the session, their session, their date), not what the model
understands. The real model runs in tests/test_search.py.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
from fake_embedder import FakeEmbedder

from exporters.lancedb import ACTIVE_FILE, SCHEMA_VERSION, open_retriever
from exporters.lancedb.rebuild import LanceRebuild
from indexer.search.searcher import Searcher, SearchRequest
from indexer.sync.context import Indexer, build_sinks
from indexer.sync.engine import sync_once

DAY = 86_400_000
T0 = int(dt.datetime(2025, 3, 3, 12, tzinfo=dt.UTC).timestamp() * 1000)


def index(config, embedder):
    ix = Indexer(config, sinks=build_sinks(config, embedder=embedder), redact=lambda s: s, redaction_version="t")
    try:
        return sync_once(ix)
    finally:
        ix.close()


def ask(config, embedder, query, **kw):
    searcher = Searcher(config, embedder=embedder)
    try:
        return searcher.search(SearchRequest(query=query, persona="atlas", **kw)).results
    finally:
        searcher.close()


def rows(config):
    reader = open_retriever(config.lancedb_dir)
    try:
        return reader.active_table("atlas").to_arrow().select(["turn_id", "session", "turn_seq"]).to_pylist()
    finally:
        reader.close()


def test_turns_know_their_position_in_the_session_and_forks_keep_it(writer, config_factory):
    a = [writer.turn("main", user=f"message number {i}", ts=T0 + i * 1000) for i in range(4)]
    writer.fork("side", a[1])
    b = writer.turn("side", user="a new branch", ts=T0 + 9000)
    config = config_factory(sinks=("lancedb",))
    index(config, FakeEmbedder())
    seq = {(r["session"], r["turn_id"]): r["turn_seq"] for r in rows(config)}
    assert [seq[("main", t)] for t in a] == [0, 1, 2, 3]
    assert seq[("side", a[0])] == 0 and seq[("side", a[1])] == 1 and seq[("side", b)] == 2


def test_a_table_of_the_previous_schema_is_rebuilt_and_searchable_meanwhile(writer, config_factory, monkeypatch):
    for i in range(3):
        writer.turn("main", user=f"the harbour crane number {i}", ts=T0 + i * 1000)
    config = config_factory(sinks=("lancedb",))
    embedder = FakeEmbedder()
    index(config, embedder)
    active = config.lancedb_dir / ACTIVE_FILE
    data = json.loads(active.read_text())
    data["personas"]["atlas"].pop("schema")  # what a schema-1 install wrote
    active.write_text(json.dumps(data))
    assert ask(config, embedder, "harbour crane", mode="keyword")  # still served
    # A search while the rebuild is open: every row staged in the new table, the switch not made.
    during: list[tuple[list[str], set[str]]] = []
    real_commit = LanceRebuild.commit

    def search_then_commit(self):
        live = json.loads(active.read_text())["personas"]["atlas"]["table"]
        assert live != self.table_name and self.written  # the new table is written and not live yet
        during.append(([r.path for r in ask(config, embedder, "harbour crane", mode="keyword")], set(self.written)))
        real_commit(self)

    monkeypatch.setattr(LanceRebuild, "commit", search_then_commit)
    summary = index(config, embedder)
    monkeypatch.undo()
    assert summary.personas["atlas"].mode == "rebuild"
    [(served, staged)] = during
    assert sorted(served) == sorted(staged) and len(staged) == 3  # the old table answered in full meanwhile
    assert sorted(r.path for r in ask(config, embedder, "harbour crane", mode="keyword")) == sorted(staged)
    assert json.loads(active.read_text())["personas"]["atlas"]["schema"] == SCHEMA_VERSION
    assert {r["turn_seq"] for r in rows(config)} == {0, 1, 2}


def test_a_date_in_the_query_prefers_what_was_said_then(writer, config_factory):
    # the same words on three different days, in three sessions
    for n, day in enumerate((0, 30, 60)):
        writer.turn(f"s{n}", user="we talked about the garden fence again", ts=T0 + day * DAY)
    config = config_factory(sinks=("lancedb",))
    embedder = FakeEmbedder()
    index(config, embedder)
    when = dt.datetime.fromtimestamp((T0 + 30 * DAY) / 1000, dt.UTC)
    for mode in ("hybrid", "keyword", "vector"):
        dated = ask(config, embedder, f"garden fence on {when:%B} {when.day}, {when.year}", mode=mode)
        assert dated[0].session == "s1", mode
        month = ask(config, embedder, f"garden fence in {when:%B %Y}", mode=mode)
        assert month[0].session == "s1", mode
    plain = ask(config, embedder, "garden fence", mode="keyword")
    assert len({r.score for r in plain}) == 1  # without a date: a tie, no time preference


def test_the_answer_after_the_question_ranks_above_an_unrelated_mention(writer, config_factory):
    writer.turn("chat", user="Which database did we pick for the billing service?", ts=T0)
    writer.turn("chat", user="Postgres, with read replicas for reporting.", ts=T0 + 1000)
    for i in range(6):
        writer.turn("chat", user=f"unrelated small talk {i}", ts=T0 + (2 + i) * 1000)
    writer.turn("chat", user="Postgres is also what my cousin uses for recipes.", ts=T0 + 10_000)
    config = config_factory(sinks=("lancedb",))
    embedder = FakeEmbedder()
    index(config, embedder)
    results = ask(config, embedder, "postgres billing database", mode="hybrid", max_results=5)
    texts = [r.snippet for r in results]
    answer = next(i for i, t in enumerate(texts) if "read replicas" in t)
    cousin = next(i for i, t in enumerate(texts) if "cousin" in t)
    assert answer < cousin


def test_context_never_crosses_the_scope(writer, config_factory):
    # a strongly matching private neighbour session must not lift or leak into a shared one
    writer.turn("open", user="kiwi notes", ts=T0)
    for i in range(3):
        writer.turn("secret", user=f"kiwi kiwi kiwi orchard {i}", ts=T0 + i)
    config = config_factory(sinks=("lancedb",))
    embedder = FakeEmbedder()
    index(config, embedder)
    from indexer.state.db import StateDB

    state = StateDB(config.state_db_path)
    try:
        state.set_visibility("secret", "private")
    finally:
        state.close()
    results = ask(config, embedder, "kiwi orchard", session="open", scope="persona")
    assert results and {r.session for r in results} == {"open"}
    assert 0.0 <= results[0].score <= 1.0


@pytest.mark.parametrize("scope", ["session", "project"])
def test_session_scope_with_dates_stays_in_scope(writer, config_factory, scope):
    writer.turn("a", user="ferry timetable", ts=T0)
    writer.turn("b", user="ferry timetable", ts=T0 + 2 * DAY)
    config = config_factory(sinks=("lancedb",))
    embedder = FakeEmbedder()
    index(config, embedder)
    when = dt.datetime.fromtimestamp((T0 + 2 * DAY) / 1000, dt.UTC)
    results = ask(config, embedder, f"ferry timetable {when:%Y-%m-%d}", session="a", scope=scope)
    assert [r.session for r in results] == ["a"]
