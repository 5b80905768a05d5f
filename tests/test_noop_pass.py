"""A sync pass with nothing new (issue 12): the state DB indexes of schema 3 and
the checks a pass skips while the ledger files are unchanged. Real WAL ledgers,
real state DB files, the real QMD sink; no timing (speed is in bench/noop_pass.py)."""

from __future__ import annotations

import json
import os
import sqlite3
import time

import pytest

import indexer.state.db as db_mod
import indexer.sync.revisit as revisit
from indexer.state.db import INDEXES_3, INDEXES_4, INDEXES_5, StateDB
from indexer.sync import quiet
from indexer.sync.context import Indexer
from indexer.sync.engine import sync_once
from ledger.reader import LedgerReader
from tests.test_sync import expected_paths, make_indexer  # noqa: F401  (fixture)

# -- schema 3 ----------------------------------------------------------------------------------------


def _plan(path, sql: str, params: tuple) -> str:
    con = sqlite3.connect(path)
    try:
        return " | ".join(row[-1] for row in con.execute("EXPLAIN QUERY PLAN " + sql, params))
    finally:
        con.close()


def _index_columns(path, names) -> dict[str, list[str]]:
    con = sqlite3.connect(path)
    try:
        return {name: [c[2] for c in con.execute(f'PRAGMA index_info("{name}")')] for name in names}
    finally:
        con.close()


def test_a_state_db_of_schema_2_gains_the_indexes_and_keeps_its_data(tmp_path, monkeypatch):
    from indexer.core.types import DocKind, Document, Source

    path = tmp_path / "state.sqlite"
    monkeypatch.setattr(db_mod, "MIGRATIONS", db_mod.MIGRATIONS[:2])  # the release before issue 12
    old = StateDB(path)
    assert old.schema_version == 2
    docs = [Document(path=f"sessions/s{i % 3}/turns/T{i}.md", source=Source.SESSIONS, persona="atlas",
                     session=f"s{i % 3}", turn_id=f"T{i}", kind=DocKind.TURN, title="t", text="x", body="x",
                     content_hash=f"h{i}", timestamp_ms=1, body_start_line=1) for i in range(30)]
    docs.append(Document(path="memory/MEMORY.md", source=Source.MEMORY, persona="atlas", session=None,
                         turn_id=None, kind=DocKind.MEMORY, title="m", text="m", body="m", content_hash="hm",
                         timestamp_ms=1, body_start_line=1))
    with old.atomic():
        old.record_documents(docs)
        old.register_sessions([("s0", "atlas", "active"), ("s1", "atlas", "deleted")])
        # as that release wrote them (its tables, its meta rows)
        old.db.execute_sql("INSERT INTO bad_rows(persona, session_label, turn_id, reason, detail, seen_at,"
                           " fingerprint, checked_at) VALUES('atlas', 's2', 'G1', 'missing_turn', 'gone', 1, 'fp', 0)")
        old.set_meta("memory_sessions_ledger_cursor_v1", "42", "atlas")
    old.close()
    con = sqlite3.connect(path)
    names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    con.close()
    assert not names & set(INDEXES_3)

    monkeypatch.undo()  # this release's migrations (3 and 4)
    state = StateDB(path)
    try:
        assert state.schema_version == len(db_mod.MIGRATIONS) == 7
        assert _index_columns(path, INDEXES_3) == {"files_persona_source": ["persona", "source"],
                                                   "bad_rows_persona_checked": []}  # its table: revisits since 7
        # the data is intact
        assert state.document_count("atlas") == 31
        assert state.paths("atlas", source="memory") == {"memory/MEMORY.md"}
        assert len(state.paths("atlas", source="sessions")) == 30
        assert state.hashes("atlas", ["sessions/s1/turns/T1.md"]) == {"sessions/s1/turns/T1.md": "h1"}
        assert state.deleted_sessions("atlas") == {"s1"}
        assert state.bad_to_check("atlas", 10) == [("s2", "G1", "fp")]
        assert state.get_cursor("atlas") == 42
    finally:
        state.close()
    # the per-pass queries use them (no scan of the persona's document rows)
    assert "files_persona_source" in _plan(path, "SELECT path FROM files WHERE persona = ? AND source = ?",
                                           ("atlas", "memory"))
    assert "revisits_persona_checked" in _plan(
        path, "SELECT session_label, turn_id FROM revisits WHERE persona = ? AND reason = 'bad_row' ORDER BY checked_at,"
              " session_label, turn_id LIMIT 5", ("atlas",))
    # opening it again changes nothing
    again = StateDB(path)
    assert again.schema_version == 7
    again.close()


def test_a_fresh_state_db_is_created_at_the_latest_schema_with_the_indexes(tmp_path):
    state = StateDB(tmp_path / "state.sqlite")
    state.close()
    con = sqlite3.connect(tmp_path / "state.sqlite")
    names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    version = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    con.close()
    assert set(INDEXES_3) - {"bad_rows_persona_checked"} | set(INDEXES_4) | set(INDEXES_5) <= names and version == "7"
    assert "revisits_persona_checked" in names and "bad_rows_persona_checked" not in names  # its table is gone


def test_a_state_db_of_schema_3_gains_the_scope_indexes_and_resolves_scopes_by_them(tmp_path, monkeypatch):
    """Schema 4: a search's scope lookups (a persona's private and deleted sessions) use an
    index instead of reading every session row of the persona."""
    path = tmp_path / "state.sqlite"
    monkeypatch.setattr(db_mod, "MIGRATIONS", db_mod.MIGRATIONS[:3])
    old = StateDB(path)
    with old.atomic():
        old.register_sessions([(f"s{i}", "atlas", "deleted" if i % 7 == 0 else "active") for i in range(40)]
                              + [("b1", "bob", "active")])
    old.set_visibility("s3", "private")
    old.set_visibility("b1", "private")
    old.close()
    monkeypatch.undo()
    state = StateDB(path)
    try:
        assert state.schema_version == len(db_mod.MIGRATIONS)
        assert _index_columns(path, INDEXES_4) == {"sessions_persona_visibility": ["persona", "visibility"],
                         "sessions_persona_status": ["persona", "ledger_status"]}
        facts_before = state.scope_facts("atlas", "s1")
        assert facts_before.private == frozenset({"s3"})
        assert facts_before.deleted == frozenset({f"s{i}" for i in range(0, 40, 7)})
    finally:
        state.close()
    assert "sessions_persona_visibility" in _plan(
        path, "SELECT label FROM sessions WHERE persona = ? AND visibility = ?", ("atlas", "private"))
    assert "sessions_persona_status" in _plan(
        path, "SELECT label FROM sessions WHERE persona = ? AND ledger_status = ?", ("atlas", "deleted"))


# -- checks skipped while the ledger files are unchanged -------------------------------------------------


@pytest.fixture
def settle_now(monkeypatch):
    """Trust a stamp at once (the default waits SETTLE_S after the last write)."""
    monkeypatch.setattr(quiet, "SETTLE_S", 0.0)


@pytest.fixture
def ledger_reads(monkeypatch):
    """How many times a pass read every session of a persona, and compared bad-turn fingerprints."""
    counts = {"sessions": 0, "fingerprints": 0}
    sessions, fingerprints = LedgerReader.sessions, LedgerReader.turn_fingerprints

    def counted_sessions(self, **kw):
        if kw.get("persona") is not None and kw.get("labels") is None and kw.get("history_range") is None:
            counts["sessions"] += 1
        return sessions(self, **kw)

    def counted_fingerprints(self, turn_ids):
        counts["fingerprints"] += 1
        return fingerprints(self, turn_ids)

    monkeypatch.setattr(LedgerReader, "sessions", counted_sessions)
    monkeypatch.setattr(LedgerReader, "turn_fingerprints", counted_fingerprints)
    return counts


def test_an_idle_pass_skips_the_registry_scan_until_the_ledger_is_written(
        writer, make_indexer, ledger_path, settle_now, ledger_reads):
    for i in range(6):
        writer.turn(f"s{i % 3}", user=f"question {i}", assistant=f"answer {i}")
    ix = make_indexer()
    sync_once(ix)  # backfill
    sync_once(ix)  # the first tail reads every session and records the stamp
    before = ledger_reads["sessions"]
    for _ in range(3):
        summary = sync_once(ix).personas["atlas"]
        assert (summary.mode, summary.documents_written, summary.documents_deleted) == ("tail", 0, 0)
    assert ledger_reads["sessions"] == before  # nothing read per session while nothing was written
    # A status change writes no history row, but it writes the ledger: the next pass sees it.
    writer.set_session_status("s1", "deleted")
    summary = sync_once(ix).personas["atlas"]
    assert ledger_reads["sessions"] == before + 1
    assert summary.documents_deleted == 2
    assert ix.sinks[0].paths("atlas") == expected_paths(ledger_path, "atlas")
    assert ix.state.session("s1").ledger_status == "deleted"


def test_fresh_ledger_files_are_never_trusted(writer, make_indexer, ledger_reads, monkeypatch):
    """Within SETTLE_S of the last write, a same-size write in the same timestamp tick
    could leave the stamp as it was: every pass reads in full."""
    monkeypatch.setattr(quiet, "SETTLE_S", 3600.0)
    writer.turn("s", user="q", assistant="a")
    ix = make_indexer()
    sync_once(ix)
    before = ledger_reads["sessions"]
    for _ in range(3):
        sync_once(ix)
    assert ledger_reads["sessions"] == before + 3


def test_every_check_runs_in_full_after_full_check_s(writer, make_indexer, settle_now, ledger_reads, monkeypatch):
    writer.turn("s", user="q", assistant="a")
    ix = make_indexer()
    sync_once(ix)
    sync_once(ix)
    before = ledger_reads["sessions"]
    sync_once(ix)
    assert ledger_reads["sessions"] == before
    monkeypatch.setattr(quiet, "FULL_CHECK_S", 0.0)
    sync_once(ix)
    assert ledger_reads["sessions"] == before + 1


def test_a_pending_turn_completed_without_a_history_row_is_indexed(writer, make_indexer, ledger_path, settle_now):
    writer.turn("s", user="first", assistant="done")
    pending = writer.turn("s", user="second", status="pending")
    ix = make_indexer()
    sync_once(ix)
    sync_once(ix)
    assert sync_once(ix).personas["atlas"].pending_turns == 1
    writer.complete(pending, assistant="finished later")
    summary = sync_once(ix).personas["atlas"]
    assert (summary.documents_written, summary.pending_turns) == (1, 0)
    assert ix.sinks[0].paths("atlas") == expected_paths(ledger_path, "atlas")


def test_bad_turns_are_compared_in_a_whole_rotation_then_not_until_the_ledger_changes(
        writer, make_indexer, settle_now, ledger_reads, monkeypatch):
    monkeypatch.setattr(revisit, "BAD_CHECKS_PER_PASS", 5)
    t = writer.turn("ghosts", user="real", assistant="real")
    ghosts = [f"GHOST{i:02d}" for i in range(12)]
    writer.execute("UPDATE threads SET ancestry=? WHERE turn_id=?", (json.dumps(ghosts + [t]), t))
    ix = make_indexer()
    sync_once(ix)
    assert ix.state.bad_count("atlas") == 12
    compared = []
    for _ in range(5):
        before = ledger_reads["fingerprints"]
        sync_once(ix)
        compared.append(ledger_reads["fingerprints"] - before)
    assert compared == [1, 1, 1, 0, 0]  # ceil(12 / 5) passes compare, then nothing until a write
    # A ghost appears in place (no history row): the rotation starts again and finds it.
    writer.execute("INSERT INTO turns (id, turn_type, status, started_at, completed_at) "
                   "VALUES ('GHOST11', 'normal', 'completed', 1, 2)")
    writer.execute("INSERT INTO messages (id, turn_id, role, content, sequence, created_at) "
                   "VALUES ('m-g11', 'GHOST11', 'user', 'a ghost that came back', 0, 1)")
    passes = 0
    while ix.state.bad_count("atlas") == 12:
        passes += 1
        assert passes <= 3, "every bad turn is compared within ceil(12 / 5) passes"
        sync_once(ix)
    assert ix.state.bad_count("atlas") == 11
    assert "sessions/ghosts/turns/GHOST11.md" in ix.sinks[0].paths("atlas")


def test_memory_files_are_read_again_only_when_their_stat_changes(writer, config_factory, tmp_path, settle_now):
    from exporters.qmd import QmdExporter

    writer.turn("main", user="hello", assistant="hi")
    ws = tmp_path / "ws"
    ws.mkdir()
    note = ws / "MEMORY.md"
    note.write_text("# Atlas\ncanary first\n")
    old = time.time() - 3600
    os.utime(note, (old, old))
    redacted: list[str] = []

    def redact(text: str) -> str:
        redacted.append(text)
        return text

    ix = Indexer(config_factory(memory={"atlas": [str(note)]}), sinks=[QmdExporter(tmp_path / "export")],
                 redact=redact, redaction_version="test")
    try:
        sync_once(ix)
        reads = sum("canary" in t for t in redacted)
        assert reads == 1
        for _ in range(3):
            assert sync_once(ix).documents_written == 0
        assert sum("canary" in t for t in redacted) == reads  # not read, not redacted again
        # Same size, mtime put back: the ctime still tells.
        time.sleep(0.05)
        note.write_text("# Atlas\ncanary LAST\n")
        os.utime(note, (old, old))
        assert sync_once(ix).documents_written == 1
        assert ix.sinks[0].read("atlas", "memory/MEMORY.md").endswith("canary LAST")
        note.unlink()
        sync_once(ix)
        assert ix.state.paths("atlas", source="memory") == set()
    finally:
        ix.close()


def test_the_ledger_connection_is_kept_only_while_the_files_are_unchanged(writer, make_indexer, settle_now,
                                                                          monkeypatch, ledger_path):
    opened = []
    real_open = LedgerReader.open.__func__

    def counted_open(cls, path, **kw):
        reader = real_open(cls, path, **kw)
        opened.append(reader)
        return reader

    monkeypatch.setattr(LedgerReader, "open", classmethod(counted_open))
    writer.turn("s", user="q", assistant="a")
    ix = make_indexer()
    sync_once(ix)
    sync_once(ix)
    n = len(opened)
    for _ in range(3):
        sync_once(ix)
    assert len(opened) == n  # the idle passes reuse the connection
    writer.turn("s", user="q2", assistant="a2")
    assert sync_once(ix).documents_written == 1
    assert len(opened) == n + 1  # a written ledger: a fresh connection
    assert ix.sinks[0].paths("atlas") == expected_paths(ledger_path, "atlas")
    # A ledger replaced by another file (a new inode) is opened afresh and noticed as a new source.
    replacement = ledger_path.with_name("other.db")
    from ledger.writer import LedgerWriter

    with LedgerWriter(replacement, start_ms=1_800_000_000_000, seed=9) as other:
        other.turn("elsewhere", user="new ledger", assistant="new answer")
    old = time.time() - 3600
    for suffix in ("", "-wal"):
        if os.path.exists(f"{replacement}{suffix}"):
            os.utime(f"{replacement}{suffix}", (old, old))
    writer.close()
    for suffix in ("-wal", "-shm"):
        if os.path.exists(f"{ledger_path}{suffix}"):
            os.remove(f"{ledger_path}{suffix}")
    os.replace(replacement, ledger_path)
    for suffix in ("-wal", "-shm"):
        if os.path.exists(f"{replacement}{suffix}"):
            os.replace(f"{replacement}{suffix}", f"{ledger_path}{suffix}")
    sync_once(ix)
    assert len(opened) == n + 2
    assert ix.sinks[0].paths("atlas") == expected_paths(ledger_path, "atlas")
    assert any("elsewhere" in p for p in ix.sinks[0].paths("atlas"))



def test_a_state_db_of_schema_4_gains_the_turn_index_and_finds_fork_copies_by_it(tmp_path, monkeypatch):
    """Schema 5: a private session's turns copied into forks are found by turn (scope resolution)."""
    path = tmp_path / "state.sqlite"
    monkeypatch.setattr(db_mod, "MIGRATIONS", db_mod.MIGRATIONS[:4])
    StateDB(path).close()
    monkeypatch.undo()
    state = StateDB(path)
    try:
        assert state.schema_version == len(db_mod.MIGRATIONS)
        assert _index_columns(path, INDEXES_5) == {"files_persona_turn": ["persona", "turn_id"]}
    finally:
        state.close()
    assert "files_persona_turn" in _plan(path, "SELECT path FROM files WHERE persona = ? AND turn_id = ?",
                                         ("atlas", "t1"))
