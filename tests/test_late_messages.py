"""Messages that arrive for a turn after a pass built it, with no new ``session_history`` row: the
runtime wrote the answer after marking the turn done, filled a turn that was done with no text yet,
or retried a failed turn in place. The next pass indexes the turn as it is now. Real WAL ledger,
real QMD file sink, the real redactor."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from exporters.qmd import QmdExporter
from indexer.sync.context import Indexer
from indexer.sync.engine import sync_once
from tests.test_sync import expected_paths


@pytest.fixture
def ix(config_factory, tmp_path, writer):
    """An index past its first pass (a backfill): the turns of each test are built by tail passes."""
    writer.turn("earlier", user="an earlier session", assistant="ok")
    indexer = Indexer(config_factory(), sinks=[QmdExporter(tmp_path / "export")])
    sync_once(indexer)
    yield indexer
    indexer.close()


def late_message(writer, turn: str, role: str, text: str, sequence: int) -> None:
    writer.execute("INSERT INTO messages(id, turn_id, role, content, sequence, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                   (f"late-{turn}-{sequence}", turn, role, text, sequence, writer.now()))


def body(ix, turn: str, session: str = "main") -> str:
    return ix.sinks[0].read("atlas", f"sessions/{session}/turns/{turn}.md").split("\n\n", 1)[1]


def test_an_answer_written_after_the_turn_was_indexed_reaches_the_index(writer, ix):
    turn = writer.turn("main", user="what port did we pick for the api?", assistant=None)
    sync_once(ix)
    assert body(ix, turn) == "User: what port did we pick for the api?"
    late_message(writer, turn, "assistant", "we picked port 8765", 5)
    with capture_logs() as logs:
        summary = sync_once(ix)
    assert body(ix, turn) == "User: what port did we pick for the api?\n\nAssistant: we picked port 8765"
    assert summary.documents_written == 1
    assert [(e["session"], e["turn"]) for e in logs if e["event"] == "turn.late_message"] == [("main", turn)]


def test_a_turn_done_with_no_text_yet_is_indexed_when_its_messages_arrive(writer, ix, ledger_path):
    turn = writer.turn("main", user=None, assistant=None)
    sync_once(ix)
    assert not any("/main/" in p for p in ix.sinks[0].paths("atlas"))
    late_message(writer, turn, "user", "remember the launch word pelican", 0)
    late_message(writer, turn, "assistant", "noted: pelican", 1)
    sync_once(ix)
    assert ix.sinks[0].paths("atlas") == expected_paths(ledger_path, "atlas")
    assert f"sessions/main/turns/{turn}.md" in ix.sinks[0].paths("atlas")
    assert body(ix, turn) == "User: remember the launch word pelican\n\nAssistant: noted: pelican"


def test_a_failed_turn_retried_in_place_is_indexed_with_its_answer(writer, ix):
    turn = writer.turn("main", user="which region hosts prod?", assistant=None, status="failed")
    sync_once(ix)
    writer.execute("UPDATE turns SET status = 'streaming', completed_at = NULL WHERE id = ?", (turn,))
    sync_once(ix)  # no new message yet: the document stays as it was
    assert body(ix, turn) == "User: which region hosts prod?"
    writer.complete(turn, assistant="prod is in eu-west-3")
    sync_once(ix)
    assert body(ix, turn) == "User: which region hosts prod?\n\nAssistant: prod is in eu-west-3"
    assert ix.state.pending("atlas") == []


def test_a_pass_reads_only_the_messages_after_its_mark_and_none_while_the_ledger_is_unchanged(writer, ix,
                                                                                                monkeypatch):
    from indexer.state.install_key import keyed_digest
    from indexer.sync import quiet
    from ledger.reader import LedgerReader, row_digest

    monkeypatch.setattr(quiet, "SETTLE_S", 0.0)  # trust the ledger files' stamp at once
    writer.turn("main", user="a question", assistant="an answer")
    sync_once(ix)
    reads: list[tuple[int, int]] = []
    real = LedgerReader.late_messages

    def counted(self, after, upto):
        reads.append((after, upto))
        return real(self, after, upto)

    monkeypatch.setattr(LedgerReader, "late_messages", counted)

    def newest():
        rowid, mid, key = writer.conn.execute(
            f"SELECT rowid, id, {LedgerReader._ROW_KEY} FROM messages ORDER BY rowid DESC LIMIT 1").fetchone()
        return (rowid, mid, "k1:" + keyed_digest(ix.state.key(), row_digest(key)))

    assert ix.state.late_mark("atlas")[-1] == newest()
    sync_once(ix)  # the ledger files unchanged
    assert reads == []
    before = newest()[0]
    writer.turn("other", user="another session", assistant="ok")
    sync_once(ix)
    assert reads == [(before, newest()[0])]
    assert ix.state.late_mark("atlas")[-1] == newest()


def test_an_answer_deleted_and_written_again_at_the_same_rowid_reaches_the_index(writer, ix):
    """``messages`` has no AUTOINCREMENT: the newest row deleted, the next insert takes its rowid.
    The mark's row then has another id: the pass reads from an older checkpoint."""
    turn = writer.turn("main", user="which region hosts prod?", assistant="ERROR: upstream timeout")
    sync_once(ix)
    (rowid,) = writer.conn.execute("SELECT max(rowid) FROM messages").fetchone()
    writer.execute("DELETE FROM messages WHERE turn_id = ? AND role = 'assistant'", (turn,))
    late_message(writer, turn, "assistant", "prod is in eu-west-3", 1)
    assert writer.conn.execute("SELECT max(rowid) FROM messages").fetchone() == (rowid,)  # reused
    sync_once(ix)
    assert body(ix, turn) == "User: which region hosts prod?\n\nAssistant: prod is in eu-west-3"


def test_a_late_message_for_a_turn_rewound_out_of_its_session_makes_no_document(writer, ix):
    first = writer.turn("main", user="the first question", assistant="the first answer")
    empty = writer.turn("main", user=None, assistant=None)
    sync_once(ix)
    writer.fork("main", first)  # the head goes back before the empty turn
    sync_once(ix)
    late_message(writer, empty, "user", "written for a turn no history holds", 0)
    sync_once(ix)
    assert not any(empty in p for p in ix.sinks[0].paths("atlas"))
    assert ix.state.holders_of_late("atlas", [empty]) == []  # and forgotten


@pytest.mark.parametrize("kind", ["pending", "empty"])
@pytest.mark.parametrize("order", [["atlas", "zeta"], ["zeta", "atlas"]], ids=["old-first", "new-first"])
def test_a_turn_of_a_session_that_moved_is_built_only_in_its_new_persona(writer, config_factory, tmp_path, kind,
                                                                        order):
    writer.turn("other", persona="zeta", user="zeta's own", assistant="ok")
    writer.turn("main", user="first question", assistant="first answer")
    if kind == "pending":
        turn = writer.turn("main", user="a streaming question", assistant=None, status="streaming")
    else:
        turn = writer.turn("main", user=None, assistant=None)
    ix = Indexer(config_factory(ledger={"personas": order}), sinks=[QmdExporter(tmp_path / "export")])
    try:
        sync_once(ix)
        writer.execute("UPDATE sessions SET persona_id = 'zeta' WHERE label = 'main'")
        sync_once(ix)
        if kind == "pending":
            writer.complete(turn, assistant="an answer for zeta only")
        else:
            late_message(writer, turn, "user", "late text for zeta only", 0)
        sync_once(ix)
        sync_once(ix)
        assert not any("/main/" in p for p in ix.sinks[0].paths("atlas") | ix.state.paths("atlas"))
        assert f"sessions/main/turns/{turn}.md" in ix.sinks[0].paths("zeta")
        assert ix.state.pending("atlas") == []
    finally:
        ix.close()


def test_a_tool_only_turn_is_recorded_empty_and_forgotten_once_it_has_text(writer, ix):
    turn = writer.turn("main", user=None, assistant=None)
    sync_once(ix)
    assert ix.state.holders_of_late("atlas", [turn]) == [("main", turn)]
    late_message(writer, turn, "assistant", "the answer came later", 3)
    sync_once(ix)
    assert ix.sinks[0].paths("atlas") >= {f"sessions/main/turns/{turn}.md"}
    assert list(ix.state.EmptyTurn.select().tuples()) == []


def test_a_message_for_a_turn_a_backfill_built_is_taken_by_the_next_pass(writer, config_factory, tmp_path):
    old = writer.turn("main", user="an old question", assistant=None)
    ix = Indexer(config_factory(), sinks=[QmdExporter(tmp_path / "export")])
    try:
        assert sync_once(ix).personas["atlas"].mode == "backfill"
        late_message(writer, old, "assistant", "an answer at last", 5)
        sync_once(ix)
        assert body(ix, old) == "User: an old question\n\nAssistant: an answer at last"
    finally:
        ix.close()


def test_a_state_db_of_schema_5_gains_the_empty_turns_table_and_keeps_its_data(tmp_path, monkeypatch):
    import indexer.state.db as db_mod
    from indexer.state.db import StateDB

    path = tmp_path / "state.sqlite"
    monkeypatch.setattr(db_mod, "MIGRATIONS", db_mod.MIGRATIONS[:5])
    old = StateDB(path)
    old.register_sessions([("main", "atlas", "active")])
    old.set_meta("memory_sessions_ledger_cursor_v1", "7", "atlas")  # as that release kept the cursor
    old.close()
    monkeypatch.undo()
    state = StateDB(path)
    try:
        assert state.schema_version == 7
        assert state.get_cursor("atlas") == 7 and state.session("main").persona == "atlas"
        state.record_empty("atlas", [("main", "T1"), ("main", "T2")], filled=[])
        state.record_empty("atlas", [], filled=[("main", "T1")])
        assert state.holders_of_late("atlas", ["T1", "T2", "T3"]) == [("main", "T2")]
    finally:
        state.close()


def test_an_answer_written_anew_under_the_same_id_and_rowid_reaches_the_index(writer, ix):
    """The newest message deleted and written again with its id: same rowid, same id; its row key
    (time, length) changes."""
    turn = writer.turn("main", user="which region hosts prod?", assistant="ERROR")
    sync_once(ix)
    rowid, mid = writer.conn.execute("SELECT rowid, id FROM messages WHERE turn_id = ? AND role = 'assistant'",
                                     (turn,)).fetchone()
    writer.execute("DELETE FROM messages WHERE id = ?", (mid,))
    writer.execute("INSERT INTO messages(id, turn_id, role, content, sequence, created_at) "
                   "VALUES (?, ?, 'assistant', 'prod is in eu-west-3', 1, ?)", (mid, turn, writer.now()))
    assert writer.conn.execute("SELECT rowid FROM messages WHERE id = ?", (mid,)).fetchone() == (rowid,)
    sync_once(ix)
    assert body(ix, turn) == "User: which region hosts prod?\n\nAssistant: prod is in eu-west-3"


def test_renumbered_messages_make_the_next_pass_a_backfill(writer, ix):
    """Every row of ``messages`` written again at other rowids (a restore, a dump): no checkpoint
    holds, so which turns got a message is unknown — the next pass walks every session (hash skip)."""
    turn = writer.turn("main", user="which region hosts prod?", assistant=None)
    sync_once(ix)
    writer.execute("CREATE TABLE saved AS SELECT * FROM messages")
    writer.execute("DELETE FROM messages")
    writer.execute("INSERT INTO messages(id, turn_id, role, content, sequence, created_at) "
                   "VALUES ('padding', 'none', 'system', 'x', 0, 1)")
    writer.execute("INSERT INTO messages(id, turn_id, role, content, sequence, created_at, thinking, context_json,"
                   " metadata_json, source) SELECT id, turn_id, role, content, sequence, created_at, thinking,"
                   " context_json, metadata_json, source FROM saved ORDER BY rowid DESC")
    late_message(writer, turn, "assistant", "prod is in eu-west-3", 1)
    with capture_logs() as logs:
        sync_once(ix)  # notices, and says so
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["ledger.messages_renumbered"]
    summary = sync_once(ix)
    assert summary.personas["atlas"].mode == "backfill"
    assert body(ix, turn) == "User: which region hosts prod?\n\nAssistant: prod is in eu-west-3"
    assert sync_once(ix).personas["atlas"].mode == "tail"


def test_an_interrupted_reindex_keeps_the_mark_so_a_late_message_is_still_taken(writer, ix):
    """The mark a rebuild reads at its start is kept only with what it built: stopped half-way, the
    old index and its mark stay, and the next tail still takes the message."""
    import threading

    from indexer.sync.summary import SyncInterrupted  # noqa: F401  (what the stop raises inside)

    turn = writer.turn("main", user="which region hosts prod?", assistant=None)
    for i in range(3):
        writer.turn(f"s{i}", user=f"another session {i}", assistant="ok")
    sync_once(ix)
    late_message(writer, turn, "assistant", "prod is in eu-west-3", 1)
    stop = threading.Event()
    stop.set()
    summary = sync_once(ix, force=True, stop=stop)
    assert summary.interrupted and summary.personas["atlas"].mode == "rebuild"
    assert body(ix, turn) == "User: which region hosts prod?"  # the old index, as it was
    sync_once(ix)
    assert body(ix, turn) == "User: which region hosts prod?\n\nAssistant: prod is in eu-west-3"


def test_a_pending_turn_of_a_session_whose_label_is_not_utf8_is_built_when_it_completes(writer, ix):
    turn = writer.turn("tmp", user="a streaming question", assistant=None, status="streaming")
    writer.execute("UPDATE sessions SET label = ? WHERE label = 'tmp'", (b"dm:\xff",))
    writer.execute("UPDATE session_history SET session_label = ? WHERE session_label = 'tmp'", (b"dm:\xff",))
    sync_once(ix)
    assert ix.state.pending("atlas") == [("dm:\ufffd", turn)]
    writer.complete(turn, assistant="the answer")
    sync_once(ix)
    assert ix.state.pending("atlas") == []
    assert any(turn in p for p in ix.sinks[0].paths("atlas"))


def test_a_pending_turn_rewound_out_of_its_session_is_not_indexed_when_it_completes(writer, ix):
    first = writer.turn("main", user="the first question", assistant="the first answer")
    streaming = writer.turn("main", user="a question still streaming", assistant=None, status="streaming")
    sync_once(ix)
    assert ix.state.pending("atlas") == [("main", streaming)]
    writer.fork("main", first)  # rewound before it
    sync_once(ix)
    writer.complete(streaming, assistant="an answer no history holds")
    sync_once(ix)
    assert not any(streaming in p for p in ix.sinks[0].paths("atlas"))
    assert ix.state.pending("atlas") == []


def test_the_newest_message_edited_in_place_is_read_again_once_never_a_backfill(writer, ix, monkeypatch):
    """A runtime may stream into its newest message in place (UPDATE, no new row). The checkpoint at
    that row still has its id: the row is read again (its turn rebuilt if indexed), once per edit,
    and no pass becomes a backfill."""
    from indexer.sync import quiet

    monkeypatch.setattr(quiet, "SETTLE_S", 0.0)
    turn = writer.turn("main", user="which region hosts prod?", assistant="prod is in")
    sync_once(ix, force=True)  # a rebuild's mark: checkpoints back from the message edited below
    modes, late = [], []
    for words in ("prod is in eu", "prod is in eu-west", "prod is in eu-west-3"):
        writer.execute("UPDATE messages SET content = ? WHERE turn_id = ? AND role = 'assistant'", (words, turn))
        with capture_logs() as logs:
            modes.append(sync_once(ix).personas["atlas"].mode)
            modes.append(sync_once(ix).personas["atlas"].mode)  # nothing new since
        late.append(len([e for e in logs if e["event"] == "turn.late_message"]))
    assert modes == ["tail"] * 6 and late == [1, 1, 1]
    assert body(ix, turn) == "User: which region hosts prod?\n\nAssistant: prod is in eu-west-3"


def test_the_newest_message_deleted_after_a_backfill_keeps_an_older_checkpoint(writer, ix):
    """A backfill keeps checkpoints some rows before the newest: the newest deleted (and its rowid
    handed out again) leaves one that holds — the pass reads from there, no backfill."""
    turns = [writer.turn(f"s{i % 3}", user=f"question {i}", assistant=f"answer {i}") for i in range(12)]
    sync_once(ix, force=True)  # a rebuild: checkpoints from the newest row back
    writer.execute("DELETE FROM messages WHERE rowid = (SELECT max(rowid) FROM messages)")
    late_message(writer, turns[-1], "assistant", "answer 11, corrected", 1)
    with capture_logs() as logs:
        summary = sync_once(ix)
    assert summary.personas["atlas"].mode == "tail"
    assert not [e for e in logs if e["log_level"] == "warning"]
    assert body(ix, turns[-1], session="s2") == \
        "Previous: question 8\n\nUser: question 11\n\nAssistant: answer 11, corrected"


def test_checkpoints_stay_spread_out_so_a_few_deleted_rows_never_force_a_backfill(writer, ix):
    """After a rebuild (checkpoints up to 4,096 rows back) and many tail passes, the newest ten
    messages deleted (their rowids handed out again) still leave a checkpoint that holds."""
    from indexer.sync.late import MAX_CHECKPOINTS

    for i in range(40):
        writer.turn(f"s{i % 4}", user=f"question {i}", assistant=f"answer {i}")
    sync_once(ix, force=True)
    turns = []
    for i in range(12):
        turns.append(writer.turn("main", user=f"later question {i}", assistant=f"later answer {i}"))
        sync_once(ix)
    checkpoints = ix.state.late_mark("atlas")
    assert len(checkpoints) == MAX_CHECKPOINTS and checkpoints[0][0] < checkpoints[-1][0] - 20
    writer.execute("DELETE FROM messages WHERE rowid > (SELECT max(rowid) - 10 FROM messages)")
    late_message(writer, turns[0], "assistant", "a corrected first answer", 1)
    with capture_logs() as logs:
        assert sync_once(ix).personas["atlas"].mode == "tail"
    assert not [e for e in logs if e["log_level"] == "warning"]
    assert body(ix, turns[0]) == ("User: later question 0\n\nAssistant: later answer 0\n\n"
                                  "Assistant: a corrected first answer")



def test_the_state_db_keeps_no_bytes_of_any_message_only_digests(writer, ix):
    """The mark tells a row apart by its time, length and first and last bytes: a tool result's
    token, never redacted (tool rows are never indexed), must not reach the state DB through it."""
    import sqlite3

    from ledger.writer import ToolUse

    token = "xoxb-1234567890-abcdefghijklmnopQRSTUV"
    writer.turn("main", user="read the env file",  # the tool result is the newest row: a checkpoint
                tools=[ToolUse("read_file", {"path": ".env"}, result=f"SLACK_BOT_TOKEN={token}")])
    sync_once(ix, force=True)  # a rebuild: checkpoints of every row up to 4,096 back
    sync_once(ix)
    state_bytes = b"".join(p.read_bytes() for p in ix.state.path.parent.glob(ix.state.path.name + "*"))
    for form in (token.encode(), token.encode().hex().encode(), token.encode().hex().upper().encode()):
        assert form not in state_bytes
    checkpoints = ix.state.late_mark("atlas")
    assert checkpoints and all(isinstance(key, str) and key.startswith("k1:") and len(key) == 35
                               and int(key[3:], 16) >= 0 for _, _, key in checkpoints)
    conn = sqlite3.connect(ix.state.path)
    assert not any(token in (value or "") or token.encode().hex().upper() in (value or "")
                   for (value,) in conn.execute("SELECT value FROM meta"))
    conn.close()


def reopen_at_schema_6_with_marks(ix, marks: dict) -> None:
    """Turn ``ix``'s state DB back into schema 6 holding ``marks`` (persona: checkpoints) as that
    layout's JSON rows of ``meta``, then open it again as a new process would: the migration to
    schema 7 moves them into ``late_checkpoints``."""
    import json

    with ix.state.atomic():  # written as that layout's code wrote them (the WAL holds them, as it did)
        ix.state.db.execute_sql("DELETE FROM late_checkpoints")
        for persona, checkpoints in marks.items():
            ix.state.db.execute_sql("INSERT INTO meta(key, scope, value) VALUES('late_messages_mark_v1', ?, ?)",
                                    (persona, json.dumps({"checkpoints": checkpoints})))
        ix.state.db.execute_sql("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    ix.state._migrate()
    ix.late_marks_converted = False  # as in a new process


@pytest.mark.parametrize("layout", ["raw row keys", "plain digests"])
def test_a_mark_of_an_earlier_layout_is_converted_in_every_persona_and_still_holds(writer, ix, layout):
    """Marks made before the keyed digest stored the raw row key (the message's first and last bytes),
    then a plain digest of it (guessable for a short message). The migration to schema 7 rewrites
    every persona's — one no longer synced too — to the keyed digest the reader's row gives (so the
    checkpoint still holds: no backfill), and the first pass truncates the WAL that held the old rows."""
    from ledger.reader import LedgerReader, row_digest

    token = "code-730519-quokka"
    writer.turn("main", user="which region hosts prod?", assistant=f"eu-west-3, {token}")
    sync_once(ix)
    rows = writer.conn.execute(
        f"SELECT rowid, id, {LedgerReader._ROW_KEY} FROM messages ORDER BY rowid").fetchall()
    old = [[rowid, mid, key if layout == "raw row keys" else row_digest(key)] for rowid, mid, key in rows]
    reopen_at_schema_6_with_marks(ix, {"atlas": old, "retired": old})  # "retired": a persona no longer synced
    turn = writer.turn("main", user="and staging?", assistant="us-east-2")
    sync_once(ix)
    assert body(ix, turn) == "Previous: which region hosts prod?\n\nUser: and staging?\n\nAssistant: us-east-2"
    assert ix.state.backfill_due("atlas") is None
    for persona in ("atlas", "retired"):
        stored = ix.state.late_mark(persona)
        assert all(key.startswith("k1:") for _, _, key in stored), persona
    state_bytes = b"".join(p.read_bytes() for p in ix.state.path.parent.glob(ix.state.path.name + "*"))
    assert token.encode().hex().upper().encode() not in state_bytes
    assert not any(str(key).encode() in state_bytes for _, _, key in old)


def test_a_wal_truncate_a_reader_held_off_is_retried_by_the_next_pass(writer, ix):
    """Another process reading the state DB (the API, a CLI status) keeps a checkpoint from
    truncating the WAL, which still holds the old mark's message bytes: the pass goes on, and the
    truncate stays owed until a later pass makes it."""
    import sqlite3

    from indexer.sync.late import WAL_TRUNCATE_OWED_KEY
    from ledger.reader import LedgerReader

    token = "code-730519-quokka"
    writer.turn("main", user="which region hosts prod?", assistant=f"eu-west-3, {token}")
    sync_once(ix)
    rows = writer.conn.execute(f"SELECT rowid, id, {LedgerReader._ROW_KEY} FROM messages ORDER BY rowid").fetchall()
    reopen_at_schema_6_with_marks(ix, {"atlas": [list(r) for r in rows]})
    reader = sqlite3.connect(ix.state.path)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM meta").fetchone()  # a read transaction held open
    state_bytes = lambda: b"".join(p.read_bytes() for p in ix.state.path.parent.glob(ix.state.path.name + "*"))  # noqa: E731
    try:
        sync_once(ix)
        assert ix.late_marks_converted is False
        assert ix.state.get_meta(WAL_TRUNCATE_OWED_KEY) == "late_messages_mark"
        assert token.encode().hex().upper().encode() in state_bytes()  # still in the WAL
    finally:
        reader.rollback()
        reader.close()
    sync_once(ix)
    assert ix.late_marks_converted is True
    assert ix.state.get_meta(WAL_TRUNCATE_OWED_KEY) is None
    assert token.encode().hex().upper().encode() not in state_bytes()


def test_a_mark_of_an_earlier_layout_that_cannot_be_read_is_dropped(writer, ix):
    """Its raw row keys may hold message bytes: one that cannot be parsed is not left behind."""
    writer.turn("main", user="which region hosts prod?", assistant="eu-west-3")
    sync_once(ix)
    reopen_at_schema_6_with_marks(ix, {"bob": [["not a rowid", "m1", "1|5|secretbytes|secretbytes"]]})
    sync_once(ix)
    assert ix.state.late_mark("bob") is None
    assert b"secretbytes" not in b"".join(p.read_bytes() for p in ix.state.path.parent.glob(ix.state.path.name + "*"))
    assert ix.late_marks_converted is True


@pytest.mark.parametrize("how", ["status deleted", "row removed"])
def test_a_streaming_turn_of_a_session_deleted_before_it_completes_leaves_the_pending_list(how, writer, ix):
    """The campaign's case: the session of a streaming turn is deleted before the turn completes.
    Nothing is left to revisit: the pending list (status counts it on every pass; a caught-up
    check waits for it) drops the turn, and the turn never reaches the index when it completes."""
    turn = writer.turn("doomed", user="a question still streaming", assistant=None, status="streaming")
    sync_once(ix)
    assert ix.state.pending("atlas") == [("doomed", turn)]
    if how == "status deleted":
        writer.set_session_status("doomed", "deleted")
    else:
        writer.execute("DELETE FROM session_history WHERE session_label = 'doomed'")
        writer.execute("DELETE FROM sessions WHERE label = 'doomed'")
    summary = sync_once(ix)
    assert ix.state.pending("atlas") == [] and summary.personas["atlas"].pending_turns == 0
    writer.complete(turn, assistant="an answer for a deleted session")
    sync_once(ix)
    assert ix.state.pending("atlas") == []
    assert not any(turn in p for p in ix.sinks[0].paths("atlas"))


def test_a_rebuild_replaces_the_pending_list_with_what_it_found(writer, ix):
    """A pending turn an earlier version left behind (its session deleted) is not carried by a
    forced rebuild: the rebuild's list is the one the ledger gives now."""
    turn = writer.turn("doomed", user="a question still streaming", assistant=None, status="streaming")
    live = writer.turn("main", user="another question streaming", assistant=None, status="streaming")
    sync_once(ix)
    assert sorted(ix.state.pending("atlas")) == sorted([("doomed", turn), ("main", live)])
    writer.set_session_status("doomed", "deleted")
    sync_once(ix, force=True)
    assert ix.state.pending("atlas") == [("main", live)]
