"""Every text column the ledger layer reads, holding what SQLite lets a writer store there besides
text: a BLOB of the same bytes (a runtime that binds bytes), a BLOB that is not UTF-8, and NULL where
the schema allows it. A pass over such a ledger never raises and never stalls a cursor: the other
sessions of the persona and every other persona are indexed by the same pass, tail passes included
(real WAL ledger, real LanceDB; the fake embedder: what is tested is the reading, not the model)."""

from __future__ import annotations

import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest
from fake_embedder import FakeEmbedder

from indexer.sync.context import Indexer, build_sinks
from indexer.sync.engine import sync_once
from indexer.sync.progress import ProgressTotals
from ledger.connection import INTEGER_COLUMNS, READ_COLUMNS
from ledger.reader import LedgerReader
from ledger.writer import LedgerWriter, schema_sql
from tests.conftest import make_config
from tests.test_ledger_bad_values import _ledger_head as _head_id
from tests.test_sync import expected_paths

# Which row of the session "hurt" a column is changed in: its session, its history rows, its head's
# thread row, or the rows of one of its turns (a compaction turn for ``compactions``).
_WHERE = {
    "sessions": "label = :label",
    "session_history": "session_label = :label",
    "threads": "turn_id = :head",
    "turns": "id = :turn",
    "messages": "rowid = (SELECT min(rowid) FROM messages WHERE turn_id = :turn)",  # its user message
    "compactions": "turn_id = :compaction",
}


def _not_null(table: str, column: str) -> bool:
    con = sqlite3.connect(":memory:")
    try:
        con.executescript(schema_sql())
        return any(r[1] == column and r[3] for r in con.execute(f"PRAGMA table_info({table})"))
    finally:
        con.close()


def _cases() -> list[tuple[str, str, str]]:
    out = []
    for table, columns in sorted(READ_COLUMNS.items()):
        for column in sorted(columns - INTEGER_COLUMNS - ({"id"} if table == "session_history" else set())):
            out.append((table, column, f"CAST({column} AS BLOB)"))  # the same bytes, stored as a BLOB
            out.append((table, column, "x'ff00fe'"))  # a BLOB that is not UTF-8
            if not _not_null(table, column):  # NULL where the schema lets it (a TEXT primary key does)
                out.append((table, column, "NULL"))
    return out


def _indexer(config):
    return Indexer(config, sinks=build_sinks(config, embedder=FakeEmbedder()), redact=lambda s: s,
                   redaction_version="t")


@dataclass(frozen=True)
class Backfilled:
    """A clean ledger and its index after a backfill pass, and where the writer stood."""

    root: Path
    calm: tuple[str, ...]
    writer_state: tuple


@pytest.fixture(scope="module")
def backfilled(tmp_path_factory) -> Backfilled:
    """The backfill of the clean ledger every case starts from, run once: each case gets a copy
    (ledger, state DB, LanceDB tables) instead of paying for a backfill of the same three turns."""
    root = tmp_path_factory.mktemp("backfilled")
    ledger = root / "ledger" / "agents.db"
    ledger.parent.mkdir()
    with LedgerWriter(ledger, start_ms=1_763_000_000_000, seed=3) as w:
        calm = (w.turn("calm", persona="atlas", user="the harbour crane is blue", assistant="noted"),)
        w.turn("hurt", persona="atlas", user="first words of hurt", assistant="ok")
        w.turn("elsewhere", persona="nova", user="the okapi sleeps", assistant="fine")
        ix = _indexer(make_config(root, ledger, sinks=("lancedb",)))
        try:
            sync_once(ix, progress=ProgressTotals())  # a backfill of a clean ledger
        finally:
            ix.close()
        state = (w.rng.getstate(), w._clock, w._seq)
    return Backfilled(root, calm, state)


@pytest.mark.parametrize("table, column, value", _cases())
def test_a_non_text_value_in_a_text_column_never_stalls_a_pass(table, column, value, backfilled, tmp_path):
    root = tmp_path / "case"
    shutil.copytree(backfilled.root, root)
    ledger_path = root / "ledger" / "agents.db"
    writer = LedgerWriter(ledger_path)
    writer.rng.setstate(backfilled.writer_state[0])
    writer._clock, writer._seq = backfilled.writer_state[1:]
    calm = list(backfilled.calm)
    ix = _indexer(make_config(root, ledger_path, sinks=("lancedb",)))

    def calm_indexed() -> set[str]:
        return {p.rsplit("/", 1)[-1][:-3] for p in ix.state.paths("atlas") if p.startswith("sessions/calm/")}

    try:
        # a pass over the unchanged copy: this indexer has run a pass, as the one that backfilled had
        assert sync_once(ix, progress=ProgressTotals()).documents_written == 0
        assert calm_indexed() == set(calm)
        turn = writer.turn("hurt", persona="atlas", user="the turn that breaks", assistant="ok")
        compaction = writer.compaction("hurt", persona="atlas", summary="what hurt said so far")
        head = writer.turn("hurt", persona="atlas", user="after the broken turn", assistant="ok")
        calm.append(writer.turn("calm", persona="atlas", user="a calm session moving in the same pass",
                                assistant="ok"))
        con = sqlite3.connect(ledger_path)
        con.execute(f"UPDATE {table} SET {column} = {value} WHERE {_WHERE[table]}",
                    {"label": "hurt", "head": head, "turn": turn, "compaction": compaction})
        con.commit()
        con.close()
        # a tail pass with a progress plan, as the daemon runs it (the plan reads every moved session)
        assert sync_once(ix, progress=ProgressTotals()).personas["atlas"].mode == "tail"
        assert ix.state.get_cursor("atlas") == ix.state.get_cursor("nova") == _head_id(ledger_path)
        assert calm_indexed() == set(calm)
        calm.append(writer.turn("calm", persona="atlas", user="a later calm turn", assistant="ok"))
        nova = writer.turn("elsewhere", persona="nova", user="a later okapi turn", assistant="ok")
        sync_once(ix, progress=ProgressTotals())
        assert ix.state.get_cursor("atlas") == ix.state.get_cursor("nova") == _head_id(ledger_path)
        assert calm_indexed() == set(calm) and f"sessions/elsewhere/turns/{nova}.md" in ix.state.paths("nova")
        assert ix.state.paths("nova") == expected_paths(ledger_path, "nova")
        # a forced rebuild (every session walked from its head) over the same ledger
        sync_once(ix, force=True, progress=ProgressTotals())
        assert calm_indexed() == set(calm)
        assert ix.state.paths("nova") == expected_paths(ledger_path, "nova")
    finally:
        ix.close()
        writer.close()


def test_a_label_bound_as_bytes_beside_a_text_label_in_a_tail_pass(writer, ledger_path, config_factory):
    """The campaign's case: a session whose label (and history row) a runtime bound as bytes, and a
    text-labelled session moving in the same tail pass. The pass planned its progress by sorting the
    labels, bytes among str: every pass of every persona failed and the cursor stopped."""
    writer.turn("calm", persona="atlas", user="first calm words", assistant="ok")
    writer.turn("elsewhere", persona="nova", user="the okapi sleeps", assistant="fine")
    ix = _indexer(config_factory(sinks=("lancedb",)))
    try:
        sync_once(ix, progress=ProgressTotals())
        turn = writer.turn("blobby", persona="atlas", user="words of a bytes label", assistant="ok",
                           move_session=False)
        writer.conn.execute("INSERT INTO sessions(label, thread_id, persona_id, created_at, updated_at) "
                            "VALUES(?,?,?,?,?)", (b"blobby", turn, "atlas", 1, 1))
        writer.conn.execute("INSERT INTO session_history(session_label, thread_id, changed_at) VALUES(?,?,?)",
                            (b"blobby", turn, 2))
        writer.conn.commit()
        calm = writer.turn("calm", persona="atlas", user="second calm words", assistant="ok")
        nova = writer.turn("elsewhere", persona="nova", user="the okapi wakes", assistant="fine")
        progress = ProgressTotals()
        summary = sync_once(ix, progress=progress)
        assert summary.personas["atlas"].mode == "tail"
        assert ix.state.get_cursor("atlas") == ix.state.get_cursor("nova") == _head_id(ledger_path)
        atlas = ix.state.paths("atlas")
        assert {f"sessions/blobby/turns/{turn}.md", f"sessions/calm/turns/{calm}.md"} <= atlas
        assert f"sessions/elsewhere/turns/{nova}.md" in ix.state.paths("nova")
        # the label reads back as text, and is found by its text
        reader = LedgerReader.open(ledger_path)
        try:
            with reader.snapshot():
                assert [s.label for s in reader.sessions(labels=["blobby"])] == ["blobby"]
                assert reader.history_heads("blobby") == [turn]
                assert reader.ancestry_lengths("atlas") == {"blobby": 1, "calm": 2}
        finally:
            reader.close()
    finally:
        ix.close()
