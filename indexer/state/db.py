"""The state DB: cursors, document hashes, the session registry, projects.

A small SQLite file (WAL) in the index dir, owned by the one writer process;
the API reads it for scope resolution. Schema changes are versioned
migrations (``MIGRATIONS``), applied in order at open and recorded in
``meta['schema_version']``.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from peewee import (
    CompositeKey,
    DatabaseError,
    IntegerField,
    Model,
    SqliteDatabase,
    TextField,
    chunked,
    fn,
)

from indexer.core.build import BuildIdentity
from indexer.core.errors import Failure, Problem
from indexer.core.types import Document
from indexer.runtime.storage_errors import StorageCause, StorageFault, classify
from indexer.state import install_key
from indexer.state.private_turns import PrivateTurns, Visibility
from indexer.state.transactions import StateDatabase

CURSOR_KEY = "memory_sessions_ledger_cursor_v1"
INDEX_META_KEY = "memory_index_meta_v1"
SCHEMA_VERSION_KEY = "schema_version"
# Sessions a build of another persona found secret values for (the labels only, never a value):
# their persona's next pass reads them again (indexer.sync.secret_spread).
SECRET_RECHECK_KEY = "secret_recheck_v1"
# Sessions a tail pass found to build with no history row saying so (live again, moved here, first
# seen here with older history): recorded with the registry change, cleared once built — a pass that
# failed between the two would otherwise never build them.
SESSIONS_TO_BUILD_KEY = "sessions_to_build_v1"
BUSY_TIMEOUT_MS = 10_000
IN_LIMIT = 900  # parameters a statement binds at most (SQLite's old default limit is 999)
GLOBAL = ""  # scope of meta rows that belong to no persona


@dataclass(frozen=True, slots=True)
class FileRecord:
    persona: str
    path: str
    source: str
    session: str | None
    turn_id: str | None
    kind: str
    content_hash: str
    updated_at: int


@dataclass(frozen=True, slots=True)
class SessionRecord:
    label: str
    persona: str
    ledger_status: str
    visibility: str


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


#: Scope facts kept per thread between state changes ((persona, session) pairs).
FACTS_MEMO_ENTRIES = 4096
#: A caller's label longer than this is kept in the memo as its digest: a label may be of any length,
#: and a client asking with thousands of distinct long ones must not make every thread's memo hold them.
MEMO_LABEL_CHARS = 256


def _memo_label(session: str | None) -> str | bytes | None:
    if session is None or len(session) <= MEMO_LABEL_CHARS:
        return session
    return hashlib.sha256(session.encode("utf-8", "surrogatepass")).digest()


def now_ms() -> int:
    return int(time.time() * 1000)


class StateUnreadable(Failure):
    """The state database file is not a database (corrupt, or another file): says what to do."""


class StateUnavailable(Failure):
    """The state database cannot be opened for a storage cause (a full disk, a read-only file system,
    permission): the file is fine, ``fault`` says what is not and what to do."""

    problem = Problem.UNAVAILABLE

    def __init__(self, path: Path, fault: StorageFault):
        super().__init__(f"the state database {path} cannot be opened: {fault.message}")
        self.fault = fault


class StateDB:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._key: bytes | None = None
        self.db = StateDatabase(  # a failed rollback never hides the error that caused it
            str(self.path),
            # secure_delete: what a write replaces is zeroed, not left in free pages
            pragmas={"journal_mode": "wal", "busy_timeout": BUSY_TIMEOUT_MS, "synchronous": "normal", "foreign_keys": 0,
                     "secure_delete": 1},
            check_same_thread=False,
            timeout=10,
        )
        # scope facts of the state as of a stamp, per thread (peewee keeps a connection per thread)
        self._facts = threading.local()
        (self.Meta, self.File, self.SessionReg, self.ProjectMember, self.PendingTurn,
         self.BadRow, self.EmptyTurn) = _models(self.db)
        #: private sessions' own turns and their forks' copies (indexer.state.private_turns)
        self.private = PrivateTurns(self)
        try:
            self.db.connect(reuse_if_open=True)
            self._migrate()
        except DatabaseError as exc:
            self.db.close()
            if "locked" in str(exc) or "busy" in str(exc):
                raise
            fault = classify(exc, [self.path.parent])
            if fault is not None and fault.cause is not StorageCause.CORRUPT:
                raise StateUnavailable(self.path, fault) from exc  # not "move it aside": the file is fine
            raise StateUnreadable(
                f"the state database {self.path} is unreadable ({exc}): move it aside and run `ledger-indexer "
                "sync` to rebuild it from the ledger (the index is kept; project memberships and visibility "
                "changes live in that file: restore it from a backup to keep them)") from None

    def close(self) -> None:
        self.db.close()

    def key(self) -> bytes:
        """The index's secret key (``indexer.state.install_key``), in a file beside this one."""
        if self._key is None:
            self._key = install_key.load_or_create(self.path.with_name(self.path.name + ".key"))
        return self._key

    def truncate_wal(self, *, wait_ms: int = 200) -> bool:
        """Checkpoint the WAL and truncate it (after rewriting what must not stay on disk). False when
        a reader's open transaction kept it (waited for ``wait_ms`` only: a pass must not stall), or
        when called inside a transaction (a checkpoint cannot run there)."""
        if self.db.connection().in_transaction:
            return False
        self.db.execute_sql(f"PRAGMA busy_timeout = {int(wait_ms)}")
        try:
            (busy, _log, _done) = self.db.execute_sql("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            self.db.execute_sql(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        return busy == 0

    def atomic(self):
        return self.db.atomic()

    # -- schema --------------------------------------------------------------

    def _migrate(self) -> None:
        with self.db.atomic():
            self.db.create_tables([self.Meta], safe=True)
            version = int(self.get_meta(SCHEMA_VERSION_KEY) or 0)
            models = [self.Meta, self.File, self.SessionReg, self.ProjectMember, self.PendingTurn, self.BadRow,
                      self.EmptyTurn]
            for number, migration in enumerate(MIGRATIONS, start=1):
                if number > version:
                    migration(self.db, models)
                    self.set_meta(SCHEMA_VERSION_KEY, str(number))

    @property
    def schema_version(self) -> int:
        return int(self.get_meta(SCHEMA_VERSION_KEY) or 0)

    # -- meta ------------------------------------------------------------------

    def get_meta(self, key: str, scope: str = GLOBAL) -> str | None:
        row = self.Meta.get_or_none((self.Meta.key == key) & (self.Meta.scope == scope))
        return row.value if row else None

    def set_meta(self, key: str, value: str, scope: str = GLOBAL) -> None:
        self.Meta.replace(key=key, scope=scope, value=value).execute()

    def delete_meta(self, key: str, scope: str = GLOBAL) -> None:
        self.Meta.delete().where((self.Meta.key == key) & (self.Meta.scope == scope)).execute()

    def get_cursor(self, persona: str) -> int | None:
        value = self.get_meta(CURSOR_KEY, persona)
        return int(value) if value is not None else None

    def set_cursor(self, persona: str, cursor: int) -> None:
        self.set_meta(CURSOR_KEY, str(int(cursor)), persona)

    def clear_cursor(self, persona: str) -> None:
        self.delete_meta(CURSOR_KEY, persona)

    def build_identity(self, persona: str) -> BuildIdentity | None:
        """What the persona's index was built with (None before its first complete build)."""
        return BuildIdentity.from_dict(self.get_json(INDEX_META_KEY, persona))

    def set_build_identity(self, persona: str, identity: BuildIdentity) -> None:
        """Record a complete build (with the cursor, in the caller's transaction)."""
        self.set_json(INDEX_META_KEY, identity.as_dict(), persona)

    def meta_scopes(self, key: str) -> list[str]:
        """Every scope (persona) holding a meta row under ``key``."""
        M = self.Meta
        return [scope for (scope,) in M.select(M.scope).where(M.key == key).order_by(M.scope).tuples()]

    def get_json(self, key: str, scope: str = GLOBAL) -> dict | None:
        value = self.get_meta(key, scope)
        return json.loads(value) if value else None

    def set_json(self, key: str, value: dict, scope: str = GLOBAL) -> None:
        self.set_meta(key, json.dumps(value, sort_keys=True), scope)

    def add_counter(self, key: str, scope: str, delta: int) -> None:
        if delta:
            current = int(self.get_meta(key, scope) or 0)
            self.set_meta(key, str(current + delta), scope)

    def counter(self, key: str, scope: str) -> int:
        return int(self.get_meta(key, scope) or 0)

    # -- files (document hashes) -------------------------------------------------

    def hashes(self, persona: str, paths: Iterable[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        F = self.File
        for part in chunked(sorted(set(paths)), 500):
            q = F.select(F.path, F.content_hash).where((F.persona == persona) & F.path.in_(part))
            out.update(dict(q.tuples()))
        return out

    def paths(self, persona: str, *, session: str | None = None, source: str | None = None) -> set[str]:
        F = self.File
        q = F.select(F.path).where(F.persona == persona)
        if session is not None:
            q = q.where(F.session_label == session)
        if source is not None:
            q = q.where(F.source == source)
        return {p for (p,) in q.tuples()}

    def record_documents(self, docs: Sequence[Document]) -> None:
        stamp = now_ms()
        rows = [
            {
                "persona": d.persona, "path": d.path, "source": d.source.value, "session_label": d.session,
                "turn_id": d.turn_id, "kind": d.kind.value, "content_hash": d.content_hash, "updated_at": stamp,
            }
            for d in docs
        ]
        for part in chunked(rows, 200):
            self.File.replace_many(part).execute()

    def forget_documents(self, persona: str, paths: Iterable[str]) -> None:
        F = self.File
        for part in chunked(sorted(set(paths)), 500):
            F.delete().where((F.persona == persona) & F.path.in_(part)).execute()

    def file(self, persona: str, path: str) -> FileRecord | None:
        F = self.File
        r = F.get_or_none((F.persona == persona) & (F.path == path))
        if r is None:
            return None
        return FileRecord(r.persona, r.path, r.source, r.session_label, r.turn_id, r.kind, r.content_hash,
                          r.updated_at)

    def document_count(self, persona: str) -> int:
        return self.File.select().where(self.File.persona == persona).count()

    def has_documents(self, persona: str) -> bool:
        """Whether any document of ``persona`` is recorded (one index probe: asked every pass)."""
        return self.File.select(self.File.path).where(self.File.persona == persona).limit(1).exists()

    def indexed_turn_counts(self, persona: str, sessions: Iterable[str]) -> dict[str, int]:
        """Per session label: how many of its turns have a document (for progress plans)."""
        F = self.File
        out: dict[str, int] = {}
        for part in chunked(sorted(set(sessions)), 500):
            q = (F.select(F.session_label, fn.COUNT(F.turn_id))
                 .where((F.persona == persona) & F.session_label.in_(part) & F.turn_id.is_null(False))
                 .group_by(F.session_label))
            out.update((label, int(n)) for label, n in q.tuples())
        return out

    def indexed_turns(self, persona: str, session: str) -> set[str]:
        F = self.File
        q = F.select(F.turn_id).where((F.persona == persona) & (F.session_label == session))
        return {t for (t,) in q.tuples() if t}

    # -- session registry ----------------------------------------------------------

    def register_sessions(self, rows: Iterable[tuple[str, str, str]]) -> None:
        """Upsert (label, persona, ledger_status); visibility is kept."""
        stamp = now_ms()
        S = self.SessionReg
        for label, persona, status in rows:
            S.insert(label=label, persona=persona, ledger_status=status, visibility=Visibility.SHARED,
                     first_seen=stamp, updated_at=stamp).on_conflict(
                conflict_target=[S.label],
                update={S.persona: persona, S.ledger_status: status, S.updated_at: stamp},
            ).execute()

    def session_statuses(self, persona: str) -> dict[str, str]:
        S = self.SessionReg
        return dict(S.select(S.label, S.ledger_status).where(S.persona == persona).tuples())

    def registered_personas(self, labels: Iterable[str]) -> dict[str, str]:
        """The registered persona of each of ``labels`` that is registered."""
        S = self.SessionReg
        out: dict[str, str] = {}
        for part in chunked(sorted(set(labels)), 500):
            out.update(S.select(S.label, S.persona).where(S.label.in_(part)).tuples())
        return out

    def session(self, label: str) -> SessionRecord | None:
        r = self.SessionReg.get_or_none(self.SessionReg.label == label)
        return SessionRecord(r.label, r.persona, r.ledger_status, r.visibility) if r else None

    def set_visibility(self, label: str, visibility: str) -> bool:
        if visibility not in (Visibility.SHARED, Visibility.PRIVATE):
            raise ValueError(f"visibility must be 'shared' or 'private', not {visibility!r}")
        S = self.SessionReg
        return S.update(visibility=visibility, updated_at=now_ms()).where(S.label == label).execute() > 0

    # -- projects --------------------------------------------------------------------

    def project_add(self, project: str, labels: Iterable[str]) -> None:
        stamp = now_ms()
        rows = [{"project": project, "session_label": lbl, "added_at": stamp} for lbl in labels]
        for part in chunked(rows, 200):
            self.ProjectMember.insert_many(part).on_conflict_ignore().execute()

    def project_remove(self, project: str, labels: Iterable[str]) -> int:
        P = self.ProjectMember
        return P.delete().where((P.project == project) & P.session_label.in_(list(labels))).execute()

    def projects(self) -> dict[str, list[str]]:
        P = self.ProjectMember
        out: dict[str, list[str]] = {}
        for project, label in P.select(P.project, P.session_label).order_by(P.project, P.session_label).tuples():
            out.setdefault(project, []).append(label)
        return out

    def project_peers(self, label: str) -> set[str]:
        """Every session sharing a project with ``label`` (itself included)."""
        P = self.ProjectMember
        mine = P.select(P.project).where(P.session_label == label)
        peers = {lbl for (lbl,) in P.select(P.session_label).where(P.project.in_(mine)).tuples()}
        return peers | {label}

    def hidden_sessions(self, persona: str) -> set[str]:
        """Sessions of ``persona`` that other sessions must never see: private or deleted."""
        S = self.SessionReg
        q = S.select(S.label).where(
            (S.persona == persona) & ((S.visibility == Visibility.PRIVATE) | (S.ledger_status == "deleted"))
        )
        return {lbl for (lbl,) in q.tuples()}

    def secret_rechecks(self, persona: str) -> set[str]:
        return self._labels(SECRET_RECHECK_KEY, persona)

    def add_secret_rechecks(self, persona: str, labels: Iterable[str]) -> None:
        self._add_labels(SECRET_RECHECK_KEY, persona, labels)

    def clear_secret_rechecks(self, persona: str, labels: Iterable[str]) -> None:
        self._clear_labels(SECRET_RECHECK_KEY, persona, labels)

    def sessions_to_build(self, persona: str) -> set[str]:
        return self._labels(SESSIONS_TO_BUILD_KEY, persona)

    def add_sessions_to_build(self, persona: str, labels: Iterable[str]) -> None:
        self._add_labels(SESSIONS_TO_BUILD_KEY, persona, labels)

    def clear_sessions_to_build(self, persona: str, labels: Iterable[str] | None = None) -> None:
        """``labels`` built (None: every one, after a pass that built every session)."""
        if labels is None:
            self.delete_meta(SESSIONS_TO_BUILD_KEY, persona)
        else:
            self._clear_labels(SESSIONS_TO_BUILD_KEY, persona, labels)

    def _labels(self, key: str, persona: str) -> set[str]:
        return set(self.get_json(key, persona) or [])

    def _add_labels(self, key: str, persona: str, labels: Iterable[str]) -> None:
        labels, now = set(labels), self._labels(key, persona)
        if not labels <= now:
            self.set_json(key, sorted(now | labels), persona)

    def _clear_labels(self, key: str, persona: str, labels: Iterable[str]) -> None:
        labels, now = set(labels), self._labels(key, persona)
        if now & labels:
            self.set_json(key, sorted(now - labels), persona)

    def session_personas(self) -> set[str]:
        """Personas with a session in the registry (a small table: cheaper than ``personas_indexed``)."""
        S = self.SessionReg
        return {p for (p,) in S.select(S.persona).distinct().tuples()}

    def personas_with_live_sessions(self) -> set[str]:
        """Personas with a registered session the ledger did not delete (every pass asks: reused while
        the state DB is unchanged)."""
        S = self.SessionReg
        return set(self._per_state(("live personas",), lambda: {
            p for (p,) in S.select(S.persona).where(S.ledger_status != "deleted").distinct().tuples()}))

    def personas_with_private_sessions(self) -> set[str]:
        S = self.SessionReg
        return {p for (p,) in S.select(S.persona).where(S.visibility == Visibility.PRIVATE).distinct().tuples()}

    def private_sessions(self, persona: str) -> set[str]:
        S = self.SessionReg
        q = S.select(S.label).where((S.persona == persona) & (S.visibility == Visibility.PRIVATE))
        return {lbl for (lbl,) in q.tuples()}

    def scope_facts(self, persona: str, session: str | None):
        """Everything scope resolution needs, read in one short transaction.

        Reused while the state DB is unchanged (every search asks; peewee's three queries cost
        about a millisecond of interpreter time a search, under the GIL). "Unchanged" is exact,
        per connection: SQLite's ``data_version`` moves on every commit of another connection,
        ``total_changes`` on every write of this one; both are read inside the read transaction,
        before the facts, so a commit in between can only make the kept facts newer than their
        stamp, never older. Inside a caller's own transaction (whose writes may still roll back)
        nothing is kept or reused."""
        if self.db.connection().in_transaction:  # the caller's transaction holds the reads together already
            return self._read_facts(persona, session)
        with self.db.atomic():
            memo = self._current_memo()
            key = (persona, _memo_label(session))
            facts = memo.entries.get(key)
            if facts is None:
                facts = self._read_facts(persona, session, memo.copies)
                if len(memo.entries) >= FACTS_MEMO_ENTRIES:
                    memo.entries.clear()
                memo.entries[key] = facts
            return facts

    def hidden_copies(self, persona: str) -> dict[str, set[str]]:
        """``private.copies(persona)``, reused while the state DB is unchanged (as ``scope_facts``:
        every export write and pass asks)."""
        return self._per_state(persona, lambda: self.private.copies(persona))

    def _per_state(self, key, compute):
        """``compute()``, kept in this thread's memo until the state DB changes (not inside a
        caller's transaction, whose writes may still roll back)."""
        if self.db.connection().in_transaction:
            return compute()
        with self.db.atomic():
            memo = self._current_memo()
            if key not in memo.copies:
                memo.copies[key] = compute()
            return memo.copies[key]

    def _current_memo(self):
        """This thread's memo of scope facts, emptied when the state DB changed. Call in a read
        transaction: the stamp is read in it, before what the caller then reads."""
        conn = self.db.connection()
        (version,) = conn.execute("PRAGMA data_version").fetchone()
        stamp = (conn, version, conn.total_changes)
        memo = self._facts
        if getattr(memo, "stamp", None) != stamp:
            memo.stamp, memo.entries, memo.copies = stamp, {}, {}
        return memo

    def others_private_turns(self, persona: str) -> set[str]:
        """Every own turn of other personas' private sessions (as ``PrivateTurns.copies`` counts them):
        any copy of one in ``persona`` is a fork's (a subagent's), recorded or still being written.
        Reused while the state DB is unchanged."""
        return self._per_state(("others", persona), lambda: self.private.others_own_turns(persona))

    def _read_facts(self, persona: str, session: str | None, copies: dict | None = None):
        """``copies``: private sessions' hidden turns per persona, shared by every caller's facts at
        one state (one read per persona and state, not per caller)."""
        from indexer.core.scopes import ScopeFacts

        private = self.private_sessions(persona)
        per_label = copies.get(persona) if copies is not None else None
        if per_label is None:
            per_label = self.private.copies(persona, private=private)
            if copies is not None:
                copies[persona] = per_label
        hidden = set().union(*(ids for label, ids in per_label.items() if label != session))
        if hidden and session:  # a turn in the caller's own history is no secret to it: its copies stay visible
            hidden -= self.turns_of(persona, [session])
        return ScopeFacts(
            private=frozenset(private),
            deleted=frozenset(self.deleted_sessions(persona)),
            project_peers=frozenset(self.project_peers(session)) if session else frozenset(),
            hidden_turns=frozenset(hidden),
        )

    def paths_of_turns(self, persona: str, turns: Iterable[str], *, except_sessions: Iterable[str] = ()) -> set[str]:
        """Every document path of ``persona`` whose turn is one of ``turns`` (every session's copy but
        those of ``except_sessions``)."""
        F = self.File
        skip = set(except_sessions)
        out: set[str] = set()
        for part in chunked(sorted(set(turns)), 500):
            q = F.select(F.path, F.session_label).where((F.persona == persona) & F.turn_id.in_(part))
            out.update(p for p, label in q.tuples() if label not in skip)
        return out

    def sessions_of_turns(self, persona: str, turns: Iterable[str]) -> set[str]:
        """The sessions whose indexed history holds any of ``turns``."""
        return {label for labels in self.turn_holders(persona, turns).values() for label in labels if label}

    def session_turns(self, persona: str, sessions: Iterable[str]) -> dict[str, set[str]]:
        """Per session of ``sessions``, the turn ids of its indexed documents (one statement)."""
        labels = sorted(set(sessions))
        if not labels:
            return {}
        rows = self._rows_in("SELECT session_label, turn_id FROM files WHERE persona = ? AND turn_id IS NOT NULL"
                             " AND session_label IN ({marks})", persona, labels)
        out: dict[str, set[str]] = {label: set() for label in labels}
        for label, turn in rows:
            out[label].add(turn)
        return out

    def turn_holders(self, persona: str, turns: Iterable[str]) -> dict[str, set[str]]:
        """Per turn of ``turns``, the sessions whose indexed history holds it (by the index on turns).
        Plain SQL, not peewee: lists run to a private session's every own turn, and peewee's IN lists
        of 500 cost ~4 ms of interpreter time each."""
        ids = sorted(set(turns))
        if not ids:
            return {}
        rows = self._rows_in("SELECT turn_id, session_label FROM files WHERE persona = ? AND turn_id IN ({marks})",
                             persona, ids)
        out: dict[str, set[str]] = {}
        for turn, label in rows:
            out.setdefault(turn, set()).add(label)
        return out

    def _rows_in(self, sql: str, persona: str, values: Sequence[str]) -> list[tuple]:
        """``sql`` (``persona = ?`` first, then ``IN ({marks})``) over ``values``, IN_LIMIT at a time,
        each bound as a parameter: labels and ids may hold any character (SQLite's JSON functions cut a
        string at NUL)."""
        out: list[tuple] = []
        for part in chunked(values, IN_LIMIT):
            out.extend(self.db.execute_sql(sql.format(marks=",".join("?" * len(part))), (persona, *part)).fetchall())
        return out

    def turns_of(self, persona: str, sessions: Iterable[str]) -> set[str]:
        """Every turn id in the indexed history of ``sessions`` (their documents' turns)."""
        labels = sorted(set(sessions))
        if not labels:
            return set()
        F = self.File
        out: set[str] = set()
        for part in chunked(labels, 500):
            q = F.select(F.turn_id).where((F.persona == persona) & F.session_label.in_(part)
                                          & F.turn_id.is_null(False)).distinct()
            out.update(t for (t,) in q.tuples())
        return out

    def scope_state(self) -> dict:
        """Every fact scope resolution reads, for every persona, in one transaction: what the
        writer publishes beside the tables on object storage for reader machines
        (``{"personas": {p: {"private", "deleted", "build", "private_turns"}}, "projects": {name: [labels]}}``)."""
        S = self.SessionReg
        with self.db.atomic():
            personas: dict[str, dict] = {}
            for persona in sorted({p for (p,) in S.select(S.persona).distinct().tuples()}
                                  | set(self.personas_indexed())
                                  | {m.scope for m in self.Meta.select(self.Meta.scope).where(
                                      self.Meta.key == INDEX_META_KEY)}):
                identity = self.build_identity(persona)
                private = self.private_sessions(persona)
                personas[persona] = {"private": sorted(private),
                                     "deleted": sorted(self.deleted_sessions(persona)),
                                     "build": identity.as_dict() if identity else None,
                                     "private_turns": {label: sorted(ids) for label, ids
                                                       in self.private.copies(persona, private=private).items()}}
            return {"personas": personas, "projects": self.projects()}

    def deleted_sessions(self, persona: str) -> set[str]:
        S = self.SessionReg
        q = S.select(S.label).where((S.persona == persona) & (S.ledger_status == "deleted"))
        return {lbl for (lbl,) in q.tuples()}

    # -- pending turns -------------------------------------------------------------------

    def pending(self, persona: str) -> list[tuple[str, str]]:
        P = self.PendingTurn
        return list(P.select(P.session_label, P.turn_id).where(P.persona == persona).tuples())

    def record_empty(self, persona: str, empty: Iterable[tuple[str, str]], filled: Iterable[tuple[str, str]]) -> None:
        """(session, turn) pairs done with no text (``empty``), and pairs that made a document (``filled``)."""
        T = self.EmptyTurn
        rows = [{"persona": persona, "session_label": s, "turn_id": t} for s, t in set(empty)]
        for part in chunked(rows, 300):
            T.insert_many(part).on_conflict_ignore().execute()
        filled = sorted(set(filled))
        if filled and T.select().where(T.persona == persona).exists():  # a statement a part, not one a pair
            for part in chunked(filled, IN_LIMIT // 2):
                self.db.execute_sql(
                    "DELETE FROM empty_turns WHERE persona = ? AND (session_label, turn_id) IN"
                    f" (VALUES {','.join(['(?, ?)'] * len(part))})", (persona, *(v for pair in part for v in pair)))

    def forget_empty(self, persona: str) -> None:
        self.EmptyTurn.delete().where(self.EmptyTurn.persona == persona).execute()

    def forget_sessions(self, persona: str, labels: Iterable[str]) -> None:
        """Drop what ``persona`` keeps of ``labels`` besides documents: pending, bad and empty turns
        (the sessions left the persona)."""
        for part in chunked(sorted(set(labels)), 500):
            for table in (self.PendingTurn, self.BadRow, self.EmptyTurn):
                table.delete().where((table.persona == persona) & table.session_label.in_(part)).execute()

    def holders_of_late(self, persona: str, turns: Iterable[str]) -> list[tuple[str, str]]:
        """(session, turn) of ``turns`` indexed in ``persona`` (a document each) or done with no text."""
        ids = sorted(set(turns))
        if not ids:
            return []
        pairs = {(s, t) for t, sessions in self.turn_holders(persona, ids).items() for s in sessions if s}
        rows = self._rows_in("SELECT session_label, turn_id FROM empty_turns WHERE persona = ? AND turn_id IN ({marks})",
                             persona, ids)
        return sorted(pairs | set(rows))

    def pending_count(self, persona: str) -> int:
        return self.PendingTurn.select().where(self.PendingTurn.persona == persona).count()

    def set_pending(self, persona: str, items: Iterable[tuple[str, str]]) -> None:
        stamp = now_ms()
        rows = [{"persona": persona, "session_label": s, "turn_id": t, "seen_at": stamp} for s, t in items]
        for part in chunked(rows, 200):
            self.PendingTurn.insert_many(part).on_conflict_ignore().execute()

    def clear_pending(self, persona: str, items: Iterable[tuple[str, str]]) -> None:
        P = self.PendingTurn
        for session, turn in items:
            P.delete().where((P.persona == persona) & (P.session_label == session) & (P.turn_id == turn)).execute()

    def forget_source(self, persona: str) -> None:
        """Drop every per-source fact of ``persona`` (cursor, pending turns, bad
        rows, derived sets): the ledger they described is gone."""
        P, B, M = self.PendingTurn, self.BadRow, self.Meta
        with self.db.atomic():
            P.delete().where(P.persona == persona).execute()
            B.delete().where(B.persona == persona).execute()
            M.delete().where(M.scope == persona).execute()
            self.forget_empty(persona)

    # -- bad rows ------------------------------------------------------------------------

    def record_bad(self, persona: str, items: Iterable[tuple[str, str, str, str]],
                   fingerprints: dict[str, str] | None = None, *, sessions_built: Iterable[str] = ()) -> int:
        """Record (session, turn_id, reason, detail) as bad, with the fingerprint
        of the turn's rows (by turn id). ``sessions_built``: sessions whose every
        unindexed turn was just built again, so their bad rows not in ``items``
        are resolved (built fine, or no longer in the session's history).
        Returns how many (session, turn) pairs are newly bad."""
        stamp = now_ms()
        B = self.BadRow
        fingerprints = fingerprints or {}
        items = list({(i[0], i[1]): i for i in items}.values())
        known = {
            (s, t) for s, t in B.select(B.session_label, B.turn_id).where(B.persona == persona).tuples()
        }
        still = {(i[0], i[1]) for i in items}
        by_session: dict[str, list[str]] = {}
        for s, t in known:
            if (s, t) not in still:
                by_session.setdefault(s, []).append(t)
        for label in set(sessions_built):
            for part in chunked(by_session.get(label, []), 500):
                B.delete().where((B.persona == persona) & (B.session_label == label) & B.turn_id.in_(part)).execute()
        rows = [{"persona": persona, "session_label": session, "turn_id": turn, "reason": reason,
                 "detail": detail[:500], "seen_at": stamp, "fingerprint": fingerprints.get(turn, ""),
                 "checked_at": stamp} for session, turn, reason, detail in items]
        for part in chunked(rows, 200):
            B.replace_many(part).execute()  # a turn still bad: its reason and fingerprint are refreshed
        return len(still - known)

    def bad_to_check(self, persona: str, limit: int) -> list[tuple[str, str, str]]:
        """Up to ``limit`` bad (session, turn_id, fingerprint), least recently compared first."""
        B = self.BadRow
        q = (B.select(B.session_label, B.turn_id, B.fingerprint).where(B.persona == persona)
             .order_by(B.checked_at, B.session_label, B.turn_id).limit(limit))
        return list(q.tuples())

    def oldest_bad_check(self, persona: str) -> int | None:
        """When the least recently compared bad turn of ``persona`` was compared (ms; None: no bad turn)."""
        B = self.BadRow
        return B.select(fn.MIN(B.checked_at)).where(B.persona == persona).scalar()

    def mark_bad_checked(self, persona: str, items: Iterable[tuple[str, str]], at: int | None = None) -> None:
        B = self.BadRow
        stamp = now_ms() if at is None else at
        for session, turn in items:
            B.update(checked_at=stamp).where((B.persona == persona) & (B.session_label == session)
                                             & (B.turn_id == turn)).execute()

    def bad_count(self, persona: str) -> int:
        return self.BadRow.select().where(self.BadRow.persona == persona).count()

    def clear_bad_turns(self, persona: str, items: Iterable[tuple[str, str]]) -> int:
        """Forget (session, turn_id) entries that built fine on a retry."""
        B = self.BadRow
        n = 0
        for session, turn in set(items):
            n += B.delete().where((B.persona == persona) & (B.session_label == session)
                                  & (B.turn_id == turn)).execute()
        return n

    def bad_items(self, persona: str) -> list[tuple[str, str]]:
        B = self.BadRow
        return list(B.select(B.session_label, B.turn_id).where(B.persona == persona).tuples())

    def bad_list(self, persona: str, limit: int = 50) -> list[dict]:
        """The skipped turns with their reasons, newest first (for status)."""
        B = self.BadRow
        q = (B.select(B.session_label, B.turn_id, B.reason, B.detail, B.seen_at).where(B.persona == persona)
             .order_by(B.seen_at.desc(), B.session_label, B.turn_id).limit(limit))
        return [{"session": s, "turn_id": t, "reason": r, "detail": d, "seen_at_ms": at} for s, t, r, d, at in q.tuples()]

    def clear_bad(self, persona: str) -> None:
        self.BadRow.delete().where(self.BadRow.persona == persona).execute()

    def personas_indexed(self) -> list[str]:
        F = self.File
        return [p for (p,) in F.select(F.persona).distinct().tuples()]


__all__ = ["StateDB", "FileRecord", "SessionRecord", "Visibility", "CURSOR_KEY", "MIGRATIONS", "INDEXES_3", "INDEXES_4",
           "INDEXES_5"]
