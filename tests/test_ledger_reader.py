"""The ledger connection is read-only and queries are batched."""

from __future__ import annotations

import sqlite3

import peewee
import pytest

from ledger import LedgerReader, LedgerUnavailable
from ledger.writer import ToolUse


def test_writes_through_the_reader_fail(writer, ledger_path):
    writer.turn("main", user="hi", assistant="hello")
    reader = LedgerReader.open(ledger_path)
    insert = "INSERT INTO session_history(session_label, thread_id, changed_at) VALUES('x','y',1)"
    try:
        # two layers, each checked alone: the query_only pragma ...
        with pytest.raises(peewee.OperationalError, match="attempt to write a readonly database"):
            reader.db.execute_sql(insert)
        # ... and, with the pragma taken away, the read-only open itself (mode=ro)
        reader.db.execute_sql("PRAGMA query_only = 0")
        assert reader.db.execute_sql("PRAGMA query_only").fetchone() == (0,)
        for sql in (insert, "CREATE TABLE sneaky(x)"):
            with pytest.raises(peewee.OperationalError, match="attempt to write a readonly database"):
                reader.db.execute_sql(sql)
    finally:
        reader.close()
    con = sqlite3.connect(ledger_path)
    assert con.execute("SELECT count(*) FROM session_history").fetchone()[0] == 1


def test_reader_creates_no_files_beside_the_ledger_but_wal_files(writer, ledger_path):
    writer.turn("main", user="hi", assistant="hello")
    before = {p.name for p in ledger_path.parent.iterdir()}
    reader = LedgerReader.open(ledger_path)
    with reader.snapshot():
        reader.sessions()
    reader.close()
    after = {p.name for p in ledger_path.parent.iterdir()}
    assert after - before <= {"agents.db-wal", "agents.db-shm"}


def test_missing_or_foreign_files_raise_clear_errors(tmp_path):
    with pytest.raises(LedgerUnavailable, match="ledger not found"):
        LedgerReader.open(tmp_path / "nope.db")
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t(x)")
    with pytest.raises(LedgerUnavailable, match="not an Agents Ledger"):
        LedgerReader.open(other)


def test_queries_are_batched_not_per_turn(writer, ledger_path):
    ids = [writer.turn("main", user=f"q{i}", assistant=f"a{i}", tools=[ToolUse("t", {}, "r")]) for i in range(1200)]
    reader = LedgerReader.open(ledger_path)
    statements: list[str] = []
    reader.db.connection().set_trace_callback(statements.append)
    with reader.snapshot():
        turns = reader.turns(ids)
        msgs = reader.messages(ids)
    reader.close()
    assert len(turns) == 1200 and all(len(msgs[t]) == 3 for t in ids)  # user, tool-call placeholder, assistant
    selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert len(selects) <= 6  # 3 IN-batches of <= 500 ids per table


def test_messages_exclude_system_and_tool_and_cap_size(writer, ledger_path):
    tid = writer.turn("main", user="u" * 2000, assistant="a", system="sys", tools=[ToolUse("t", {}, "result")])
    reader = LedgerReader.open(ledger_path, max_message_bytes=1000)
    with reader.snapshot():
        msgs = reader.messages([tid])[tid]
    reader.close()
    assert {m.role for m in msgs} == {"user", "assistant"}
    user = next(m for m in msgs if m.role == "user")
    assert (user.content, user.length, user.truncated) == ("u" * 1000, 2000, 1000)


def test_the_cap_counts_bytes_cuts_on_a_character_boundary_and_sees_past_a_nul(writer, ledger_path):
    # 400 three-byte characters (1200 bytes), then a NUL and more text: SQLite's
    # length() on TEXT says 400 characters and stops at the NUL; the cap must not.
    text = "€" * 400 + "\x00" + "tail" * 10
    tid = writer.turn("main", user=text, assistant="ok")
    reader = LedgerReader.open(ledger_path, max_message_bytes=1000)
    with reader.snapshot():
        user = next(m for m in reader.messages([tid])[tid] if m.role == "user")
    reader.close()
    size = len(text.encode())
    assert user.length == size
    assert user.content == "€" * 333  # 999 bytes: the 334th character would cross the cap
    assert user.truncated == size - 999
    small = writer.turn("main", user="a\x00b", assistant="ok")
    reader = LedgerReader.open(ledger_path, max_message_bytes=1000)
    with reader.snapshot():
        user = next(m for m in reader.messages([small])[small] if m.role == "user")
    reader.close()
    assert (user.content, user.length, user.truncated) == ("a\x00b", 3, 0)


def test_history_after_filters_by_persona_and_range(writer, ledger_path):
    writer.turn("a1", persona="atlas", user="x", assistant="y")
    writer.turn("n1", persona="nova", user="x", assistant="y")
    writer.turn("a1", persona="atlas", user="x", assistant="y")
    reader = LedgerReader.open(ledger_path)
    with reader.snapshot():
        assert [r.id for r in reader.history_after(0, upto=3, persona="atlas")] == [1, 3]
        assert [r.id for r in reader.history_after(1, upto=2)] == [2]
        assert reader.head_id() == 3
    reader.close()


def test_read_columns_cover_every_column_the_models_select():
    from ledger.connection import READ_COLUMNS
    from ledger.models import ALL_MODELS

    declared = {m._meta.table_name: {f.column_name for f in m._meta.sorted_fields} for m in ALL_MODELS}
    declared["messages"].discard("created_at")  # declared for the writer's tests, never selected by the reader
    assert {t: set(c) for t, c in READ_COLUMNS.items()} == declared


@pytest.mark.parametrize("table, column", [("messages", "sequence"), ("turns", "completed_at"),
                                           ("session_history", "changed_at")])
def test_a_ledger_without_a_column_the_reader_needs_is_one_clear_error(writer, ledger_path, table, column):
    writer.turn("main", user="hi", assistant="hello")
    con = sqlite3.connect(ledger_path)
    for (index,) in con.execute("SELECT name FROM sqlite_master WHERE type='index' AND tbl_name=? AND sql IS NOT NULL",
                                (table,)).fetchall():
        con.execute(f"DROP INDEX {index}")  # an index on the column would block dropping it
    con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    con.commit()
    con.close()
    with pytest.raises(LedgerUnavailable, match=rf"lacks column\(s\) {table}\.{column} of the Agents Ledger schema"):
        LedgerReader.open(ledger_path)
