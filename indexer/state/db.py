"""The state DB: cursors, document hashes, the session registry, projects, turns to revisit.

A small SQLite file (WAL) in the index dir, owned by the one writer process;
the API reads it for scope resolution. Its tables are declared in
:mod:`indexer.state.schema`, changed only by numbered migrations (``MIGRATIONS``),
applied in order at open. ``StateDB`` is split by what it stores:
:mod:`~indexer.state.documents` (files), :mod:`~indexer.state.registry` (sessions,
projects), :mod:`~indexer.state.revisits` (pending, bad and empty turns, owed
secrets, sessions to build), :mod:`~indexer.state.meta` (cursor, build identity)
and :mod:`~indexer.state.scope_facts` (what a search may see).
"""

from __future__ import annotations

import threading
from pathlib import Path

from peewee import DatabaseError

from indexer.core.errors import Failure, Problem
from indexer.runtime.storage_errors import StorageCause, StorageFault, classify
from indexer.state import install_key
from indexer.state.documents import DocumentStore, FileRecord
from indexer.state.meta import LEDGER_IDENTITY_KEY, MetaStore, Position
from indexer.state.private_turns import PrivateTurns, Visibility
from indexer.state.registry import SessionRecord, SessionRegistry
from indexer.state.revisits import RevisitStore
from indexer.state.schema import (
    GLOBAL,
    IN_LIMIT,
    INDEXES_3,
    INDEXES_4,
    INDEXES_5,
    MIGRATIONS,
    SCHEMA_VERSION_KEY,
    RevisitReason,
    _models,
    now_ms,
)
from indexer.state.scope_facts import ScopeFactsMemo
from indexer.state.transactions import StateDatabase

BUSY_TIMEOUT_MS = 10_000

class StateUnreadable(Failure):
    """The state database file is not a database (corrupt, or another file): says what to do."""


class StateUnavailable(Failure):
    """The state database cannot be opened for a storage cause (a full disk, a read-only file system,
    permission): the file is fine, ``fault`` says what is not and what to do."""

    problem = Problem.UNAVAILABLE

    def __init__(self, path: Path, fault: StorageFault):
        super().__init__(f"the state database {path} cannot be opened: {fault.message}")
        self.fault = fault


class StateDB(MetaStore, DocumentStore, SessionRegistry, RevisitStore, ScopeFactsMemo):
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
        self.models = _models(self.db)
        (self.Meta, self.File, self.SessionReg, self.ProjectMember, self.EmptyTurn, self.PersonaState, self.Revisit,
         self.LateCheckpoint, self.PrivateOwnTurn, self.CopyInFlight, self.TruncatedDocument,
         self.UnscopedHidden) = self.models.current
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
            for number, migration in enumerate(MIGRATIONS, start=1):
                if number > version:
                    migration(self.db, self.models, self.key)
                    self.set_meta(SCHEMA_VERSION_KEY, str(number))

    @property
    def schema_version(self) -> int:
        return int(self.get_meta(SCHEMA_VERSION_KEY) or 0)


__all__ = ["GLOBAL", "IN_LIMIT", "INDEXES_3", "INDEXES_4", "INDEXES_5", "LEDGER_IDENTITY_KEY", "MIGRATIONS",
           "Position", "RevisitReason", "SCHEMA_VERSION_KEY", "FileRecord", "SessionRecord",
           "StateDB", "StateUnavailable", "StateUnreadable", "Visibility", "now_ms"]
