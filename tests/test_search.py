"""memory_search end to end: ledger -> sync -> LanceDB with the real model -> search."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from exporters.lancedb.rebuild import LanceRebuild
from indexer.search.retrieval import DocumentNotFound, get_document
from indexer.search.searcher import SearchRequest, snippet_for
from indexer.sync.engine import sync_once
from tests.cli_runner import run_cli
from tests.demo_index import build_demo_index

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    index = build_demo_index(tmp_path_factory.mktemp("search"))
    yield index.config, index.ix, index.searcher, index.embedder
    index.close()


def ask(searcher, query, **kw):
    return searcher.search(SearchRequest(query=query, persona=kw.pop("persona", "atlas"), **kw))


@pytest.mark.parametrize("mode", ["hybrid", "vector", "keyword"])
def test_modes_find_the_decision(demo, mode):
    _, _, searcher, _ = demo
    response = ask(searcher, "what did we decide about JWT expiry", mode=mode)
    assert response.mode == mode and response.model
    top = response.results[:3]
    assert len(response.results) >= 3
    assert any("15-minute" in r.snippet or "15 minutes" in r.snippet for r in top)
    for r in response.results:
        assert 0.0 <= r.score <= 1.0 and r.persona == "atlas"
    assert [r.score for r in response.results] == sorted((r.score for r in response.results), reverse=True)


def test_result_shape_matches_the_contract(demo):
    _, _, searcher, _ = demo
    data = ask(searcher, "PgBouncer", max_results=3).as_dict()
    assert set(data) == {"results", "mode", "model", "took_ms", "warnings"} and data["warnings"] == []
    r = data["results"][0]
    assert set(r) == {"path", "source", "persona", "session", "turn_id", "kind", "start_line", "end_line", "score",
                      "snippet", "timestamp", "sessions"}
    assert r["session"] == "main" and r["sessions"][0] == "main" and r["kind"] == "turn" and r["path"].startswith("sessions/main/turns/")
    assert "PgBouncer" in r["snippet"] and r["timestamp"].endswith("Z")


def test_min_score_is_a_threshold_across_queries(demo):
    _, _, searcher, _ = demo
    for q in ("JWT expiry", "postgres version", "zzzz unrelated qqqq"):
        assert ask(searcher, q, min_score=0.99).results == []
        loose = ask(searcher, q, min_score=0.0).results
        cut = ask(searcher, q, min_score=0.4).results
        assert loose, q  # min_score 0 returns the best matches, even weak ones
        assert all(r.score >= 0.4 for r in cut) and len(cut) <= len(loose)
        assert [r.path for r in cut] == [r.path for r in loose if r.score >= 0.4]
    # Unrelated text: the vector stage still returns neighbours, all scored low.
    unrelated = ask(searcher, "zzzz unrelated qqqq", min_score=0.0).results
    assert unrelated and all(r.score < 0.35 for r in unrelated)


def test_memory_source_and_sources_filter(demo):
    _, _, searcher, _ = demo
    mem = ask(searcher, "canary deploys", sources=["memory"]).results
    assert mem and all(r.source == "memory" and r.session is None and r.kind == "memory" for r in mem)
    sess = ask(searcher, "canary deploys", sources=["sessions"]).results
    assert sess and all(r.source == "sessions" for r in sess)


def test_personas_are_isolated(demo):
    _, _, searcher, _ = demo
    nova = ask(searcher, "vinaigrette", persona="nova").results
    assert nova and any("vinaigrette" in r.snippet.lower() for r in nova)
    assert all(r.persona == "nova" for r in nova)
    atlas = ask(searcher, "vinaigrette").results
    assert atlas  # atlas gets its own (unrelated) best matches, never nova's
    assert all(r.persona == "atlas" for r in atlas)
    assert not any("vinaigrette" in r.snippet.lower() for r in atlas)


def test_secrets_never_reach_results(demo):
    from indexer.cli.demo import DEMO_SECRETS

    _, _, searcher, _ = demo
    for q in ("deploy env AWS key", "billing connect postgres"):
        results = ask(searcher, q, max_results=20).results
        assert results and any("[REDACTED" in r.snippet or "***" in r.snippet for r in results), q
        for r in results:
            for secret in DEMO_SECRETS:
                assert secret not in r.snippet


def test_get_returns_stored_text_and_line_ranges(demo):
    config, ix, searcher, _ = demo
    hit = ask(searcher, "PgBouncer", max_results=1).results[0]
    whole = get_document(config, "atlas", hit.path)
    assert whole.text.startswith("Session: main\nTurn: ")
    part = get_document(config, "atlas", hit.path, from_line=hit.start_line, lines=hit.end_line - hit.start_line + 1)
    assert "PgBouncer" in part.text
    with pytest.raises(DocumentNotFound):
        get_document(config, "nova", hit.path)  # another persona's path
    ix.state.set_visibility("main", "private")
    try:
        with pytest.raises(DocumentNotFound):
            get_document(config, "atlas", hit.path, session="worker/auth #2")
        assert get_document(config, "atlas", hit.path, session="main").text == whole.text
    finally:
        ix.state.set_visibility("main", "shared")


def test_private_session_is_hidden_from_others(demo):
    _, ix, searcher, _ = demo
    ix.state.set_visibility("dm:+1 555/123", "private")
    try:
        others = ask(searcher, "Kafka retention", session="main", max_results=20).results
        assert others  # the caller still sees the persona's other sessions
        assert all(r.session != "dm:+1 555/123" for r in others)
        own = ask(searcher, "Kafka retention", session="dm:+1 555/123", max_results=20).results
        assert any(r.session == "dm:+1 555/123" for r in own)
    finally:
        ix.state.set_visibility("dm:+1 555/123", "shared")


def test_snippet_shows_matching_lines():
    text = "User: hello\n\nAssistant: we chose Postgres 16.4\nline four\nline five"
    snippet, lo, hi = snippet_for(text, 5, ["postgres"])
    assert "Postgres 16.4" in snippet and lo >= 5


def test_forced_reindex_embeds_nothing_new_and_search_never_goes_empty(demo, monkeypatch):
    config, ix, searcher, embedder = demo
    inner = embedder.inner
    calls_before = inner.calls
    answers: list[tuple[float, float, int]] = []
    stop = threading.Event()
    rebuilds: list[tuple[str, float]] = []  # (persona, when its rebuild table was created / committed)
    real_init, real_commit = LanceRebuild.__init__, LanceRebuild.commit

    def opened(self, sink, persona):
        real_init(self, sink, persona)
        rebuilds.append(("open " + persona, time.monotonic()))

    def committed(self):
        real_commit(self)
        rebuilds.append(("commit " + self.persona, time.monotonic()))

    monkeypatch.setattr(LanceRebuild, "__init__", opened)
    monkeypatch.setattr(LanceRebuild, "commit", committed)

    def hammer():
        while not stop.is_set():
            t0 = time.monotonic()
            n = len(ask(searcher, "JWT expiry").results)
            answers.append((t0, time.monotonic(), n))

    t = threading.Thread(target=hammer)
    t.start()
    try:
        summary = sync_once(ix, force=True)
    finally:
        stop.set()
        t.join()
        monkeypatch.undo()
    assert summary.personas["atlas"].mode == "rebuild"
    assert inner.calls == calls_before  # every body came from the cache
    assert embedder.hits > 0
    assert answers and min(n for _, _, n in answers) > 0
    # ... and some of those searches ran while atlas's rebuild was open (built, not yet live)
    when = dict(rebuilds)
    began, ended = when["open atlas"], when["commit atlas"]
    assert sum(1 for t0, t1, _ in answers if began <= t0 and t1 <= ended) > 0, (len(answers), ended - began)


cli = run_cli


def test_cli_search_get_and_batch(demo):
    config, _, _, _ = demo
    cfg = str(config.index.dir.parent / "ledger-indexer.toml")
    out = cli("--config", cfg, "search", "postgres upgrade", "--persona", "atlas", "--json", "-n", "3")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert len(data["results"]) <= 3 and data["mode"] == "hybrid"
    path = data["results"][0]["path"]
    got = cli("--config", cfg, "get", path, "--persona", "atlas", "--from", "1", "--lines", "2")
    assert got.returncode == 0 and got.stdout.startswith("Session: ")
    past = cli("--config", cfg, "get", path, "--persona", "atlas", "--from", "99999")
    assert past.returncode == 2 and past.stdout == "" and "is past its end" in past.stderr
    batch = "\n".join([json.dumps({"id": 1, "query": "JWT", "persona": "atlas"}),
                       json.dumps({"query": "vinaigrette", "persona": "nova", "mode": "keyword"}),
                       json.dumps({"query": "", "persona": "atlas"}), "not json"]) + "\n"
    res = cli("--config", cfg, "search", "--batch", "-", stdin=batch)
    lines = [json.loads(x) for x in res.stdout.splitlines()]
    assert len(lines) == 4 and lines[0]["id"] == 1 and lines[0]["results"]
    assert lines[1]["results"] and lines[2] == {"error": "line 3: query: String should have at least 1 character"}
    assert lines[3]["error"].startswith("line 4: Expecting value") and "\n" not in lines[3]["error"]
    assert res.returncode == 1
    bad = cli("--config", cfg, "search", "x", "--persona", "atlas", "--scope", "session")
    assert bad.returncode == 2 and "session" in bad.stderr


def test_cli_names_an_unknown_persona_instead_of_answering_nothing(demo):
    config, _, _, _ = demo
    cfg = str(config.index.dir.parent / "ledger-indexer.toml")
    out = cli("--config", cfg, "search", "JWT expiry", "--persona", "Atlas")
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.startswith("ledger-indexer: unknown persona 'Atlas': no index holds it"), out.stderr


class _GatedEmbedder:
    """The real embedder; each query embedding records when it started and ended and may
    wait for a gate first (how the searcher orders it against scope resolution)."""

    def __init__(self, inner, hold_s: float = 0.0):
        self.inner, self.hold_s = inner, hold_s
        self.started, self.finished = threading.Event(), threading.Event()

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def embed_query(self, text):
        self.started.set()
        threading.Event().wait(self.hold_s)  # still running while the scope is resolved
        try:
            return self.inner.embed_query(text)
        finally:
            self.finished.set()


class _WatchedState:
    """The searcher's state DB; ``scope_facts`` runs ``during`` first (the scope resolution
    of a request, observed while it happens)."""

    def __init__(self, inner, during):
        self.inner, self.during = inner, during

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def scope_facts(self, persona, session):
        self.during()
        return self.inner.scope_facts(persona, session)


def test_the_query_embedding_runs_while_the_scope_is_resolved(demo):
    from indexer.search.searcher import Searcher

    config, ix, searcher, embedder = demo
    gated = _GatedEmbedder(embedder, hold_s=0.3)
    seen = {}

    def during():  # the embedding of this request has started and is still running
        seen["embedding started"] = gated.started.wait(10)
        seen["embedding finished"] = gated.finished.is_set()

    overlapped = Searcher(config, embedder=gated, state=_WatchedState(ix.state, during))
    try:
        request = SearchRequest(query="what did we decide about JWT expiry", persona="atlas")
        response = overlapped.search(request)
    finally:
        overlapped.close()
    assert seen == {"embedding started": True, "embedding finished": False}
    expected = searcher.search(request)
    assert [(r.path, r.score) for r in response.results] == [(r.path, r.score) for r in expected.results]


def test_a_request_whose_scope_fails_waits_for_its_embedding_in_flight(demo):
    import sqlite3

    from indexer.search.searcher import Searcher

    config, ix, _searcher, embedder = demo
    gated = _GatedEmbedder(embedder, hold_s=0.3)
    seen = {}

    def during():  # the state DB fails while this request's embedding is running
        seen["embedding in flight"] = gated.started.wait(10) and not gated.finished.is_set()
        raise sqlite3.OperationalError("database is locked")

    failing = Searcher(config, embedder=gated, state=_WatchedState(ix.state, during))
    try:
        with pytest.raises(sqlite3.OperationalError):
            failing.search(SearchRequest(query="JWT expiry", persona="atlas"))
        assert seen == {"embedding in flight": True}
        assert gated.finished.is_set()  # the request did not return before its embedding ended
    finally:
        failing.close()
