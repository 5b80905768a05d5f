"""Scope rules: no result is ever outside the caller's scope.

Property tests over random personas, sessions, projects and visibilities,
against a real LanceDB index built by a real sync. Scoping does not depend on
the embedding model, so the fast deterministic embedder is used here.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporters.lancedb import LanceSink
from indexer.core.scopes import Scope, ScopeError, ScopeFacts, resolve
from indexer.runtime.config import load_config
from indexer.search.searcher import Searcher, SearchRequest
from indexer.sync.context import Indexer
from indexer.sync.engine import sync_once
from ledger.writer import LedgerWriter
from tests.fake_embedder import FakeEmbedder

PERSONAS = ["atlas", "nova", "sage"]
SESSIONS = [f"s{i}" for i in range(8)]


def test_resolve_rules():
    facts = ScopeFacts(private=frozenset({"p"}), deleted=frozenset({"d"}), project_peers=frozenset({"me", "peer"}))
    everything = frozenset({"sessions", "memory"})
    f = resolve("atlas", Scope.PERSONA, "me", everything, facts)
    assert f.allowed is None and f.excluded == {"p", "d"}
    assert f.allows({"persona": "atlas", "source": "sessions", "session": "x"})
    assert not f.allows({"persona": "nova", "source": "sessions", "session": "x"})
    assert not f.allows({"persona": "atlas", "source": "sessions", "session": "p"})
    assert f.allows({"persona": "atlas", "source": "memory", "session": None})
    own = resolve("atlas", Scope.PERSONA, "p", everything, facts)
    assert own.allows({"persona": "atlas", "source": "sessions", "session": "p"})  # private sees itself
    proj = resolve("atlas", Scope.PROJECT, "me", everything, facts)
    assert proj.allows({"persona": "atlas", "source": "sessions", "session": "peer"})
    assert not proj.allows({"persona": "atlas", "source": "sessions", "session": "x"})
    sess = resolve("atlas", Scope.SESSION, "me", frozenset({"sessions"}), facts)
    assert not sess.allows({"persona": "atlas", "source": "sessions", "session": "peer"})
    assert not sess.allows({"persona": "atlas", "source": "memory", "session": None})
    with pytest.raises(ScopeError):
        resolve("atlas", Scope.SESSION, None, everything, facts)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A ledger with 3 personas x 8 sessions, each turn saying the shared word 'zebra'."""
    tmp = tmp_path_factory.mktemp("scopes")
    ledger = tmp / "agents.db"
    with LedgerWriter(ledger, start_ms=1_763_000_000_000, seed=5) as w:
        for persona in PERSONAS:
            for label in SESSIONS:
                for i in range(2):
                    w.turn(f"{persona}-{label}", persona=persona, user=f"zebra question {i} from {persona} {label}",
                           assistant=f"zebra answer {i} for {label}")
    ws = tmp / "ws" / "atlas"
    ws.mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# memory\nzebra memory of atlas\n")
    config = load_config(None, env={}, overrides={
        "ledger": {"path": str(ledger)}, "index": {"dir": str(tmp / "index"), "sinks": ["lancedb"]},
        "memory": {"atlas": [str(ws / "MEMORY.md")]}})
    embedder = FakeEmbedder()
    # Scoping does not depend on redaction either: plain text keeps the test about scopes.
    ix = Indexer(config, sinks=[LanceSink(config.lancedb_dir, embedder)], redact=str, redaction_version="none")
    sync_once(ix)
    searcher = Searcher(config, embedder=embedder, state=ix.state)
    yield ix, searcher
    searcher.close()
    ix.close()


visibility = st.dictionaries(st.sampled_from(SESSIONS), st.sampled_from(["private", "shared"]), max_size=8)
projects = st.dictionaries(st.sampled_from(["p1", "p2"]), st.sets(st.sampled_from(SESSIONS), max_size=5), max_size=2)


@given(persona=st.sampled_from(PERSONAS), caller=st.none() | st.sampled_from(SESSIONS),
       scope=st.sampled_from(list(Scope)), vis=visibility, proj=projects,
       sources=st.sets(st.sampled_from(["sessions", "memory"]), min_size=1),
       mode=st.sampled_from(["hybrid", "keyword", "vector"]), deleted=st.sets(st.sampled_from(SESSIONS), max_size=2))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_no_result_is_ever_outside_scope(world, persona, caller, scope, vis, proj, sources, mode, deleted):
    ix, searcher = world
    state = ix.state
    label = (lambda s: f"{persona}-{s}")
    with state.atomic():
        state.ProjectMember.delete().execute()
        state.SessionReg.update(visibility="shared", ledger_status="active").execute()
        for s, v in vis.items():
            state.set_visibility(label(s), v)
        for name, members in proj.items():
            state.project_add(name, [label(s) for s in members])
        for s in deleted:  # marked deleted in the registry: hidden even before the purge runs
            state.SessionReg.update(ledger_status="deleted").where(state.SessionReg.label == label(s)).execute()
    caller_label = label(caller) if caller else None
    request = dict(query="zebra", persona=persona, session=caller_label, scope=scope.value, sources=sorted(sources),
                   max_results=100, mode=mode)
    if scope is not Scope.PERSONA and caller is None:
        from indexer.search.searcher import SearchError

        with pytest.raises(SearchError):
            searcher.search(SearchRequest(**request))
        return
    results = searcher.search(SearchRequest(**request)).results
    private = {label(s) for s, v in vis.items() if v == "private"}
    gone = {label(s) for s in deleted}
    peers = {label(s) for members in proj.values() if caller in members for s in members} | {caller_label}
    for r in results:
        assert r.persona == persona
        if r.source == "memory":
            assert "memory" in sources and r.session is None
            continue
        assert "sessions" in sources
        assert r.session.startswith(persona + "-")
        assert r.session not in gone
        assert r.session not in private or r.session == caller_label
        if scope is Scope.SESSION:
            assert r.session == caller_label
        if scope is Scope.PROJECT:
            assert r.session in peers
    # and nothing in scope is missing: every turn says "zebra" and max_results exceeds the persona's
    # 16 turns + 1 memory file, so the answer is exactly the visible set, rule by rule (ARCHITECTURE.md)
    visible = set()
    if "sessions" in sources:
        visible = {label(s) for s in SESSIONS} - gone - (private - {caller_label})
        if scope is Scope.SESSION:
            visible &= {caller_label}
        elif scope is Scope.PROJECT:
            visible &= peers
    turns = Counter(r.session for r in results if r.source == "sessions")
    assert turns == {session: 2 for session in visible}, (turns, visible)
    memory_files = 1 if "memory" in sources and persona == "atlas" else 0
    assert sum(1 for r in results if r.source == "memory") == memory_files


def test_project_membership_applies_at_query_time(world):
    ix, searcher = world
    state = ix.state
    with state.atomic():
        state.ProjectMember.delete().execute()
        state.SessionReg.update(visibility="shared", ledger_status="active").execute()
    req = SearchRequest(query="zebra", persona="nova", session="nova-s0", scope="project", max_results=100,
                        sources=["sessions"])
    assert {r.session for r in searcher.search(req).results} == {"nova-s0"}
    state.project_add("web", ["nova-s0", "nova-s3"])
    assert {r.session for r in searcher.search(req).results} == {"nova-s0", "nova-s3"}
    state.project_remove("web", ["nova-s3"])
    assert {r.session for r in searcher.search(req).results} == {"nova-s0"}
