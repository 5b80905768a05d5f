"""A reader's cache of an object-store index: its local copies, kept current in the background.

:class:`ReaderCache` owns the :class:`~exporters.lancedb.mirror.TableMirror` of one retriever
and a thread that, once per ``[index] refresh_seconds``, brings the copy of every live table
up to the store's latest version (one LIST per table when nothing changed; a new version's
files otherwise). Queries never wait for it: they read the local copy of the version it last
completed, or the store while a table's first copy is being made.

Start-up: a reader started cold prefetches every live table (progress in the log,
``reader_cache.prefetch``), checks the files it already had (size and CRC-32: a corrupt one is
fetched again), then loads the rank columns into memory: :attr:`ReaderCache.state` goes
``cold`` -> ``prefetching`` -> ``warm`` (``/healthz`` reports it as ``cache``).
"""

from __future__ import annotations

import enum
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import structlog

from exporters.lancedb.location import IndexLocation
from exporters.lancedb.mirror import MirrorUnsupported, ObjectFiles, TableMirror

log = structlog.get_logger("exporters.lancedb.reader_cache")

#: A progress line at most this often during a prefetch.
PROGRESS_EVERY_S = 5.0


class CacheState(str, enum.Enum):
    OFF = "off"
    COLD = "cold"
    PREFETCHING = "prefetching"
    WARM = "warm"


# Caches open in this process (a weak set: a cache no one holds goes when its thread ends).
_OPEN: weakref.WeakSet[ReaderCache] = weakref.WeakSet()


class ReaderCache:
    """Local copies of the live tables of ``location`` (object storage), kept current by a
    background thread; ``live()`` names the live tables (``first_live()`` at the start-up
    prefetch), ``warmed(name, table)`` is called with a copy's local table after the prefetch
    (the rank columns' load)."""

    def __init__(self, location: IndexLocation, session: Any, *, live: Callable[[], set[str]],
                 first_live: Callable[[], set[str]] | None = None, warmed: Callable[[str, Any], None] | None = None,
                 files: ObjectFiles | None = None) -> None:
        from exporters.lancedb.store import _connect

        root = location.cache_dir / _slug(location.uri)
        self.mirror = TableMirror(root, location.cache_disk_bytes, files or ObjectFiles(location.uri,
                                                                                     location.storage_options))
        self.refresh_s = max(location.refresh.total_seconds(), 0.2)
        self._db = _connect(IndexLocation(str(root)), reader=True, session=session)
        self._tables: dict[str, Any] = {}
        #: tables queried without a copy, and when (the refresher copies them if they fit)
        self._wanted: dict[str, float] = {}
        self._live = live
        self._first_live = first_live or live
        self._warmed = warmed
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.state = CacheState.COLD
        self.started = time.monotonic()
        self.warm_seconds: float | None = None
        self.progress = {"files": 0, "files_done": 0, "bytes": 0, "bytes_done": 0}
        self.syncs = 0
        self.last_error: str | None = None
        self._thread = threading.Thread(target=self._run, name="reader-cache", daemon=True)
        self._thread.start()
        _OPEN.add(self)

    @classmethod
    def maybe(cls, location: IndexLocation, session: Any, **kwargs) -> ReaderCache | None:
        """The cache of ``location``, or None (a local folder, a budget of 0, a store without a lister)."""
        if location.is_local or location.cache_dir is None or location.cache_disk_bytes <= 0:
            return None
        try:
            return cls(location, session, **kwargs)
        except MirrorUnsupported as exc:
            log.warning("reader_cache.off", reason=str(exc), action="every query reads the store")
            return None
        except Exception as exc:  # the cache folder or the lister cannot be set up: search still works
            log.warning("reader_cache.off", reason=f"{type(exc).__name__}: {str(exc)[:300]}",
                        action="every query reads the store; check [index] cache_dir and storage_options")
            return None

    # -- queries' side --

    def table(self, name: str):
        """The local table ``name`` when its copy is complete, else None (read the store; the
        refresher makes a copy if the budget allows)."""
        if not self.mirror.ready(name):
            self._wanted[name] = time.monotonic()
            return None
        self.mirror.touch(name)
        with self._lock:
            tbl = self._tables.get(name)
            if tbl is None:
                tbl = self._tables[name] = self._db.open_table(name)
            return tbl

    def status(self) -> dict[str, Any]:
        """For /healthz and status: state, prefetch progress, bytes held, the time to warm."""
        return {"state": self.state.value, **self.progress, "disk_bytes": self.mirror.nbytes,
                "budget_bytes": self.mirror.budget_bytes, "warm_seconds": self.warm_seconds,
                "last_error": self.last_error}

    @property
    def ready(self) -> bool:
        return self.state is CacheState.WARM

    def wait_warm(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.state is not CacheState.WARM and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.state is CacheState.WARM

    @staticmethod
    def close_all() -> int:
        """Close every cache of this process still open (its refresher thread stops); how many.
        A reader that is dropped without ``close`` keeps refreshing until then."""
        caches = list(_OPEN)
        for cache in caches:
            cache.close()
        return len(caches)

    def close(self) -> None:
        _OPEN.discard(self)
        self._stop.set()
        self._thread.join(timeout=30)
        self.mirror.close()
        with self._lock:
            self._tables.clear()

    # -- the refresher --

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._prefetch()
                break
            except Exception as exc:  # the store unreachable at start: queries read it (or fail) meanwhile
                self._failed(exc)
                if self._stop.wait(self.refresh_s):
                    return
        while not self._stop.wait(self.refresh_s):
            try:
                self.sync_now()
            except Exception as exc:
                self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        msg = f"{type(exc).__name__}: {str(exc)[:300]}"
        if msg != self.last_error:
            log.warning("reader_cache.sync_failed", error=msg, action="retried at the next refresh")
        self.last_error = msg

    def _prefetch(self) -> None:
        self.state = CacheState.PREFETCHING
        names = sorted(self._first_live())
        log.info("reader_cache.prefetch", tables=len(names), state="started", budget_mb=self.mirror.budget_bytes >> 20)
        last = [0.0]

        def progress(files_done: int, files: int, done: int, total: int) -> None:
            self.progress.update(files=files, files_done=files_done, bytes=total, bytes_done=done)
            now = time.monotonic()
            if now - last[0] >= PROGRESS_EVERY_S or files_done == files:
                last[0] = now
                log.info("reader_cache.prefetch", files=f"{files_done}/{files}",
                         mb=f"{done / 1e6:,.0f}/{total / 1e6:,.0f}", seconds=round(now - self.started, 1))

        for name in names:
            self.mirror.verify(name)  # files kept from an earlier run: a damaged one is fetched again
            self.mirror.sync(name, progress=progress, keep=frozenset(names))
        for name in names:
            table = self.table(name)
            if table is not None and self._warmed is not None:
                self._warmed(name, table)
        self.warm_seconds = time.monotonic() - self.started
        self.state = CacheState.WARM
        self.last_error = None
        log.info("reader_cache.prefetch", state="warm", tables=len(names), seconds=round(self.warm_seconds, 1),
                 disk_mb=round(self.mirror.nbytes / 1e6, 1))

    def sync_now(self) -> None:
        """Bring every copy of a live table up to the store's latest version, and copy a live
        table queried without one (the refresher's pass)."""
        live = frozenset(self._live())
        recent = time.monotonic() - self.mirror.idle_s
        for name in sorted(live):
            if self.mirror.has(name) or self._wanted.get(name, -1e18) >= recent:
                self.mirror.sync(name, keep=live)
        self.syncs += 1
        self.last_error = None


def _slug(uri: str) -> str:
    """A folder name of its own per index URI (one cache folder may serve several)."""
    import hashlib

    tail = "".join(c if c.isalnum() else "-" for c in uri.split("://", 1)[-1])[-40:].strip("-")
    return f"{tail}-{hashlib.sha256(uri.encode()).hexdigest()[:8]}"


__all__ = ["CacheState", "ReaderCache"]
