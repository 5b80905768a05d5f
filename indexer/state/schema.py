"""Every table of the state DB, declared in one place, and the numbered migrations that make them.

Schema changes are migrations (``MIGRATIONS``), applied in order at open and recorded in
``meta['schema_version']``: an install of any earlier layout upgrades in place. Append only;
never edit a released migration.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

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

    class PersonaState(Base):
        """One row a persona: where its passes stand and what its index was built with."""
        persona = TextField(primary_key=True)
        cursor = IntegerField(null=True)  # the last session_history id processed
        # digest of the history row at ``cursor`` when it was processed (ids reused below it: backfill)
        cursor_row = TextField(null=True)
        build_identity = TextField(null=True)  # BuildIdentity.as_dict(), canonical JSON; None: never complete
        backfill_due = TextField(null=True)  # why the next pass must walk every session (indexer.sync.late)
        unscoped_applied = IntegerField(default=0)  # 1 once UnscopedHidden holds the applied set

        class Meta:
            table_name = "personas"

    class Revisit(Base):
        """The one queue of work a later pass comes back to, by ``reason`` (:class:`RevisitReason`):
        a turn still streaming, a bad row (with the digest of its rows: a repair in place is seen),
        a session owed secret values found by another persona's build, a session to build that no
        history row names. ``turn_id`` is ``''`` for a whole session."""
        persona = TextField()
        reason = TextField()
        session_label = TextField()
        turn_id = TextField(default="")
        skip = TextField(default="")  # a bad row's SkipReason
        detail = TextField(default="")
        fingerprint = TextField(default="")
        seen_at = IntegerField(default=0)
        checked_at = IntegerField(default=0)

        class Meta:
            table_name = "revisits"
            primary_key = CompositeKey("persona", "reason", "session_label", "turn_id")

    class LateCheckpoint(Base):
        """Rows of ``messages`` a persona's passes had read, oldest first (:class:`indexer.sync.late.LateMark`)."""
        persona = TextField()
        position = IntegerField()
        row = IntegerField()  # rowid
        message_id = TextField(null=True)
        row_key = TextField(null=True)  # keyed digest of the row

        class Meta:
            table_name = "late_checkpoints"
            primary_key = CompositeKey("persona", "position")

    class PrivateOwnTurn(Base):
        """The turns a private session said itself (kept while it stays private); a row with turn ``''``
        says the session's own turns were recorded (none is a record too)."""
        persona = TextField()
        session_label = TextField()
        turn_id = TextField()

        class Meta:
            table_name = "private_own_turns"
            primary_key = CompositeKey("persona", "session_label", "turn_id")

    class CopyInFlight(Base):
        """A fork's copy of a private session's own turn (``kind`` copy), or a compaction beside one
        (compaction), that a pass is writing: noted before any sink holds it."""
        persona = TextField()
        kind = TextField()
        turn_id = TextField()
        session_label = TextField()

        class Meta:
            table_name = "copies_in_flight"
            primary_key = CompositeKey("persona", "kind", "turn_id", "session_label")

    class TruncatedDocument(Base):
        """An indexed document holding a message cut at ledger.max_message_bytes (status shows them)."""
        persona = TextField()
        path = TextField()

        class Meta:
            table_name = "truncated_documents"
            primary_key = CompositeKey("persona", "path")

    class UnscopedHidden(Base):
        """What sinks without scopes were last brought in line with: hidden sessions and turns."""
        persona = TextField()
        kind = TextField()  # session | turn
        value = TextField()

        class Meta:
            table_name = "unscoped_hidden"
            primary_key = CompositeKey("persona", "kind", "value")

    schema_6 = [Meta, File, SessionReg, ProjectMember, PendingTurn, BadRow, EmptyTurn]
    current = [Meta, File, SessionReg, ProjectMember, EmptyTurn, PersonaState, Revisit, LateCheckpoint,
               PrivateOwnTurn, CopyInFlight, TruncatedDocument, UnscopedHidden]
    return Models(Meta, File, SessionReg, ProjectMember, EmptyTurn, PersonaState, Revisit, LateCheckpoint,
                  PrivateOwnTurn, CopyInFlight, TruncatedDocument, UnscopedHidden, PendingTurn, BadRow,
                  schema_6, current)


@dataclass(frozen=True)
class Models:
    """The tables of today's schema, and of schema 6 (which the migrations up to 6 create)."""

    Meta: type
    File: type
    SessionReg: type
    ProjectMember: type
    EmptyTurn: type
    PersonaState: type
    Revisit: type
    LateCheckpoint: type
    PrivateOwnTurn: type
    CopyInFlight: type
    TruncatedDocument: type
    UnscopedHidden: type
    PendingTurn: type  # schema 1-6 only: now Revisit rows
    BadRow: type  # schema 1-6 only: now Revisit rows
    schema_6: list
    current: list


class RevisitReason(str, Enum):
    """Why a later pass comes back to a session or turn (the ``revisits.reason`` column)."""

    PENDING_TURN = "pending_turn"  # not done when built: built again once it is
    BAD_ROW = "bad_row"  # could not be built: again when its rows change, or on --retry-bad
    OWED_SECRET = "owed_secret"  # another persona's build found secret values its documents hold
    TO_BUILD = "to_build"  # live again, moved here, or first seen here, with no history row saying so
    LATE_MESSAGE = "late_message"  # built before, given a message since: found once (the late mark moves on)


def _migration_1(db: SqliteDatabase, models: Models, key) -> None:
    db.create_tables(models.schema_6, safe=True)


def _migration_2(db: SqliteDatabase, models: Models, key) -> None:
    """bad_rows: the fingerprint of the failed turn's rows, and when it was last compared."""
    columns = {c.name for c in db.get_columns("bad_rows")}
    if "fingerprint" not in columns:
        db.execute_sql("ALTER TABLE bad_rows ADD COLUMN fingerprint TEXT NOT NULL DEFAULT ''")
    if "checked_at" not in columns:
        db.execute_sql("ALTER TABLE bad_rows ADD COLUMN checked_at INTEGER NOT NULL DEFAULT 0")


def _create_indexes(db: SqliteDatabase, indexes: Mapping[str, tuple[str, tuple[str, ...]]]) -> None:
    for name, (table, columns) in indexes.items():
        db.execute_sql(f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" ({", ".join(columns)})')


#: Indexes of schema 3, by name: (table, columns). Without them a sync pass with
#: nothing new scanned every document row of the persona (``paths(persona,
#: source=...)``, every pass for the memory files) and sorted every bad row.
INDEXES_3 = {
    "files_persona_source": ("files", ("persona", "source")),
    "bad_rows_persona_checked": ("bad_rows", ("persona", "checked_at", "session_label", "turn_id")),
}


def _migration_3(db: SqliteDatabase, models: Models, key) -> None:
    """Indexes for the per-pass queries: documents by (persona, source), bad rows by
    (persona, last compared). Tables a partial older file lacks are created first."""
    db.create_tables(models.schema_6, safe=True)
    _create_indexes(db, INDEXES_3)


#: Indexes of schema 4: every search resolves its scope from the persona's private and
#: deleted sessions; with only ``persona`` indexed each lookup read every session row of
#: the persona (10,000 sessions: 2.1 ms a search, 0.44 ms with these).
INDEXES_4 = {
    "sessions_persona_visibility": ("sessions", ("persona", "visibility")),
    "sessions_persona_status": ("sessions", ("persona", "ledger_status")),
}


def _migration_4(db: SqliteDatabase, models: Models, key) -> None:
    """Indexes for scope resolution: a persona's sessions by visibility and by ledger status."""
    _create_indexes(db, INDEXES_4)


#: Indexes of schema 5: the copies of a turn in other sessions (forks), looked up by turn id
#: for scope resolution when a session is private.
INDEXES_5 = {
    "files_persona_turn": ("files", ("persona", "turn_id")),
}


def _migration_5(db: SqliteDatabase, models: Models, key) -> None:
    """An index on the files of a persona by turn: a private session's turns copied into forks."""
    _create_indexes(db, INDEXES_5)


def _migration_6(db: SqliteDatabase, models: Models, key) -> None:
    """empty_turns: turns done with no text, built again when messages arrive."""
    db.create_tables(models.schema_6, safe=True)


def _migration_7(db: SqliteDatabase, models: Models, key) -> None:
    """The JSON rows of ``meta`` become tables; pending turns and bad rows join the revisit queue
    (:mod:`indexer.state.schema_7`)."""
    from indexer.state.schema_7 import migrate  # noqa: PLC0415 (its own module: schema 7's one-off code)

    migrate(db, models, key)


# Append only; never edit a released migration.
MIGRATIONS = [_migration_1, _migration_2, _migration_3, _migration_4, _migration_5, _migration_6, _migration_7]
