"""The scope state readers on other machines need, published beside the tables.

On object storage, reader machines have no state DB: the writer publishes what
scope resolution reads — per persona the private and deleted sessions and the
build identity, and every project's sessions — as the Lance table ``_scopes``
in the same database::

    kind      key          data (JSON)
    "meta"    ""           {"format": 1, "published_ms": …, "digest": …, "writer": {…}}
    "projects" ""          {"<project>": ["<label>", …], …}
    "persona" "<persona>"  {"private": [...], "deleted": [...], "build": {...} | null,
                            "private_turns": {"<label>": [turn ids of its history], …}}

Each publish replaces the whole table in one Lance commit (an overwrite), so a
reader sees one complete state or the previous one, never a mix. The writer
publishes at the end of every sync pass when anything changed, and at once,
*before its state DB commits the change*, for a visibility or project change
(:meth:`ScopePublisher.change`): a reader is never wider than the writer for
longer than its own refresh interval.

Readers (:class:`PublishedScopes`) re-read it at most every ``refresh`` and
fail closed: no published state, an unreadable one, or a persona with a live
table but no published entry is an error (:class:`ScopeStateUnavailable`),
never an unscoped search.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import structlog

from exporters.base import SinkError
from indexer.core.scopes import ScopeFacts
from indexer.state.db import StateDB

log = structlog.get_logger("exporters.lancedb.published")

SCOPES_TABLE = "_scopes"
SCOPES_FORMAT = 2  # 2: private_turns (a private session's turns copied into forks)
READABLE_FORMATS = (1, 2)  # readers upgrade first: a format-1 writer's state is still read


class ScopeStateUnavailable(SinkError):
    """The published scope state is missing or unreadable: searching would not be scoped."""


@dataclass(frozen=True, slots=True)
class PersonaScopes:
    private: frozenset[str]
    deleted: frozenset[str]
    build: dict[str, Any] | None
    #: per private session, the turn ids of its history (hidden in every other session's copy)
    private_turns: dict[str, frozenset[str]] | None = None

    def hidden_turns(self, caller: str | None) -> frozenset[str]:
        turns = self.private_turns or {}
        return frozenset().union(*(ids for label, ids in turns.items() if label != caller))


@dataclass(frozen=True, slots=True)
class ScopeSnapshot:
    """One complete published scope state."""

    personas: dict[str, PersonaScopes]
    projects: dict[str, tuple[str, ...]]
    published_ms: int = 0
    writer: dict[str, Any] | None = None

    @classmethod
    def from_state(cls, state: StateDB) -> ScopeSnapshot:
        raw = state.scope_state()
        return cls(
            personas={p: PersonaScopes(frozenset(v["private"]), frozenset(v["deleted"]), v["build"],
                                       {k: frozenset(t) for k, t in v.get("private_turns", {}).items()})
                      for p, v in raw["personas"].items()},
            projects={k: tuple(v) for k, v in raw["projects"].items()},
        )

    def digest(self, format_: int = SCOPES_FORMAT) -> str:
        """Of the facts only (not when or by whom they were published), as format ``format_`` wrote it."""
        body = {"personas": {p: [sorted(v.private), sorted(v.deleted), v.build,
                                 *([_turns_json(v.private_turns)] if format_ >= 2 else [])]
                             for p, v in self.personas.items()},
                "projects": {k: sorted(v) for k, v in self.projects.items()}}
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode("utf-8", "surrogatepass")).hexdigest()

    def project_peers(self, label: str) -> frozenset[str]:
        """Every session sharing a project with ``label`` (itself included): ``StateDB.project_peers``."""
        peers = {label}
        for members in self.projects.values():
            if label in members:
                peers.update(members)
        return frozenset(peers)

    def facts(self, persona: str, session: str | None) -> ScopeFacts:
        entry = self.personas.get(persona) or PersonaScopes(frozenset(), frozenset(), None)
        return ScopeFacts(private=entry.private, deleted=entry.deleted,
                          project_peers=self.project_peers(session) if session else frozenset(),
                          hidden_turns=entry.hidden_turns(session))

    # -- the table's rows --

    def rows(self, writer: dict[str, Any] | None = None) -> pa.Table:
        kinds, keys, data = ["meta", "projects"], ["", ""], [
            json.dumps({"format": SCOPES_FORMAT, "published_ms": int(time.time() * 1000), "digest": self.digest(),
                        "writer": writer or {}}, sort_keys=True),
            json.dumps({k: list(v) for k, v in self.projects.items()}, sort_keys=True, ensure_ascii=False),
        ]
        for persona, v in sorted(self.personas.items()):
            kinds.append("persona")
            keys.append(persona)
            data.append(json.dumps({"private": sorted(v.private), "deleted": sorted(v.deleted), "build": v.build,
                                    "private_turns": _turns_json(v.private_turns)},
                                   sort_keys=True, ensure_ascii=False))
        return pa.table({"kind": pa.array(kinds, pa.string()), "key": pa.array(keys, pa.string()),
                         "data": pa.array(data, pa.string())})

    @classmethod
    def from_rows(cls, rows: list[dict[str, Any]], where: str) -> ScopeSnapshot:
        meta = projects = None
        personas: dict[str, PersonaScopes] = {}
        try:
            for row in rows:
                value = json.loads(row["data"])
                if row["kind"] == "meta":
                    meta = value
                elif row["kind"] == "projects":
                    projects = {str(k): tuple(str(x) for x in v) for k, v in value.items()}
                elif row["kind"] == "persona":
                    personas[row["key"]] = PersonaScopes(
                        frozenset(value["private"]), frozenset(value["deleted"]), value.get("build"),
                        {str(k): frozenset(str(t) for t in ids) for k, ids in value.get("private_turns", {}).items()})
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ScopeStateUnavailable(f"lancedb: the published scope state in {where} is unreadable ({e}); "
                                        "searches are refused until the writer publishes it again") from e
        # format 1 (a writer before private forks): read as it is, without the forks' hidden turns
        if not meta or meta.get("format") not in READABLE_FORMATS or projects is None:
            raise ScopeStateUnavailable(f"lancedb: the published scope state in {where} is incomplete or of an "
                                        "unknown format; searches are refused until the writer publishes it again")
        snap = cls(personas, projects, int(meta.get("published_ms") or 0), meta.get("writer") or None)
        if meta.get("digest") != snap.digest(int(meta["format"])):
            raise ScopeStateUnavailable(f"lancedb: the published scope state in {where} does not match its digest; "
                                        "searches are refused until the writer publishes it again")
        return snap


def _turns_json(turns: dict[str, frozenset[str]] | None) -> dict[str, list[str]]:
    return {label: sorted(ids) for label, ids in sorted((turns or {}).items())}


def _open(db, name: str):
    try:
        return db.open_table(name)
    except ValueError:
        return None
    except Exception as e:
        if "not found" in str(e).lower() or "does not exist" in str(e).lower():
            return None
        raise


class ScopePublisher:
    """The writer's side: publishes :meth:`ScopeSnapshot.from_state` as ``_scopes``.

    ``before_commit`` is the writer lease check. Publishes are serialized; one
    that would change nothing is skipped."""

    def __init__(self, db, where: str, *, before_commit: Callable[[], None] | None = None,
                 writer: dict[str, Any] | None = None, on_close: Callable[[], None] | None = None) -> None:
        self._db = db
        self.where = where
        self._before_commit = before_commit
        self._writer = writer or {}
        self._on_close = on_close
        self._lock = threading.RLock()
        self._published: str | None = None
        self.publishes = 0
        #: called after every publish (the writer's own searcher drops its cached copy)
        self.listeners: list[Callable[[], None]] = []

    def publish(self, state: StateDB, *, force: bool = False) -> bool:
        """Publish the state DB's scope state now if it differs from the last one published;
        True when a commit was made. Raises :class:`SinkError` when it cannot."""
        with self._lock:
            snap = ScopeSnapshot.from_state(state)
            digest = snap.digest()
            if digest == self._published and not force:
                return False
            if self._published is None and not force:
                current = self.read_back()
                if current is not None and current.digest() == digest:
                    self._published = digest
                    return False
            if self._before_commit is not None:
                self._before_commit()
            rows = snap.rows(self._writer)
            try:
                tbl = _open(self._db, SCOPES_TABLE)
                if tbl is None:
                    try:
                        self._db.create_table(SCOPES_TABLE, rows, mode="create")
                    except ValueError:
                        self._db.open_table(SCOPES_TABLE).add(rows, mode="overwrite")
                else:
                    tbl.add(rows, mode="overwrite")
            except SinkError:
                raise
            except Exception as e:
                raise SinkError(f"lancedb: publishing the scope state to {self.where} failed: {e}. Readers keep "
                                "the previous state; the writer publishes again after its next pass") from e
            self._published = digest
            self.publishes += 1
            for listener in self.listeners:
                listener()
            log.info("scopes.published", where=self.where, personas=len(snap.personas), projects=len(snap.projects))
            return True

    def read_back(self) -> ScopeSnapshot | None:
        try:
            tbl = _open(self._db, SCOPES_TABLE)
            return None if tbl is None else ScopeSnapshot.from_rows(tbl.to_arrow().to_pylist(), self.where)
        except Exception:
            return None

    @contextmanager
    def change(self, state: StateDB) -> Iterator[None]:
        """A scope change (visibility, project membership) made in the ``with`` body inside a
        state-DB transaction, published before that transaction commits: when publishing
        fails the change is rolled back and the error raised, so readers never lag behind a
        narrowing change the writer applied."""
        with self._lock:
            with state.atomic():
                yield
                self.publish(state)

    def maintain(self) -> None:
        """Drop old versions of the small tables (each publish is one version)."""
        from datetime import timedelta

        tbl = _open(self._db, SCOPES_TABLE)
        if tbl is not None:
            tbl.optimize(cleanup_older_than=timedelta(minutes=10))

    def close(self) -> None:
        if self._on_close is not None:
            on_close, self._on_close = self._on_close, None
            on_close()


class PublishedScopes:
    """A reader's view of the published scope state, re-read at most every ``refresh_s``.

    This snapshot is the reader's only cache of the scope state: each re-read asks the store
    for the latest ``_scopes`` version, so a query never sees a state older than ``refresh_s``."""

    def __init__(self, db, where: str, *, refresh_s: float) -> None:
        self._db = db
        self.where = where
        self.refresh_s = refresh_s
        self._snap: ScopeSnapshot | None = None
        self._read_at: float | None = None
        self._tbl = None
        self._lock = threading.Lock()

    def snapshot(self) -> ScopeSnapshot:
        with self._lock:
            now = time.monotonic()
            if self._snap is None or self._read_at is None or now - self._read_at >= self.refresh_s:
                self._snap = self._read()
                self._read_at = now
            return self._snap

    def _read(self) -> ScopeSnapshot:
        try:
            if self._tbl is None:
                self._tbl = _open(self._db, SCOPES_TABLE)  # a fresh handle: the latest version
            elif self.refresh_s > 0:
                # The reader's connection re-checks versions every ``refresh`` on its own, and near
                # the end of that interval hands out the old version while refreshing in the
                # background: stacked on this snapshot's own ``refresh`` that made a reader up to
                # ~2x ``refresh`` wider than the writer (issue 32). This read is already due, so
                # ask for the latest version now: one version check per ``refresh``, one cache.
                # (At 0 the connection checks at every read by itself.)
                self._tbl.checkout_latest()
            if self._tbl is None:
                raise ScopeStateUnavailable(
                    f"no scope state is published at {self.where}: the writer publishes it at the end of its first "
                    "sync (run `ledger-indexer sync` or start the daemon on the writer machine); searches are "
                    "refused until then")
            rows = self._tbl.to_arrow().to_pylist()
        except ScopeStateUnavailable:
            raise
        except Exception as e:
            self._tbl = None
            raise ScopeStateUnavailable(f"lancedb: cannot read the published scope state at {self.where}: {e}; "
                                        "searches are refused until it can be read") from e
        return ScopeSnapshot.from_rows(rows, self.where)

    def scope_facts(self, persona: str, session: str | None) -> ScopeFacts:
        return self.snapshot().facts(persona, session)

    def knows(self, persona: str) -> bool:
        return persona in self.snapshot().personas

    def invalidate(self) -> None:
        """Read the state again at the next query (the writer's own process, after it published)."""
        with self._lock:
            self._read_at = None
            if self._tbl is not None:
                try:
                    self._tbl.checkout_latest()
                except Exception:
                    self._tbl = None
