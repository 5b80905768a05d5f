"""Scope facts reused between state changes (StateDB.scope_facts): never stale. Every change —
by another connection (the sync worker, a CLI process), by another thread of the same StateDB,
or by the asking thread itself — is seen by the next call; an unchanged state DB answers
without its three queries. Real SQLite files in WAL mode; a property test interleaves random
changes and compares every answer with facts read afresh."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexer.core.scopes import ScopeFacts
from indexer.state.db import StateDB


def fresh(state: StateDB, persona: str, session: str | None) -> ScopeFacts:
    """The facts read with no memo at all: the three queries themselves."""
    return ScopeFacts(private=frozenset(state.private_sessions(persona)),
                      deleted=frozenset(state.deleted_sessions(persona)),
                      project_peers=frozenset(state.project_peers(session)) if session else frozenset())


def seeded(path: Path) -> StateDB:
    state = StateDB(path)
    state.register_sessions([(f"s{i}", "atlas", "active") for i in range(6)] + [("n0", "nova", "active")])
    state.project_add("p", ["s0", "s1"])
    return state


def selects(state: StateDB) -> list[str]:
    """Start recording this thread's SELECTs on the state DB (the list fills as they run)."""
    seen: list[str] = []
    conn: sqlite3.Connection = state.db.connection()
    conn.set_trace_callback(lambda sql: seen.append(sql) if sql.lstrip().upper().startswith("SELECT") else None)
    return seen


def test_an_unchanged_state_answers_from_memory_without_its_queries(tmp_path: Path) -> None:
    state = seeded(tmp_path / "state.sqlite")
    first = state.scope_facts("atlas", "s0")
    assert first == ScopeFacts(private=frozenset(), deleted=frozenset(), project_peers=frozenset({"s0", "s1"}))
    seen = selects(state)
    assert state.scope_facts("atlas", "s0") is first
    assert seen == []  # not one SELECT: only the data_version pragma
    assert state.scope_facts("atlas", "s2") == fresh(state, "atlas", "s2")  # another key: read
    assert len(seen) > 0


def test_a_commit_by_another_connection_is_seen_at_once(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    reader, writer = seeded(path), StateDB(path)  # the daemon's searcher vs a CLI process
    before = reader.scope_facts("atlas", "s0")
    assert writer.set_visibility("s1", "private")
    after = reader.scope_facts("atlas", "s0")
    assert after == ScopeFacts(private=frozenset({"s1"}), deleted=frozenset(), project_peers=frozenset({"s0", "s1"}))
    assert after != before
    writer.register_sessions([("s2", "atlas", "deleted")])
    writer.project_add("p", ["s3"])
    assert reader.scope_facts("atlas", "s0") == ScopeFacts(private=frozenset({"s1"}), deleted=frozenset({"s2"}),
                                                           project_peers=frozenset({"s0", "s1", "s3"}))


def test_a_write_by_the_asking_thread_and_by_another_thread_of_the_same_state_db(tmp_path: Path) -> None:
    state = seeded(tmp_path / "state.sqlite")
    state.scope_facts("atlas", "s0")
    state.set_visibility("s0", "private")  # this thread's own connection: data_version does not move
    assert state.scope_facts("atlas", "s0").private == frozenset({"s0"})

    def other() -> None:  # the sync worker: its own peewee connection
        state.project_remove("p", ["s1"])
        state.db.close()

    worker = threading.Thread(target=other)
    worker.start()
    worker.join()
    assert state.scope_facts("atlas", "s0").project_peers == frozenset({"s0"})


def test_a_rolled_back_write_leaves_the_facts_as_they_were(tmp_path: Path) -> None:
    state = seeded(tmp_path / "state.sqlite")
    before = state.scope_facts("atlas", "s0")
    try:
        with state.atomic():
            state.set_visibility("s0", "private")
            assert state.scope_facts("atlas", "s0").private == frozenset({"s0"})  # its own transaction sees it
            raise RuntimeError("roll back")
    except RuntimeError:
        pass
    assert state.scope_facts("atlas", "s0") == before == fresh(state, "atlas", "s0")


def test_long_labels_are_held_as_digests_and_still_answered_rightly(tmp_path: Path) -> None:
    """A session label may be of any length (a door caps it only by its own body or line limit):
    a client asking with many distinct long labels must not make the memo hold each of them."""
    state = seeded(tmp_path / "state.sqlite")
    member = "m" * 50_000
    state.register_sessions([(member, "atlas", "active")])
    state.project_add("p", [member])
    callers = [member, *(f"{'x' * 50_000}{i}" for i in range(20)), "s0"]
    for caller in callers:
        assert state.scope_facts("atlas", caller) == fresh(state, "atlas", caller)
    assert state.scope_facts("atlas", member).project_peers == frozenset({"s0", "s1", member})
    keys = list(state._facts.entries)
    assert len(keys) == len(callers)
    assert sum(len(session) for _, session in keys) < 40 * len(callers)  # digests, not 50,000 characters each
    seen = selects(state)
    assert state.scope_facts("atlas", member) is state.scope_facts("atlas", member) and seen == []  # reused


_OPS = st.lists(st.tuples(st.sampled_from(["private", "shared", "deleted", "active", "join", "leave", "ask"]),
                          st.sampled_from(["s0", "s1", "s2", "s3", "s4", "s5"]),
                          st.sampled_from(["mine", "other"])), min_size=1, max_size=30)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_every_answer_equals_facts_read_afresh_whatever_changes_in_between(tmp_path_factory, ops) -> None:
    path = tmp_path_factory.mktemp("memo") / "state.sqlite"
    mine, other = seeded(path), StateDB(path)
    for op, label, who in ops:
        db = mine if who == "mine" else other
        if op in ("private", "shared"):
            db.set_visibility(label, op)
        elif op in ("deleted", "active"):
            db.register_sessions([(label, "atlas", op)])
        elif op == "join":
            db.project_add("p", [label])
        elif op == "leave":
            db.project_remove("p", [label])
        for session in (label, None, "s0"):
            assert mine.scope_facts("atlas", session) == fresh(mine, "atlas", session)
        assert mine.scope_facts("nova", "n0") == fresh(mine, "nova", "n0")
    mine.close()
    other.close()
