"""A turn shared by forked sessions is returned once, with the sessions that hold it (issue 12).

The pure rule on hand-made rows, then end to end: a real WAL ledger that forks a session
(shared and private forks), sync into real LanceDB, the Searcher and the HTTP API. The fake
embedder is enough: what is tested is which copies become one result, not what the model
understands."""

from __future__ import annotations

import pytest
from fake_embedder import FakeEmbedder
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from indexer.core.results import Hit, collapse, shown_candidates
from indexer.search.searcher import Searcher, SearchRequest
from indexer.state.db import StateDB
from indexer.sync.context import Indexer, build_sinks
from indexer.sync.engine import sync_once


def row(session, turn, *, chunk=0, text="User: the shared words", kind="turn", source="sessions"):
    folder = "compactions" if kind == "compaction" else "turns"
    path = f"memory/{turn}.md" if session is None else f"sessions/{session}/{folder}/{turn}.md"
    return f"{path}#{chunk}", {"path": path, "session": session, "turn_id": None if session is None else turn,
                               "kind": kind, "source": source, "chunk_index": chunk, "text": text}


def hits_of(*scored):
    rows, scores = {}, {}
    for score, (key, r) in scored:
        rows[key], scores[key] = r, score
    return collapse(scores, rows)


_candidates = st.lists(
    st.tuples(st.sampled_from(["main", "side", "third", None]), st.sampled_from(["t1", "t2", "t3", "t4"]),
              st.integers(0, 1), st.sampled_from(["same words", "edited words"]),
              st.floats(0, 1, allow_nan=False)),
    min_size=1, max_size=25)


@settings(max_examples=300, deadline=None)
@given(_candidates, st.integers(1, 6))
def test_the_text_is_read_for_enough_candidates_to_give_the_same_first_hits(cands, limit):
    """The searcher reads candidates without their text, then the text of
    ``shown_candidates`` only: the first ``limit`` hits built from those are exactly the
    first ``limit`` hits built from every candidate with its text."""
    rows, scores = {}, {}
    for session, turn, chunk, text, score in cands:
        key, r = row(session, turn, chunk=chunk, text=text)
        rows[key], scores[key] = r, score
    everything = collapse(scores, rows)[:limit]
    shown = shown_candidates(scores, {k: {c: v for c, v in r.items() if c != "text"} for k, r in rows.items()},
                             limit)
    assert len(shown) == len(set(shown))
    assert collapse({k: scores[k] for k in shown}, rows)[:limit] == everything


def test_fork_copies_of_a_turn_become_one_hit_listing_every_session():
    hits = hits_of((0.5, row("main", "t1")), (0.8, row("side", "t1")), (0.6, row("other", "t2")),
                   (0.3, row("third", "t1")))
    assert [(h.key, h.score, h.sessions) for h in hits] == [
        ("sessions/side/turns/t1.md#0", 0.8, ("side", "main", "third")),  # the best copy, then by score
        ("sessions/other/turns/t2.md#0", 0.6, ("other",)),
    ]


def test_one_hit_per_document_first():
    hits = hits_of((0.4, row("main", "t1", chunk=0)), (0.7, row("main", "t1", chunk=1, text="User: more")))
    assert hits == [Hit("sessions/main/turns/t1.md#1", 0.7, ("main",))]


@pytest.mark.parametrize("other", [
    row("side", "t1", text="User: different words"),  # same turn id, other content: not the same turn
    row("side", "t1", kind="compaction"),  # a compaction of the turn is another document
    row("side", "t9"),  # another turn with the same words
])
def test_only_identical_copies_of_the_same_turn_are_merged(other):
    hits = hits_of((0.9, row("main", "t1")), (0.8, other))
    assert len(hits) == 2 and all(len(h.sessions) == 1 for h in hits)


def test_memory_files_are_never_merged_and_list_no_session():
    hits = hits_of((0.9, row(None, "a")), (0.8, row(None, "b")))
    assert [h.sessions for h in hits] == [(), ()]


# -- end to end ------------------------------------------------------------------------------------------------


@pytest.fixture
def forked(writer, config_factory):
    """main: t0 t1 t2; side: forked from t1, then its own turn; secret: forked from t1, made private;
    a second persona with a turn of the same words."""
    t0 = writer.turn("main", user="we chose the heron deployment plan for the harbour cluster")
    t1 = writer.turn("main", user="the harbour cluster heron plan goes live on friday")
    writer.turn("main", user="unrelated chatter about lunch")
    writer.fork("side", t1)
    writer.turn("side", user="a different branch about cabbages")
    writer.fork("secret", t1)
    writer.turn("secret", user="private musings about cabbages")
    writer.turn("elsewhere", user="the harbour cluster heron plan goes live on friday", persona="nova")
    config = config_factory(sinks=("lancedb",))
    embedder = FakeEmbedder()
    ix = Indexer(config, sinks=build_sinks(config, embedder=embedder), redact=lambda s: s, redaction_version="t")
    try:
        sync_once(ix)
    finally:
        ix.close()
    state = StateDB(config.state_db_path)
    try:
        state.set_visibility("secret", "private")
    finally:
        state.close()
    searcher = Searcher(config, embedder=embedder)
    yield searcher, t0, t1
    searcher.close()


def search(searcher, query, **kw):
    return searcher.search(SearchRequest(query=query, persona=kw.pop("persona", "atlas"), **kw)).results


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "vector"])
def test_a_forked_turn_is_returned_once_with_the_sessions_the_caller_may_see(forked, mode):
    searcher, t0, t1 = forked
    results = search(searcher, "harbour cluster heron plan", session="main", scope="persona", mode=mode,
                     max_results=10)
    by_turn = {}
    for r in results:
        assert r.turn_id not in by_turn, f"turn {r.turn_id} returned twice"
        by_turn[r.turn_id] = r
    for turn in (t0, t1):
        r = by_turn[turn]
        assert r.session == r.sessions[0]  # the kept copy's own session first
        assert sorted(r.sessions) == ["main", "side"]  # the private fork is not listed
        assert r.path == f"sessions/{r.session}/turns/{turn}.md"
    assert all("secret" not in r.sessions and r.persona == "atlas" for r in results)


def test_the_private_fork_lists_itself_and_the_shared_copies(forked):
    searcher, _t0, t1 = forked
    results = search(searcher, "harbour cluster heron plan", session="secret", scope="persona", max_results=10)
    shared = next(r for r in results if r.turn_id == t1)
    assert sorted(shared.sessions) == ["main", "secret", "side"]
    assert len([r for r in results if r.turn_id == t1]) == 1


def test_session_and_project_scopes_list_only_their_sessions(forked):
    searcher, _t0, t1 = forked
    only_side = search(searcher, "harbour cluster heron plan", session="side", scope="session", max_results=10)
    assert {tuple(r.sessions) for r in only_side if r.turn_id == t1} == {("side",)}
    # a session in no project sees only itself
    assert all(r.sessions == ["main"] for r in search(searcher, "heron plan", session="main", scope="project"))


def test_max_results_counts_turns_not_copies(forked):
    searcher, t0, t1 = forked
    results = search(searcher, "harbour cluster heron plan", session="main", scope="persona", max_results=2)
    assert {r.turn_id for r in results} == {t0, t1}


def test_personas_are_never_merged(forked):
    searcher, _t0, t1 = forked
    nova = search(searcher, "harbour cluster heron plan", persona="nova")
    assert [(r.persona, r.session, r.sessions) for r in nova] == [("nova", "elsewhere", ["elsewhere"])]


def test_the_http_api_returns_the_sessions_field(forked):
    from indexer.service.api import create_app
    from indexer.service.metrics import Metrics

    searcher, _t0, t1 = forked

    class Backend:
        def search(self, request):
            return searcher.search(request)

    app = create_app(Backend(), admin_token=None, metrics=Metrics())
    with TestClient(app) as client:
        r = client.post("/v1/memory_search", json={"query": "harbour cluster heron plan", "persona": "atlas",
                                                   "session": "main", "scope": "persona", "max_results": 10})
        assert r.status_code == 200, r.text
        results = r.json()["results"]
        schema = client.get("/openapi.json").json()["components"]["schemas"]["SearchResultModel"]
    hit = [x for x in results if x["turn_id"] == t1]
    assert len(hit) == 1 and sorted(hit[0]["sessions"]) == ["main", "side"]
    assert "sessions" in schema["properties"]
