"""Read-only connection to a live ledger.

``file:<path>?mode=ro`` (never ``immutable=1``: the file changes under us),
a busy timeout for the moments the writer checkpoints, ``query_only`` as a
second guard, and text decoded leniently so one row of invalid UTF-8 cannot
stop a sync.

SQLite keeps whatever a writer binds, whatever the declared type: a label bound
as bytes is a BLOB in a TEXT column. Every row read through this connection
passes :func:`text_row`, so a text column is a ``str`` (or None) in every query,
including ones written later; only the integer columns (judged by the reader,
which names a wrong value as a bad row) and expressions aliased ``raw_…``
(byte heads cut on a UTF-8 boundary, digests of the stored bytes) keep bytes.
"""

from __future__ import annotations

import sqlite3
import urllib.parse
from pathlib import Path

from peewee import SqliteDatabase

BUSY_TIMEOUT_MS = 5000


class LedgerUnavailable(RuntimeError):
    """The ledger file is missing, unreadable or not a ledger."""


def _lenient_text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


#: Columns the schema declares INTEGER (their values are judged, not converted, by the reader).
INTEGER_COLUMNS = frozenset({"created_at", "updated_at", "started_at", "completed_at", "sequence", "changed_at"})
#: An expression aliased with this prefix is read as stored (bytes stay bytes).
RAW = "raw_"


def text_row(cursor: sqlite3.Cursor, row: tuple) -> tuple:
    """The connection's row factory: a BLOB in any column but the integer ones and ``raw_…``
    expressions is decoded as the connection decodes text (invalid UTF-8 replaced)."""
    if not any(type(value) is bytes for value in row):
        return row  # nearly every row: no per-column work
    names = cursor.description
    return tuple(
        _lenient_text(value) if type(value) is bytes and names[i][0] not in INTEGER_COLUMNS
        and not names[i][0].startswith(RAW) else value
        for i, value in enumerate(row))


class _ReadOnlySqlite(SqliteDatabase):
    def _add_conn_hooks(self, conn: sqlite3.Connection) -> None:
        conn.text_factory = _lenient_text
        conn.row_factory = text_row
        super()._add_conn_hooks(conn)


def ro_uri(path: Path) -> str:
    return "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro"


def open_ledger(path: str | Path) -> SqliteDatabase:
    """Open ``path`` read-only. Raises :class:`LedgerUnavailable` with what to do."""
    path = Path(path)
    if not path.is_file():
        raise LedgerUnavailable(
            f"ledger not found at {path}: set [ledger] path (or LEDGER_INDEXER_LEDGER_PATH) "
            "to the agents.db of the agent runtime"
        )
    db = _ReadOnlySqlite(
        ro_uri(path),
        uri=True,
        timeout=BUSY_TIMEOUT_MS / 1000,
        pragmas={"query_only": 1, "busy_timeout": BUSY_TIMEOUT_MS},
        autoconnect=True,
        check_same_thread=False,
    )
    try:
        db.connect()
        tables = {r[0] for r in db.execute_sql("SELECT name FROM sqlite_master WHERE type='table'")}
    except Exception as exc:  # sqlite3 errors arrive wrapped by peewee
        db.close()
        raise LedgerUnavailable(f"cannot open ledger {path} read-only: {exc}") from exc
    missing = {"sessions", "threads", "turns", "messages", "session_history"} - tables
    if missing:
        db.close()
        raise LedgerUnavailable(
            f"{path} is not an Agents Ledger: missing tables {sorted(missing)}"
        )
    lacking = [f"{table}.{column}" for table, columns in READ_COLUMNS.items() if table in tables
               for column in sorted(columns - {r[1] for r in db.execute_sql(f"PRAGMA table_info({table})")})]
    if lacking:
        db.close()
        raise LedgerUnavailable(f"{path} lacks column(s) {', '.join(lacking)} of the Agents Ledger schema "
                                "(agents_ledger.sql): not a ledger this indexer can read; point [ledger] path "
                                "at the agent runtime's agents.db")
    return db


#: Every column the reader selects, per table (``compactions`` only when the table exists): checked
#: at open, so a ledger of another schema is one clear error instead of a failed query mid-pass.
READ_COLUMNS: dict[str, frozenset[str]] = {
    "sessions": frozenset({"label", "thread_id", "persona_id", "status", "created_at", "updated_at"}),
    "threads": frozenset({"turn_id", "ancestry", "persona_id"}),
    "turns": frozenset({"id", "parent_turn_id", "turn_type", "status", "started_at", "completed_at", "model",
                        "provider"}),
    "messages": frozenset({"id", "turn_id", "role", "content", "sequence"}),
    "compactions": frozenset({"turn_id", "summary", "model", "provider"}),
    "session_history": frozenset({"id", "session_label", "thread_id", "changed_at"}),
}
