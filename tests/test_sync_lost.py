"""Nothing silently lost (issue 10): oversized messages, bad turns, odd labels,
replaced ledgers, reused ids, a full disk. Real WAL ledgers, real sinks."""

from __future__ import annotations

import pytest
import structlog
import structlog.testing

from exporters.qmd import QmdExporter
from indexer.service.status import status_report
from indexer.sync.engine import sync_once
from indexer.sync.writes import truncated_documents
from tests.test_sync import expected_paths, make_indexer  # noqa: F401  (fixture)


def test_an_oversized_message_is_truncated_with_a_marker_not_dropped(writer, make_indexer, ledger_path, tmp_path):
    big = "alpha " * 400  # 2,400 bytes
    writer.turn("main", user=big, assistant="the assistant answer survives")
    ix = make_indexer(ledger={"max_message_bytes": 1000})
    sync_once(ix)
    path = next(iter(ix.state.paths("atlas")))
    text = QmdExporter(tmp_path / "export").read("atlas", path)
    assert "the assistant answer survives" in text
    # 1,400 after the cut, and the 4 bytes of the word it split ("alph")
    assert "[… truncated: 1,404 more bytes (ledger.max_message_bytes = 1,000)]" in text
    assert truncated_documents(ix.state, "atlas") == [path]
    report = status_report(ix.config, ix.state)
    assert report["personas"]["atlas"]["truncated_documents"] == 1
    assert report["personas"]["atlas"]["bad_rows_skipped"] == 0


def test_raising_the_cap_rebuilds_and_readmits_the_whole_text(writer, make_indexer, tmp_path):
    writer.turn("main", user="beta " * 400, assistant="ok")
    ix = make_indexer(ledger={"max_message_bytes": 1000})
    sync_once(ix)
    assert len(truncated_documents(ix.state, "atlas")) == 1
    ix.close()
    wider = make_indexer(ledger={"max_message_bytes": 5000})
    assert wider.state.build_identity("atlas").max_message_bytes == 1000
    with structlog.testing.capture_logs() as events:
        summary = sync_once(wider)
    assert summary.personas["atlas"].mode == "rebuild"
    assert [e["changed"] for e in events if e["event"] == "index.build_changed"] == [["max_message_bytes"]]
    assert wider.state.build_identity("atlas") == wider.build_identity
    path = next(iter(wider.state.paths("atlas")))
    text = QmdExporter(tmp_path / "export").read("atlas", path)
    assert "truncated" not in text and text.count("beta") == 400
    assert truncated_documents(wider.state, "atlas") == []


def test_a_bad_turn_repaired_in_place_is_retried_by_the_next_tail(writer, make_indexer, ledger_path):
    """No history row says the ledger changed: the fingerprint of the bad turn's rows does."""
    import json

    t = writer.turn("flaky", user="first", assistant="one")
    writer.execute("UPDATE threads SET ancestry='[broken' WHERE turn_id=?", (t,))
    writer.turn("fine", user="ok", assistant="ok")
    ix = make_indexer()
    assert sync_once(ix).personas["atlas"].documents_skipped_bad == 1
    bad = status_report(ix.config, ix.state)["personas"]["atlas"]["bad_turns"]
    assert [(b["session"], b["reason"]) for b in bad] == [("flaky", "bad_ancestry")]
    assert "not a JSON array" in bad[0]["detail"]
    idle = sync_once(ix).personas["atlas"]  # rows unchanged: not built again
    assert (idle.bad_retried, idle.documents_written, ix.state.bad_count("atlas")) == (0, 0, 1)
    writer.execute("UPDATE threads SET ancestry=? WHERE turn_id=?", (json.dumps([t]), t))
    summary = sync_once(ix).personas["atlas"]
    assert (summary.mode, summary.bad_retried, summary.documents_written) == ("tail", 1, 1)
    assert ix.state.bad_count("atlas") == 0
    assert ix.sinks[0].paths("atlas") == expected_paths(ledger_path, "atlas")


@pytest.mark.parametrize("how", ["retry_bad", "force"])
def test_a_turn_that_failed_for_a_reason_outside_the_ledger_is_built_by_retry_bad_and_rebuild(
        writer, make_indexer, ledger_path, how):
    """A build that raised (here the redactor, on one text) is recorded with the
    exception; its rows never change: `sync --retry-bad` or a rebuild builds it again."""
    writer.turn("s", user="a fine question", assistant="a fine answer")
    t = writer.turn("s", user="this one trips the redactor", assistant="answer")
    broken = {"on": True}

    def redact(text: str) -> str:
        if broken["on"] and "trips the redactor" in text:
            raise RuntimeError("redactor bug")
        return text

    ix = make_indexer(redact=redact)
    sync_once(ix)
    [bad] = ix.state.bad_list("atlas")
    assert (bad["turn_id"], bad["reason"], bad["detail"]) == (t, "invalid_row", "RuntimeError: redactor bug")
    broken["on"] = False  # the bug is fixed (a new release, a new known-secrets file...)
    assert sync_once(ix).personas["atlas"].documents_written == 0  # nothing in the ledger moved
    summary = sync_once(ix, **{how: True}).personas["atlas"]
    if how == "retry_bad":
        assert (summary.bad_retried, summary.documents_written) == (1, 1)
    else:
        assert summary.mode == "rebuild"
    assert ix.state.bad_count("atlas") == 0
    assert ix.sinks[0].paths("atlas") == expected_paths(ledger_path, "atlas")


def test_a_bad_turn_is_retried_when_its_session_gets_a_new_turn(writer, make_indexer, ledger_path):
    import json

    t = writer.turn("s", user="hello", assistant="hi")
    # The ancestry names a turn the ledger does not have (yet): bad, recorded.
    writer.execute("UPDATE threads SET ancestry=? WHERE turn_id=?", (json.dumps(["GHOST", t]), t))
    ix = make_indexer()
    sync_once(ix)
    assert [(b["turn_id"], b["reason"]) for b in ix.state.bad_list("atlas")] == [("GHOST", "missing_turn")]
    # The missing turn arrives, then the session moves: its bad turn is retried and indexed.
    writer.execute("INSERT INTO turns (id, turn_type, status, started_at, completed_at) "
                   "VALUES ('GHOST', 'normal', 'completed', 1, 2)")
    writer.execute("INSERT INTO messages (id, turn_id, role, content, sequence, created_at) "
                   "VALUES ('m-ghost', 'GHOST', 'user', 'the late question', 0, 1)")
    writer.turn("s", user="a new question", assistant="a new answer")
    sync_once(ix)
    assert ix.state.bad_count("atlas") == 0
    paths = ix.sinks[0].paths("atlas")
    assert "sessions/s/turns/GHOST.md" in paths and paths == expected_paths(ledger_path, "atlas")


def test_a_label_that_is_not_utf8_is_indexed_by_the_tail_as_by_a_backfill(writer, make_indexer, ledger_path,
                                                                           config_factory, tmp_path):
    from exporters.qmd import QmdExporter
    from indexer.sync.context import Indexer

    writer.turn("first", user="warm up", assistant="ok")
    ix = make_indexer()
    sync_once(ix)  # cursor set: what follows goes through the tail
    t = writer.turn("weird", user="a label with a broken byte", assistant="still indexed")
    # Rename the session to bytes that are not UTF-8, in every table that names it.
    for table, column in (("sessions", "label"), ("session_history", "session_label")):
        writer.execute(f"UPDATE {table} SET {column}=CAST(X'7765697264ff' AS TEXT) WHERE {column}='weird'")
    tail = sync_once(ix)
    assert tail.personas["atlas"].mode == "tail" and tail.personas["atlas"].documents_written == 1
    tail_paths = ix.sinks[0].paths("atlas")
    assert any(t in p for p in tail_paths)
    fresh = Indexer(config_factory(index={"dir": str(tmp_path / "index2")}),
                    sinks=[QmdExporter(tmp_path / "export2")])
    try:
        assert sync_once(fresh).personas["atlas"].mode == "backfill"
        assert fresh.sinks[0].paths("atlas") == tail_paths
    finally:
        fresh.close()


def test_a_replaced_ledger_is_a_new_source(writer, make_indexer, ledger_path, tmp_path):
    """Personas the new ledger does not hold leave every store; counters of the
    old ledger (pending turns, bad rows) do not carry over."""
    from indexer.search.searcher import Searcher, SearchRequest
    from indexer.sync.context import build_sinks
    from tests.test_sync import replace_ledger

    writer.turn("main", user="atlas remembers the canary plan", assistant="ok")
    writer.turn("chef", persona="nova", user="nova keeps the vinaigrette recipe", assistant="ok")
    writer.turn("chef", persona="nova", user="still going", assistant=None, status="streaming")
    broken = writer.turn("odd", user="x", assistant="y")
    writer.execute("UPDATE threads SET ancestry='[oops' WHERE turn_id=?", (broken,))
    ix = make_indexer(index={"sinks": ["lancedb", "qmd"]}, sinks=None)
    ix.sinks = build_sinks(ix.config)
    sync_once(ix)
    assert ix.state.paths("nova") and len(ix.state.pending("nova")) == 1 and ix.state.bad_count("atlas") == 1

    replace_ledger(writer, ledger_path, turns=2, seed=11)  # atlas only
    sync_once(ix)
    assert ix.state.paths("nova") == set()
    for sink in ix.sinks:
        assert sink.paths("nova") == set(), sink.name
        assert sink.paths("atlas") == expected_paths(ledger_path, "atlas")
    assert ix.state.pending("nova") == [] and ix.state.bad_count("atlas") == 0
    searcher = Searcher(ix.config, state=ix.state)
    try:
        hits = searcher.search(SearchRequest(query="vinaigrette recipe", persona="nova", mode="keyword")).results
    finally:
        searcher.close()
    assert hits == []


def test_history_ids_reused_after_deletes_are_detected_and_reconciled(writer, make_indexer, ledger_path):
    for i in range(3):
        writer.turn(f"s{i}", user=f"question {i}", assistant="ok")
    ix = make_indexer()
    sync_once(ix)
    cursor = ix.state.get_cursor("atlas")
    # The runtime deletes the newest history rows and their ids are handed out
    # again: a table without AUTOINCREMENT does that by itself (max(id) + 1);
    # with AUTOINCREMENT, a reset sequence (as after a runtime's history
    # compaction) does the same.
    writer.execute("DELETE FROM session_history WHERE id >= ?", (cursor - 1,))
    writer.execute("UPDATE sqlite_sequence SET seq=(SELECT max(id) FROM session_history) "
                   "WHERE name='session_history'")
    late = writer.turn("late", user="a turn whose history row reuses an old id", assistant="found anyway")
    writer.turn("later", user="and another", assistant="ok")
    reused = writer.conn.execute("SELECT min(id) FROM session_history WHERE session_label='late'").fetchone()[0]
    assert reused <= cursor
    summary = sync_once(ix)
    assert summary.personas["atlas"].mode == "backfill"
    assert f"sessions/late/turns/{late}.md" in ix.sinks[0].paths("atlas")
    assert ix.sinks[0].paths("atlas") == expected_paths(ledger_path, "atlas")
    assert sync_once(ix).personas["atlas"].mode == "tail"  # and back to the tail


def test_a_full_disk_is_reported_by_its_root_cause(writer, make_indexer):
    """SQLITE_FULL for real: the state DB may not grow by one page (max_page_count)."""
    import pytest

    from indexer.core.errors import describe

    writer.turn("main", user="first", assistant="ok")
    ix = make_indexer()
    sync_once(ix)
    for i in range(40):
        writer.turn(f"s{i}", user="a longer question " * 50, assistant="a longer answer " * 50)
    db = ix.state.db
    db.execute_sql("VACUUM")  # no free page left to reuse (schema 7 drops two tables of the earlier ones)
    pages = db.execute_sql("PRAGMA page_count").fetchone()[0]
    db.execute_sql(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(Exception) as caught:
        sync_once(ix)
    message = describe(caught.value)
    assert "no transaction is active" in str(caught.value) or "full" in str(caught.value)
    assert message.startswith("OperationalError: database or disk is full"), message
    db.execute_sql("PRAGMA max_page_count = 1073741823")
    assert sync_once(ix).documents_written >= 40  # nothing lost: the next pass completes


def test_a_long_ancestry_of_dangling_ids_is_one_warning(writer, make_indexer):
    import json

    from structlog.testing import capture_logs

    t = writer.turn("huge-ancestry", user="real", assistant="real")
    ghosts = [f"GHOST{i:05d}" for i in range(20_000)]
    writer.execute("UPDATE threads SET ancestry=? WHERE turn_id=?", (json.dumps(ghosts + [t]), t))
    ix = make_indexer()
    with capture_logs() as logs:
        summary = sync_once(ix)
    assert summary.personas["atlas"].documents_skipped_bad == 20_000
    skipped = [e for e in logs if e["event"] == "document.skipped"]
    assert len(skipped) == 1
    assert skipped[0]["count"] == 20_000 and skipped[0]["turn_ids"] == ghosts[:3]
    assert skipped[0]["reason"] == "missing_turn" and skipped[0]["session"] == "huge-ancestry"
    assert len(logs) < 10


def test_a_state_db_of_the_previous_schema_gains_the_bad_row_fingerprints(tmp_path):
    import sqlite3

    from indexer.state.db import StateDB

    path = tmp_path / "state.sqlite"
    con = sqlite3.connect(path)
    con.executescript(
        "CREATE TABLE meta (key TEXT NOT NULL, scope TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (key, scope));"
        "INSERT INTO meta VALUES ('schema_version', '', '1');"
        "CREATE TABLE bad_rows (persona TEXT NOT NULL, session_label TEXT NOT NULL, turn_id TEXT NOT NULL,"
        " reason TEXT NOT NULL, detail TEXT NOT NULL, seen_at INTEGER NOT NULL,"
        " PRIMARY KEY (persona, session_label, turn_id));"
        "INSERT INTO bad_rows VALUES ('atlas', 's', 'T1', 'missing_turn', '', 1);")
    con.close()
    state = StateDB(path)
    try:
        assert state.schema_version == 7  # and on to the latest schema (indexes, empty turns, revisits)
        # A row of the old schema has no fingerprint: the first comparison differs, so it is retried once.
        assert state.bad_to_check("atlas", 10) == [("s", "T1", "")]
        assert state.record_bad("atlas", [("s", "T1", "missing_turn", "x")], {"T1": "abc"}) == 0
        assert state.bad_to_check("atlas", 10) == [("s", "T1", "abc")]
    finally:
        state.close()


def test_a_rebuild_logs_its_skips_once_per_session_and_reason(writer, make_indexer):
    import json

    from structlog.testing import capture_logs

    t = writer.turn("ghosts", user="real", assistant="real")
    writer.execute("UPDATE threads SET ancestry=? WHERE turn_id=?",
                   (json.dumps([f"GHOST{i}" for i in range(50)] + [t]), t))
    ix = make_indexer()
    sync_once(ix)
    with capture_logs() as logs:
        assert sync_once(ix, force=True).personas["atlas"].mode == "rebuild"
    skipped = [e for e in logs if e["event"] == "document.skipped"]
    assert [(e["session"], e["reason"], e["count"]) for e in skipped] == [("ghosts", "missing_turn", 50)]


def test_an_ancestry_that_leaves_out_its_head_or_runs_past_it_still_ends_at_the_head(writer, make_indexer):
    """The ledger's contract: a thread's ancestry ends with its own turn. One that leaves the head out
    still indexes the head; ids past the head are not the session's history."""
    import json

    t1 = writer.turn("short", user="the first question", assistant="a1")
    head = writer.turn("short", user="the head question", assistant="a2")
    writer.execute("UPDATE threads SET ancestry=? WHERE turn_id=?", (json.dumps([t1]), head))
    u1 = writer.turn("long", user="another first", assistant="b1")
    later = writer.turn("long", user="a later turn", assistant="b2")
    writer.fork("long", u1)  # the head back to u1; its thread row then names `later` after it
    writer.execute("UPDATE threads SET ancestry=? WHERE turn_id=?", (json.dumps([u1, later]), u1))
    ix = make_indexer()
    sync_once(ix)
    assert ix.state.paths("atlas") == {f"sessions/short/turns/{t1}.md", f"sessions/short/turns/{head}.md",
                                       f"sessions/long/turns/{u1}.md"}


def test_two_labels_that_read_back_the_same_are_reported(writer, make_indexer):
    """Labels that are not valid UTF-8 are read leniently: two can come back as the same text. Only
    one of them can be indexed under it, and the pass says so."""
    writer.turn("tmp1", user="session one", assistant="one")
    writer.turn("tmp2", user="session two", assistant="two")
    for old, new in (("tmp1", b"dm:\xff"), ("tmp2", b"dm:\xfe")):
        writer.execute("UPDATE sessions SET label=? WHERE label=?", (new, old))
        writer.execute("UPDATE session_history SET session_label=? WHERE session_label=?", (new, old))
    ix = make_indexer()
    with structlog.testing.capture_logs() as logs:
        sync_once(ix)
    collisions = [e for e in logs if e["event"] == "ledger.label_collision"]
    assert [(e["persona"], e["sessions"], e["log_level"]) for e in collisions] == [("atlas", ["dm:\ufffd"], "warning")]
