"""Every table of the state DB, declared in one place, and the numbered migrations that make them.

Schema changes are migrations (``MIGRATIONS``), applied in order at open and recorded in
``meta['schema_version']``: an install of any earlier layout upgrades in place. Append only;
never edit a released migration.
"""

from __future__ import annotations

import time

from peewee import CompositeKey, IntegerField, Model, SqliteDatabase, TextField

from indexer.state.private_turns import Visibility

SCHEMA_VERSION_KEY = "schema_version"
GLOBAL = ""  # scope of meta rows that belong to no persona
IN_LIMIT = 900  # parameters a statement binds at most (SQLite's old default limit is 999)


def now_ms() -> int:
    return int(time.time() * 1000)


def _models(db: SqliteDatabase):
    class Base(Model):
        class Meta:
            database = db
            legacy_table_names = False

    class Meta(Base):
        key = TextField()
        scope = TextField(default=GLOBAL)
        value = TextField()

        class Meta:
            table_name = "meta"
            primary_key = CompositeKey("key", "scope")

    class File(Base):
        persona = TextField()
        path = TextField()
        source = TextField()
        session_label = TextField(null=True, index=True)
        turn_id = TextField(null=True)
        kind = TextField()
        content_hash = TextField()
        updated_at = IntegerField()

        class Meta:
            table_name = "files"
            primary_key = CompositeKey("persona", "path")

    class SessionReg(Base):
        label = TextField(primary_key=True)
        persona = TextField(index=True)
        ledger_status = TextField()
        visibility = TextField(default=Visibility.SHARED)
        first_seen = IntegerField()
        updated_at = IntegerField()

        class Meta:
            table_name = "sessions"

    class ProjectMember(Base):
        project = TextField()
        session_label = TextField(index=True)
        added_at = IntegerField()

        class Meta:
            table_name = "project_members"
            primary_key = CompositeKey("project", "session_label")

    class PendingTurn(Base):
        persona = TextField()
        session_label = TextField()
        turn_id = TextField()
        seen_at = IntegerField()

        class Meta:
            table_name = "pending_turns"
            primary_key = CompositeKey("persona", "session_label", "turn_id")

    class BadRow(Base):
        persona = TextField()
        session_label = TextField()
        turn_id = TextField()
        reason = TextField()
        detail = TextField()
        seen_at = IntegerField()
        # digest of the turn's ledger rows when it failed (LedgerReader.turn_fingerprints):
        # when the rows change in place, the turn is built again
        fingerprint = TextField(default="")
        checked_at = IntegerField(default=0)

        class Meta:
            table_name = "bad_rows"
            primary_key = CompositeKey("persona", "session_label", "turn_id")

    class EmptyTurn(Base):
        """A turn done with no user or assistant text (a tool-only turn, or one whose messages are
        still to come): no document, but built again if messages arrive (``indexer.sync.late``)."""
        persona = TextField()
        session_label = TextField()
        turn_id = TextField(index=True)

        class Meta:
            table_name = "empty_turns"
            primary_key = CompositeKey("persona", "session_label", "turn_id")

    return Meta, File, SessionReg, ProjectMember, PendingTurn, BadRow, EmptyTurn


def _migration_1(db: SqliteDatabase, models) -> None:
    db.create_tables(models, safe=True)


def _migration_2(db: SqliteDatabase, models) -> None:
    """bad_rows: the fingerprint of the failed turn's rows, and when it was last compared."""
    columns = {c.name for c in db.get_columns("bad_rows")}
    if "fingerprint" not in columns:
        db.execute_sql("ALTER TABLE bad_rows ADD COLUMN fingerprint TEXT NOT NULL DEFAULT ''")
    if "checked_at" not in columns:
        db.execute_sql("ALTER TABLE bad_rows ADD COLUMN checked_at INTEGER NOT NULL DEFAULT 0")


def _create_indexes(db: SqliteDatabase, indexes: dict[str, tuple[str, tuple[str, ...]]]) -> None:
    for name, (table, columns) in indexes.items():
        db.execute_sql(f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" ({", ".join(columns)})')


#: Indexes of schema 3, by name: (table, columns). Without them a sync pass with
#: nothing new scanned every document row of the persona (``paths(persona,
#: source=...)``, every pass for the memory files) and sorted every bad row.
INDEXES_3 = {
    "files_persona_source": ("files", ("persona", "source")),
    "bad_rows_persona_checked": ("bad_rows", ("persona", "checked_at", "session_label", "turn_id")),
}


def _migration_3(db: SqliteDatabase, models) -> None:
    """Indexes for the per-pass queries: documents by (persona, source), bad rows by
    (persona, last compared). Tables a partial older file lacks are created first."""
    db.create_tables(models, safe=True)
    _create_indexes(db, INDEXES_3)


#: Indexes of schema 4: every search resolves its scope from the persona's private and
#: deleted sessions; with only ``persona`` indexed each lookup read every session row of
#: the persona (10,000 sessions: 2.1 ms a search, 0.44 ms with these).
INDEXES_4 = {
    "sessions_persona_visibility": ("sessions", ("persona", "visibility")),
    "sessions_persona_status": ("sessions", ("persona", "ledger_status")),
}


def _migration_4(db: SqliteDatabase, models) -> None:
    """Indexes for scope resolution: a persona's sessions by visibility and by ledger status."""
    _create_indexes(db, INDEXES_4)


#: Indexes of schema 5: the copies of a turn in other sessions (forks), looked up by turn id
#: for scope resolution when a session is private.
INDEXES_5 = {
    "files_persona_turn": ("files", ("persona", "turn_id")),
}


def _migration_5(db: SqliteDatabase, models) -> None:
    """An index on the files of a persona by turn: a private session's turns copied into forks."""
    _create_indexes(db, INDEXES_5)


def _migration_6(db: SqliteDatabase, models) -> None:
    """empty_turns: turns done with no text, built again when messages arrive."""
    db.create_tables(models, safe=True)


# Append only; never edit a released migration.
MIGRATIONS = [_migration_1, _migration_2, _migration_3, _migration_4, _migration_5, _migration_6]
