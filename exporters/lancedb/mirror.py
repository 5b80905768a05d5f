"""A reader's local copy of the live tables on object storage, so a warm query reads no object.

Measured before (bench/RESULTS.md, "Object storage"): a reader's persona-scope query made
550 object requests at 100k chunks and 970 at 1M — the vectors of the candidates it
re-scores, its full-text hits' vectors, the rank and result columns, pages of index files
— ~2-3 s on the S3-compatible test server against 71-87 ms on a local disk. LanceDB's own
caches do not remove them: its ``Session`` keeps opened indexes and file metadata in memory
(used here: ``[index] cache_memory_mb``), but has no cache for the data files' pages, and
lancedb 0.40's Python API exposes no object-store wrapper (Lance's ``ObjectStoreRegistry``
is Rust-only). What makes a simple layer correct is that every file of a Lance table is
immutable once written (data files, deletion files, index files, transaction files and each
version's manifest have new names; the only mutable file, ``_versions/latest_version_hint.json``,
is a hint Lance does without): a file is fetched once and kept, keyed by its path, with
no expiry.

:class:`TableMirror` keeps, per live table, its files under ``<cache_dir>/<table>.lance``:
:meth:`~TableMirror.sync` lists the table's manifests (one small LIST: a commit adds one), and
when they changed the table's objects (one LIST request per 1,000 objects), fetches those it lacks (new fragments, a new version's index files and manifest; the
manifests last, so a local open never sees a version whose files are missing), drops those
the writer removed (after a grace period: a query may still read the version it opened).
The retriever opens the local copy as a local table (``read_consistency_interval=0``: the
next query sees a version as soon as its manifest lands) and reads the store only until a
table's first copy is complete. Its syncs run on the retriever's refresher thread, once per
``[index] refresh_seconds``, never on a query's thread.

Every cached file has its size and CRC-32 recorded when fetched: a file whose size differs
from the store's is fetched again at the next sync, and :meth:`~TableMirror.verify` (run
before a start-up's first use of a copy) fetches again any whose bytes no longer match.
Disk is bounded by ``[index] cache_disk_mb``: the least recently used tables are dropped
first, and a table that does not fit alone is read from the store, as without the cache.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from exporters.lancedb.object_fs import MirrorUnsupported, fs_spec, open_fs

log = structlog.get_logger("exporters.lancedb.mirror")

#: Files that change in place (a hint Lance reads if present and does without): never copied.
MUTABLE = frozenset({"_versions/latest_version_hint.json", "_latest.manifest"})
#: A file the store no longer lists is kept this long before it is removed here: a query that
#: opened the version before the writer's clean-up may still read it.
VANISHED_GRACE_S = 120.0
#: A copy used this recently is not dropped to make room for another table in use.
IDLE_S = 60.0
FETCH_THREADS = 4
CHUNK = 8 << 20
INDEX_SUFFIX = ".files.json"


@dataclass(slots=True)
class SyncResult:
    table: str
    fetched: int = 0
    fetched_bytes: int = 0
    removed: int = 0
    bytes: int = 0
    #: False: the table does not fit the budget (read from the store)
    mirrored: bool = True
    seconds: float = 0.0


class ObjectFiles:
    """The files of a database URI on object storage: list a table's, fetch one (pyarrow's
    filesystem of the URI's scheme, with the index's storage options: ``object_fs.py``)."""

    def __init__(self, uri: str, options: dict[str, str]) -> None:
        import pyarrow.fs as pafs

        spec = fs_spec(uri, options)
        self.kind = spec.kind
        self.base = spec.base
        self._fs = open_fs(spec)
        self._selector = pafs.FileSelector
        self._file = pafs.FileType.File

    def list(self, table: str, under: str = "") -> dict[str, int]:
        """{path inside ``<table>.lance``: size} of every object of the table (or of its folder ``under``)."""
        root = f"{self.base}/{table}.lance"
        infos = self._fs.get_file_info(self._selector(f"{root}/{under}".rstrip("/"), recursive=True,
                                                      allow_not_found=True))
        return {i.path[len(root) + 1:]: i.size for i in infos if i.type == self._file}

    def fetch(self, table: str, rel: str, dest: Path) -> tuple[int, int]:
        """Copy one object to ``dest`` (via a temp file, renamed); (bytes, CRC-32)."""
        tmp = dest.with_name(f".{dest.name}.part")
        crc = size = 0
        with self._fs.open_input_stream(f"{self.base}/{table}.lance/{rel}") as src, open(tmp, "wb") as out:
            while chunk := src.read(CHUNK):
                crc = zlib.crc32(chunk, crc)
                size += len(chunk)
                out.write(chunk)
        os.replace(tmp, dest)
        return size, crc


def file_crc(path: Path) -> int:
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            crc = zlib.crc32(chunk, crc)
    return crc


@dataclass(slots=True)
class _Copy:
    """One table's copy: its files' (size, CRC-32), last use, files gone from the store (since when)."""

    files: dict[str, tuple[int, int]] = field(default_factory=dict)
    used: float = 0.0
    vanished: dict[str, float] = field(default_factory=dict)
    complete: bool = False

    @property
    def nbytes(self) -> int:
        return sum(size for size, _ in self.files.values())


class TableMirror:
    """Local copies of tables of one object-store database, within ``budget_bytes`` of disk."""

    def __init__(self, root: Path, budget_bytes: int, files: ObjectFiles) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.budget_bytes = int(budget_bytes)
        self._files = files
        self._lock = threading.RLock()
        self._copies: dict[str, _Copy] = {}
        self._too_big: set[str] = set()
        self._pool = ThreadPoolExecutor(max_workers=FETCH_THREADS, thread_name_prefix="mirror-fetch")
        for index in self.root.glob(f"*{INDEX_SUFFIX}"):
            self._load(index.name[: -len(INDEX_SUFFIX)])
        #: files fetched again because the copy's bytes did not match; copies dropped for room
        self.refetched = 0
        self.evictions = 0
        #: a copy used within this many seconds is not dropped for another table in use
        self.idle_s = IDLE_S

    # -- bookkeeping --

    def table_dir(self, table: str) -> Path:
        return self.root / f"{table}.lance"

    def _index_path(self, table: str) -> Path:
        return self.root / f"{table}{INDEX_SUFFIX}"

    def _load(self, table: str) -> None:
        try:
            raw = json.loads(self._index_path(table).read_text())
            copy = _Copy({k: (int(v[0]), int(v[1])) for k, v in raw["files"].items()}, float(raw.get("used", 0)),
                         {k: float(v) for k, v in raw.get("vanished", {}).items()}, bool(raw.get("complete")))
        except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
            log.warning("reader_cache.index_unreadable", table=table, error=str(exc)[:200], action="fetched again")
            self._forget(table)
            return
        self._copies[table] = copy

    def _save(self, table: str, copy: _Copy) -> None:
        path = self._index_path(table)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"files": {k: list(v) for k, v in copy.files.items()}, "used": copy.used,
                                   "vanished": copy.vanished, "complete": copy.complete}))
        os.replace(tmp, path)

    def _forget(self, table: str) -> None:
        self._copies.pop(table, None)
        shutil.rmtree(self.table_dir(table), ignore_errors=True)
        self._index_path(table).unlink(missing_ok=True)

    @property
    def nbytes(self) -> int:
        """Bytes of every copy (what the budget bounds)."""
        with self._lock:
            return sum(c.nbytes for c in self._copies.values())

    def disk_bytes(self) -> int:
        """Bytes under the cache folder, as the disk holds them (a test compares it to the budget)."""
        return sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file())

    def ready(self, table: str) -> bool:
        """A complete copy of ``table`` is here (queries may read it)."""
        with self._lock:
            copy = self._copies.get(table)
            return copy is not None and copy.complete

    def has(self, table: str) -> bool:
        """Some copy of ``table`` is here (complete or being made)."""
        with self._lock:
            return table in self._copies

    def touch(self, table: str) -> None:
        with self._lock:
            copy = self._copies.get(table)
            if copy is not None:
                copy.used = time.time()

    def too_big(self, table: str) -> bool:
        return table in self._too_big

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    # -- sync --

    def sync(self, table: str, *, progress: Callable[[int, int, int, int], None] | None = None,
             keep: frozenset[str] = frozenset()) -> SyncResult:
        """Bring the copy of ``table`` up to the store's objects: fetch what it lacks, drop what
        the store removed (after :data:`VANISHED_GRACE_S`). ``progress(files_done, files,
        bytes_done, bytes)`` is called as files arrive. Room is made by dropping the least
        recently used copies, but never one of ``keep`` used in the last :attr:`idle_s` (two
        tables in use that do not both fit: the one without a copy is read from the store,
        rather than the copies taking turns). Raises what the store raises."""
        started = time.perf_counter()
        result = SyncResult(table)
        if self._unchanged(table):
            result.bytes = self._copies[table].nbytes
            return result
        remote = {k: v for k, v in self._files.list(table).items() if k not in MUTABLE}
        if not remote:
            return result
        with self._lock:
            old = self._copies.get(table)
            need = sum(remote.values()) + (sum(old.files[r][0] for r in old.vanished if r in old.files) if old else 0)
            if need > self.budget_bytes:
                if table not in self._too_big:
                    log.warning("reader_cache.table_too_big", table=table, bytes=need, budget=self.budget_bytes,
                                action="read from the store; raise [index] cache_disk_mb to cache it")
                self._too_big.add(table)
                self._forget(table)
                result.mirrored = False
                return result
            self._too_big.discard(table)
            if not self._make_room(table, need, keep):
                result.mirrored = False
                return result
            copy = self._copies.setdefault(table, _Copy())
            if old is None:  # a refresh does not count as a use (LRU by queries)
                copy.used = time.time()
        base = self.table_dir(table)
        now = time.time()
        for rel in [r for r in copy.files if r not in remote]:
            since = copy.vanished.setdefault(rel, now)
            if now - since >= VANISHED_GRACE_S:
                (base / rel).unlink(missing_ok=True)
                del copy.files[rel], copy.vanished[rel]
                result.removed += 1
        for rel in [r for r in copy.vanished if r in remote]:
            del copy.vanished[rel]
        todo = [r for r, size in remote.items() if r not in copy.files or copy.files[r][0] != size
                or not _same_size(base / r, size)]
        # a version's manifest last: a local open never sees a version whose files are missing
        later = [r for r in todo if r.startswith("_versions/")]
        first = [r for r in todo if not r.startswith("_versions/")]
        total = sum(remote[r] for r in todo)
        done = [0, 0]

        def one(rel: str) -> None:
            dest = base / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                size, crc = self._files.fetch(table, rel, dest)
            except FileNotFoundError:  # removed by the writer's clean-up since the listing
                return
            with self._lock:
                copy.files[rel] = (size, crc)
                done[0] += 1
                done[1] += size
                result.fetched += 1
                result.fetched_bytes += size
            if progress is not None:
                progress(done[0], len(todo), done[1], total)

        try:
            for batch in (first, later):
                for f in [self._pool.submit(one, rel) for rel in batch]:
                    f.result()
        finally:
            with self._lock:
                copy.complete = copy.complete or all(r in copy.files for r in remote) or not todo
                self._save(table, copy)
        result.bytes = copy.nbytes
        result.seconds = time.perf_counter() - started
        if result.fetched or result.removed:
            log.info("reader_cache.synced", table=table, fetched=result.fetched, mb=round(result.fetched_bytes / 1e6, 1),
                     removed=result.removed, seconds=round(result.seconds, 2))
        return result

    def _unchanged(self, table: str) -> bool:
        """The complete copy is current: the store lists the same manifests (a commit adds one, a
        clean-up removes some: one small LIST of ``_versions/``, not of the whole table), nothing
        awaits removal, and every file here has its recorded size (a truncated one is fetched again)."""
        with self._lock:
            copy = self._copies.get(table)
            if copy is None or not copy.complete or copy.vanished:
                return False
            files = dict(copy.files)
        manifests = {k for k in self._files.list(table, "_versions") if k not in MUTABLE}
        base = self.table_dir(table)
        return (manifests == {k for k in files if k.startswith("_versions/")}
                and all(_same_size(base / rel, size) for rel, (size, _) in files.items()))

    def _make_room(self, table: str, need: int, keep: frozenset[str]) -> bool:
        """Drop the least recently used other copies until ``need`` bytes for ``table`` fit; False
        (nothing dropped) when they cannot without a copy of ``keep`` in use. Under the lock."""
        def others() -> int:
            return sum(c.nbytes for t, c in self._copies.items() if t != table)

        idle_since = time.time() - self.idle_s
        order = sorted((t for t in self._copies if t != table), key=lambda t: self._copies[t].used)
        droppable = [t for t in order if t not in keep or self._copies[t].used <= idle_since]
        if others() - sum(self._copies[t].nbytes for t in droppable) + need > self.budget_bytes:
            return False
        for other in droppable:
            if others() + need <= self.budget_bytes:
                break
            log.info("reader_cache.evicted", table=other, bytes=self._copies[other].nbytes)
            self._forget(other)
            self.evictions += 1
        return True

    def verify(self, table: str) -> int:
        """Check every cached file of ``table`` against the size and CRC-32 recorded when it was
        fetched; a file that does not match is fetched again. Returns the files fetched again."""
        with self._lock:
            copy = self._copies.get(table)
            if copy is None:
                return 0
            items = list(copy.files.items())
        base = self.table_dir(table)
        bad = [rel for rel, (size, crc) in items
               if not _same_size(base / rel, size) or file_crc(base / rel) != crc]
        for rel in bad:
            log.warning("reader_cache.corrupt_file", table=table, file=rel, action="fetched again")
            try:
                size, crc = self._files.fetch(table, rel, base / rel)
            except FileNotFoundError:
                (base / rel).unlink(missing_ok=True)
                with self._lock:
                    copy.files.pop(rel, None)
                continue
            with self._lock:
                copy.files[rel] = (size, crc)
                self.refetched += 1
        if bad:
            with self._lock:
                self._save(table, copy)
        return len(bad)


def _same_size(path: Path, size: int) -> bool:
    try:
        return path.stat().st_size == size
    except OSError:
        return False


__all__ = ["MirrorUnsupported", "ObjectFiles", "SyncResult", "TableMirror", "file_crc"]
