"""Writes ``state.sqlite`` (and the ``agents.db`` ledger it indexed): a state DB in the layout of
schema 6, where fourteen facts were JSON rows of ``meta``, made by the code of that layout
(commit dd6820e) with live data in every one of them. Kept to test that an install of that layout
upgrades in place (tests/test_state_migration.py); run again only from a checkout of dd6820e:

    git worktree add /tmp/v6 dd6820e && cd /tmp/v6 && PYTHONPATH=$PWD python <this file> OUT_DIR
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

from exporters.qmd import QmdExporter
from indexer.runtime.config import load_config
from indexer.state.db import StateDB
from indexer.sync.context import Indexer
from indexer.sync.engine import sync_once
from indexer.sync.visibility import apply_visibility
from ledger.writer import LedgerWriter


def main(out: Path) -> None:
    work = Path(tempfile.mkdtemp())
    ledger = work / "ledger" / "agents.db"
    ledger.parent.mkdir(parents=True)
    w = LedgerWriter(ledger, start_ms=1_763_000_000_000, seed=7)
    t1 = w.turn("main", user="what port does the api use?", assistant="8420, see config.toml")
    w.turn("main", user="and the token?", assistant="AKIAIOSFODNN7EXAMPLE was the old key")
    w.turn("main", user="long one", assistant="x " * 1500)  # cut at max_message_bytes: truncated
    w.fork("main/fork", t1)
    w.turn("main/fork", user="fork question", assistant="fork answer")
    diary = w.turn("diary", user="private thoughts", assistant="kept private")
    pending = w.turn("main", user="still streaming", status="streaming")
    w.turn("main", user=None, assistant=None, tools=[])  # done with no text: an empty turn
    w.turn("gone", user="soon deleted", assistant="bye")
    w.turn("bob-s", persona="bob", user="bob asks", assistant="bob answers")
    w.turn("broken", user="bad head", assistant="never indexed")
    w.execute("UPDATE threads SET ancestry='not json' WHERE turn_id=(SELECT thread_id FROM sessions WHERE label='broken')")
    config = load_config(None, env={}, overrides={
        "ledger": {"path": str(ledger), "max_message_bytes": 1000},
        "index": {"dir": str(work / "index"), "sinks": ["qmd"]}})
    ix = Indexer(config, sinks=[QmdExporter(work / "export")])
    sync_once(ix)
    apply_visibility(ix, "diary", "private")
    w.set_session_status("gone", "deleted")
    w.turn("main/fork", user="after", assistant="more")
    sync_once(ix)
    state = ix.state
    with state.atomic():  # what a pass that failed midway leaves behind
        state.add_secret_rechecks("bob", ["bob-s"])
        state.add_sessions_to_build("atlas", ["main/fork"])
        state.set_meta("backfill_due_v1", "messages_renumbered", "bob")
        state.set_json("private_copies_in_flight_v1", {"copies": {diary: ["main/fork"]}}, "atlas")  # a write failed
        state.set_meta("wal_truncate_owed_v1", "late_messages_mark")
        state.project_add("proj", ["main", "main/fork"])
    assert state.pending("atlas") == [("main", pending)], state.pending("atlas")
    assert state.bad_count("atlas") == 1
    ix.close()
    w.close()
    for path, name in ((work / "index" / "state.sqlite", "state.sqlite"), (ledger, "agents.db")):
        con = sqlite3.connect(path)
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.execute("PRAGMA journal_mode=DELETE")
        con.close()
        shutil.copy(path, out / name)
    shutil.copy(work / "index" / "state.sqlite.key", out / "state.sqlite.key")
    StateDB(out / "state.sqlite").close()  # opens in today's layout: nothing to migrate
    con = sqlite3.connect(out / "state.sqlite")
    con.execute("PRAGMA journal_mode=DELETE")
    con.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
