"""One writer per index on object storage: an epoch-numbered lease in the store itself.

The local ``writer.lock`` (an flock) keeps two writers on one machine apart;
it cannot see another machine. On object storage the writer also holds a
lease, kept as small Lance tables beside the persona tables::

    _lease_e0000000001, _lease_e0000000002, ...   one per holder, newest wins

- **acquire**: read the newest epoch's row (holder, heartbeat time, released).
  Held and fresh: refuse (:class:`LeaseHeld`, naming the holder). Released,
  stale (no heartbeat for ``ttl``), or left by a killed writer of this same
  machine and index folder (the caller holds the local flock, so that process
  is gone): create epoch N+1 with ``mode="create"``. Lance writes a table's
  first manifest with a conditional PUT (``If-None-Match``), so of two machines
  racing for N+1 exactly one wins; the other is refused.
- **heartbeat**: a thread rewrites the row every ``ttl/4`` (one small commit)
  and looks for a newer epoch.
- **fencing**: :meth:`WriterLease.check` runs before every commit of the
  writer. It fails (:class:`LeaseLost`) when a newer epoch exists, or when
  this writer's last successful heartbeat is older than ``ttl/2`` — a writer
  cut off from the store stops writing well before anyone may take over
  (``ttl`` after its last heartbeat, by the newcomer's clock).
- **release**: a clean exit marks the row released, so the next writer starts
  at once; after a crash the next writer waits for ``ttl`` (or, on the same
  machine and folder, takes over at once).

Lance commits are atomic and conflict-checked per table, so even a fenced
writer's in-flight commit cannot corrupt a table; the lease keeps the state
DB, the table pointer and the published scope state single-authored.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import structlog

from exporters.base import SinkError

log = structlog.get_logger("exporters.lancedb.lease")

LEASE_PREFIX = "_lease_e"
#: old epoch tables kept for diagnostics (the newest is always kept)
KEEP_EPOCHS = 2
#: after creating an epoch, wait this long and read its first version again (see ``acquire``)
CONFIRM_SETTLE_S = 1.0
#: how long a listed but unreadable newest epoch is re-read before giving up
UNREADABLE_WAIT_S = 3.0
#: lease-table versions kept: each heartbeat is one small commit, cleaned up as we go
CLEANUP_EVERY_BEATS = 40


class LeaseHeld(SinkError):
    """Another writer holds the index on object storage."""


class LeaseLost(SinkError):
    """This writer no longer holds the lease: it must stop writing."""


def lease_table(epoch: int) -> str:
    return f"{LEASE_PREFIX}{epoch:010d}"


def _epoch_of(name: str) -> int | None:
    rest = name[len(LEASE_PREFIX):] if name.startswith(LEASE_PREFIX) else ""
    return int(rest) if rest.isdigit() else None


def _now_ms() -> int:
    return int(time.time() * 1000)


def _rows(holder: dict[str, Any], epoch: int, *, released: bool = False) -> pa.Table:
    return pa.table({
        "epoch": pa.array([epoch], pa.int64()),
        "holder": pa.array([json.dumps(holder, sort_keys=True)], pa.string()),
        "heartbeat_ms": pa.array([_now_ms()], pa.int64()),
        "released": pa.array([released], pa.bool_()),
    })


def _table_names(db) -> list[str]:
    out: list[str] = []
    page = None
    while True:
        resp = db.list_tables(page_token=page)
        out.extend(resp.tables)
        page = resp.page_token
        if not page:
            return out


def epochs(db) -> list[int]:
    return sorted(e for e in (_epoch_of(n) for n in _table_names(db)) if e is not None)


def read_lease(db, epoch: int) -> dict[str, Any] | None:
    """The row of ``epoch`` (holder as a dict), or None when it cannot be read."""
    try:
        rows = db.open_table(lease_table(epoch)).to_arrow().to_pylist()
    except Exception:
        return None
    if not rows:
        return None
    row = rows[0]
    try:
        row["holder"] = json.loads(row["holder"])
    except (TypeError, ValueError):
        row["holder"] = {}
    return row


def _first_holder(tbl) -> dict[str, Any]:
    """The holder written by the version that created the epoch table."""
    try:
        tbl.checkout(1)
        rows = tbl.to_arrow().to_pylist()
        tbl.checkout_latest()
        return json.loads(rows[0]["holder"]) if rows else {}
    except Exception:
        return {}


def current_holder(db) -> dict[str, Any] | None:
    """The newest lease row (``epoch``, ``holder``, ``heartbeat_ms``, ``released``), or None."""
    found = epochs(db)
    return read_lease(db, found[-1]) if found else None


def describe_holder(row: dict[str, Any] | None) -> str:
    if not row:
        return "an unknown writer"
    h = row.get("holder") or {}
    age = max(0.0, (_now_ms() - int(row.get("heartbeat_ms") or 0)) / 1000)
    who = f"pid {h.get('pid')} ({h.get('role') or 'writer'}) on {h.get('hostname') or '?'}"
    if h.get("index_dir"):
        who += f", index dir {h['index_dir']}"
    return f"{who}, epoch {row.get('epoch')}, last heartbeat {age:.0f}s ago"


class WriterLease:
    """The lease this process holds; see the module docstring."""

    def __init__(self, db, epoch: int, holder: dict[str, Any], ttl: timedelta, where: str) -> None:
        self._db = db
        self.epoch = epoch
        self.holder = holder
        self.ttl_s = ttl.total_seconds()
        self.where = where
        self._table = db.open_table(lease_table(epoch))
        self._last_ok = time.monotonic()
        self._last_epoch_check = time.monotonic()
        self._lost: str | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._beats = 0
        self._thread = threading.Thread(target=self._beat_loop, name="lease-heartbeat", daemon=True)
        self._thread.start()

    # -- acquiring ---------------------------------------------------------------------------

    @classmethod
    def acquire(cls, db, *, where: str, ttl: timedelta, role: str, writer_dir: Path | str | None = None,
                holds_local_lock: bool = False, reconnect=None, settle_s: float = CONFIRM_SETTLE_S) -> WriterLease:
        """Take the lease of the index at ``where`` or raise :class:`LeaseHeld`.

        ``writer_dir``/``holds_local_lock``: the caller holds the local writer lock of
        that index folder, so a lease left by this machine and folder belongs to a dead
        process and is taken over at once."""
        me = {"hostname": socket.gethostname(), "pid": os.getpid(), "role": role, "token": uuid.uuid4().hex,
              "index_dir": str(writer_dir) if writer_dir is not None else None,
              "argv": sys.argv[:4], "since_ms": _now_ms()}
        ttl_ms = ttl.total_seconds() * 1000
        try:
            found = epochs(db)
        except Exception as e:
            raise SinkError(f"lancedb: cannot list {where} to take the writer lease: {e}. Check index.uri and "
                            "[index.storage_options] (credentials, endpoint, region)") from e
        top = found[-1] if found else 0
        if top:
            row = read_lease(db, top)
            deadline = time.monotonic() + UNREADABLE_WAIT_S
            while row is None and time.monotonic() < deadline:  # listed but not committed: being created now
                time.sleep(0.1)
                row = read_lease(db, top)
            if row is None:
                raise LeaseHeld(f"the writer lease {lease_table(top)} in {where} is being taken by another writer "
                                "right now (or its creation was interrupted); retry. If this persists with no other "
                                f"writer running, drop the table {lease_table(top)}")
            if not row.get("released"):
                h = row.get("holder") or {}
                mine_dead = (holds_local_lock and writer_dir is not None and h.get("hostname") == me["hostname"]
                             and h.get("index_dir") == str(writer_dir))
                fresh = _now_ms() - int(row.get("heartbeat_ms") or 0) < ttl_ms
                if fresh and not mine_dead:
                    raise LeaseHeld(cls._held_message(where, row, ttl))
                if mine_dead:
                    log.warning("lease.takeover_own_crashed", where=where, epoch=top, holder=h)
                else:
                    log.warning("lease.takeover_stale", where=where, epoch=top, holder=h)
        epoch = top + 1
        try:
            created = db.create_table(lease_table(epoch), _rows(me, epoch), mode="create")
        except Exception as e:  # another writer created this epoch first (seen by Lance's existence check)
            row = read_lease(db, epoch)
            if row is None:
                raise SinkError(f"lancedb: cannot create the writer lease in {where}: {e}") from e
            raise LeaseHeld(cls._held_message(where, row, ttl)) from None
        # Two creates racing past the existence check: Lance's conditional PUT lets one write
        # version 1 and commits the other *as version 2* (measured on S3, moto). The epoch
        # belongs to whoever wrote version 1. A store that does not enforce If-None-Match
        # atomically (moto's threaded server checks, then writes) lets both write version 1,
        # the last one staying: so version 1 is read again through a fresh connection once
        # both PUTs have landed.
        first = _first_holder(created) if created.version != 1 else me
        if first.get("token") == me["token"] and settle_s > 0:
            time.sleep(settle_s)
            try:
                fresh = reconnect() if reconnect is not None else db
                first = _first_holder(fresh.open_table(lease_table(epoch)))
            except Exception as e:
                raise SinkError(f"lancedb: cannot confirm the writer lease in {where}: {e}") from e
        if first.get("token") != me["token"]:
            log.warning("lease.race_lost", where=where, epoch=epoch, winner=first)
            row = read_lease(db, epoch) or {}
            raise LeaseHeld(cls._held_message(where, {**row, "holder": first}, ttl))
        lease = cls(db, epoch, me, ttl, where)
        lease._drop_old(found)
        log.info("lease.acquired", where=where, epoch=epoch)
        return lease

    @staticmethod
    def _held_message(where: str, row: dict[str, Any], ttl: timedelta) -> str:
        return (f"the index at {where} is written by {describe_holder(row)}; only one writer may use an index "
                f"(the others are readers: `ledger-indexer serve`). If that writer is gone for good, this one "
                f"takes over {ttl.total_seconds():.0f}s after its last heartbeat (index.lease_seconds)")

    def _drop_old(self, found: list[int]) -> None:
        for e in found[:-KEEP_EPOCHS] if len(found) > KEEP_EPOCHS else []:
            try:
                self._db.drop_table(lease_table(e))
            except Exception:
                pass

    # -- holding -----------------------------------------------------------------------------

    def _beat_loop(self) -> None:
        interval = max(0.2, self.ttl_s / 4)
        while not self._stop.wait(interval):
            self.beat()

    def beat(self) -> None:
        """One heartbeat: rewrite the row, look for a newer epoch."""
        with self._lock:
            if self._lost or self._stop.is_set():
                return
            try:
                self._check_newer()
                if self._lost:
                    return
                self._table.add(_rows(self.holder, self.epoch), mode="overwrite")
                self._last_ok = time.monotonic()
                self._beats += 1
                if self._beats % CLEANUP_EVERY_BEATS == 0:
                    self._table.optimize(cleanup_older_than=timedelta(seconds=self.ttl_s))
            except Exception as e:
                log.warning("lease.heartbeat_failed", where=self.where, epoch=self.epoch, error=str(e)[:300])

    def _check_newer(self) -> None:
        newest = max(epochs(self._db) or [0])
        self._last_epoch_check = time.monotonic()
        if newest > self.epoch:
            row = read_lease(self._db, newest)
            self._lost = (f"another writer took the index over: {describe_holder(row)} (this writer held epoch "
                          f"{self.epoch}); this process stops writing")
            log.error("lease.lost", where=self.where, epoch=self.epoch, newest=newest)

    def check(self) -> None:
        """Raise :class:`LeaseLost` unless this writer still holds the lease (before every commit)."""
        if self._lost:
            raise LeaseLost(f"lancedb: {self._lost}")
        if self._stop.is_set():
            raise LeaseLost(f"lancedb: the writer lease of {self.where} was released")
        silent = time.monotonic() - self._last_ok
        if silent > self.ttl_s / 2:
            raise LeaseLost(f"lancedb: no heartbeat reached {self.where} for {silent:.0f}s (lease "
                            f"{self.ttl_s:.0f}s); writing stops until the store answers again")
        if time.monotonic() - self._last_epoch_check >= 1.0:
            with self._lock:
                try:
                    self._check_newer()
                except Exception as e:
                    raise LeaseLost(f"lancedb: cannot check the writer lease of {self.where}: {e}") from e
            if self._lost:
                raise LeaseLost(f"lancedb: {self._lost}")

    @property
    def held(self) -> bool:
        try:
            self.check()
            return True
        except LeaseLost:
            return False

    def release(self) -> None:
        """Mark the lease released (idempotent) so the next writer starts at once."""
        if self._stop.is_set():
            return
        self._stop.set()
        with self._lock:
            if self._lost:
                return
            try:
                self._table.add(_rows(self.holder, self.epoch, released=True), mode="overwrite")
                log.info("lease.released", where=self.where, epoch=self.epoch)
            except Exception as e:
                log.warning("lease.release_failed", where=self.where, epoch=self.epoch, error=str(e)[:300])
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
