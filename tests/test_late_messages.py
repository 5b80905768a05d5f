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
    from indexer.sync import quiet
    from indexer.sync.late import LATE_MARK_KEY
    from ledger.reader import LedgerReader

    monkeypatch.setattr(quiet, "SETTLE_S", 0.0)  # trust the ledger files' stamp at once
    writer.turn("main", user="a question", assistant="an answer")
    sync_once(ix)
    reads: list[int] = []
    real = LedgerReader.late_messages

    def counted(self, after, **kw):
        reads.append(after)
        return real(self, after, **kw)

    monkeypatch.setattr(LedgerReader, "late_messages", counted)
    newest = lambda: int(writer.conn.execute("SELECT max(rowid) FROM messages").fetchone()[0])  # noqa: E731
    assert ix.state.get_meta(LATE_MARK_KEY, "atlas") == str(newest())
    sync_once(ix)  # the ledger files unchanged
    assert reads == []
    before = newest()
    writer.turn("other", user="another session", assistant="ok")
    sync_once(ix)
    assert reads == [before] and ix.state.get_meta(LATE_MARK_KEY, "atlas") == str(newest())


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
    old.set_cursor("atlas", 7)
    old.close()
    monkeypatch.undo()
    state = StateDB(path)
    try:
        assert state.schema_version == 6
        assert state.get_cursor("atlas") == 7 and state.session("main").persona == "atlas"
        state.record_empty("atlas", [("main", "T1"), ("main", "T2")], filled=[])
        state.record_empty("atlas", [], filled=[("main", "T1")])
        assert state.holders_of_late("atlas", ["T1", "T2", "T3"]) == [("main", "T2")]
    finally:
        state.close()
