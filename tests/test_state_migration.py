"""An install of schema 6 upgrades in place: the state DB made by that release's code with live data
in each of its fourteen meta facts (tests/data/state_v6, see its make_fixture.py) is migrated to the
tables of today's schema, and the next pass goes on from where that release left off."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from exporters.qmd import QmdExporter
from indexer.runtime.config import load_config
from indexer.state.db import MIGRATIONS, Position, StateDB
from indexer.sync.context import Indexer
from indexer.sync.engine import sync_once

FIXTURE = Path(__file__).parent / "data" / "state_v6"
DIARY_TURN = "01K9XFTT1RCP69BSGAYP9VT16F"  # the private session's own turn
PENDING_TURN = "01K9XFTXYRDD64M8YNJRH1FFND"
BAD_TURN = "01K9XFVAN0DNV8G7PHCAQ2XCAM"

FIXTURE_REDACTION = "1.5.0"  # tests/data/state_v6 was made by dd6820e (meta memory_index_meta_v1)


@pytest.fixture
def install(tmp_path: Path) -> Path:
    """A copy of the schema-6 install: index dir (state DB and its key) and the ledger it indexed."""
    (tmp_path / "index").mkdir()
    (tmp_path / "ledger").mkdir()
    for name in ("state.sqlite", "state.sqlite.key"):
        shutil.copy(FIXTURE / name, tmp_path / "index" / name)
    shutil.copy(FIXTURE / "agents.db", tmp_path / "ledger" / "agents.db")
    return tmp_path


def test_the_fixture_is_of_schema_6_with_every_fact_in_meta(install):
    con = sqlite3.connect(install / "index" / "state.sqlite")
    keys = {k for (k,) in con.execute("SELECT key FROM meta")}
    tables = {t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    con.close()
    assert len(keys) == 14 and "schema_version" in keys
    assert {"pending_turns", "bad_rows", "empty_turns"} <= tables and "revisits" not in tables


def test_every_fact_of_schema_6_reads_back_from_its_table(install):
    state = StateDB(install / "index" / "state.sqlite")
    try:
        assert state.schema_version == len(MIGRATIONS) == 7
        # where the passes stand: one typed position, the row digest kept with it
        assert state.position("atlas") == Position(12, "bff888f33f8d691414de7c06")
        assert state.position("bob") == Position(12, "bff888f33f8d691414de7c06")
        assert state.build_identity("atlas").max_message_bytes == 1000
        assert set(state.built_personas()) == {"atlas", "bob"}
        assert state.backfill_due("bob") == "messages_renumbered" and state.backfill_due("atlas") is None
        assert state.ledger_identity() == "9281953d1ba9d022dfeaa983"
        # the one revisit queue, by reason
        assert state.revisits("atlas") == {"bad_row": [("broken", BAD_TURN)], "pending_turn": [("main", PENDING_TURN)],
                                           "to_build": [("main/fork", "")]}
        assert state.revisits("bob") == {"owed_secret": [("bob-s", "")]}
        assert state.pending("atlas") == [("main", PENDING_TURN)] and state.pending_count("atlas") == 1
        assert state.sessions_to_build("atlas") == {"main/fork"} and state.secret_rechecks("bob") == {"bob-s"}
        (bad,) = state.bad_list("atlas")
        assert (bad["session"], bad["reason"]) == ("broken", "bad_ancestry") and "JSON array" in bad["detail"]
        assert state.bad_to_check("atlas", 5)[0][:2] == ("broken", BAD_TURN)
        # late messages, private turns, copies in flight, truncations, what the export was brought in line with
        mark = state.late_mark("atlas")
        assert [c[0] for c in mark] == [1, 17, 19] and all(c[2].startswith("k1:") for c in mark)
        assert state.private._stored_own("atlas") == {"diary": [DIARY_TURN]}
        assert state.private.in_flight("atlas") == {"copies": {DIARY_TURN: ["main/fork"]}}
        assert state.truncated_paths("atlas") == ["sessions/main/turns/01K9XFTH8G27H6P3AMKDQG6STT.md"]
        assert state.unscoped_applied("atlas") == ({"diary", "gone"}, set())
        assert state.unscoped_applied("bob") == (set(), {DIARY_TURN})
        assert state.projects() == {"proj": ["main", "main/fork"]}
        assert state.private_sessions("atlas") == {"diary"} and state.deleted_sessions("atlas") == {"gone"}
        assert state.holders_of_late("atlas", ["01K9XFV0WGHXPMXY5A7292ESJR"]) == [("main", "01K9XFV0WGHXPMXY5A7292ESJR")]
        assert state.document_count("atlas") == 7
        # meta keeps only global scalars; the tables of schema 6 the queue replaced are gone
        meta = dict(state.db.execute_sql("SELECT key, value FROM meta").fetchall())
        assert set(meta) == {"schema_version", "ledger_identity_v1", "wal_truncate_owed_v1"}
        tables = {t for (t,) in state.db.execute_sql("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert not {"pending_turns", "bad_rows"} & tables
    finally:
        state.close()
    again = StateDB(install / "index" / "state.sqlite")  # opening it again changes nothing
    try:
        assert again.schema_version == 7 and again.position("atlas") == Position(12, "bff888f33f8d691414de7c06")
    finally:
        again.close()


def test_the_first_pass_after_the_upgrade_goes_on_from_where_schema_6_left_off(install, monkeypatch):
    export = install / "export"
    for persona in ("atlas", "bob"):  # the export folders exist (else the pass rebuilds a lost sink)
        (export / persona).mkdir(parents=True)
    config = load_config(None, env={}, overrides={
        "ledger": {"path": str(install / "ledger" / "agents.db"), "max_message_bytes": 1000},
        "index": {"dir": str(install / "index"), "sinks": ["qmd"]}})
    # The ruleset version the fixture's build recorded: a newer ruleset rebuilds every persona once
    # (as it should), which is not what this test is about.
    # Likewise the document format it recorded (doc-v3, the context line, rebuilds once).
    monkeypatch.setattr("indexer.sync.context.DOCUMENT_FORMAT_VERSION", "doc-v2")
    ix = Indexer(config, sinks=[QmdExporter(export)])
    ix.redaction_version = FIXTURE_REDACTION
    try:
        summary = sync_once(ix)
        # atlas: a tail from its cursor (no rebuild: same build identity, same ledger); bob: the
        # backfill schema 6 had recorded as due
        assert summary.personas["atlas"].mode == "tail" and summary.personas["bob"].mode == "backfill"
        assert ix.state.backfill_due("bob") is None
        assert ix.state.sessions_to_build("atlas") == set()  # built by this pass, then cleared
        assert ix.state.pending("atlas") == [("main", PENDING_TURN)]  # still streaming in the ledger
        assert ix.state.bad_count("atlas") == 1  # its rows unchanged
        assert ix.state.get_meta("wal_truncate_owed_v1") is None  # the WAL truncate owed is done
        assert ix.state.position("atlas").history_id == 12
        assert sync_once(ix).personas["bob"].mode == "tail"
        assert ix.state.secret_rechecks("bob") == set()  # the owed session was read again by bob's tail
    finally:
        ix.close()
