"""The embedding cache's SQLite file: opened, and moved aside only when it is damaged.

The cache is disposable (every vector can be embedded again), so a damaged
file is moved aside to ``<name>.corrupt-<unix seconds>`` and a new one is
started. Damaged means ``SQLITE_CORRUPT`` / ``SQLITE_NOTADB``, or, for an
error that names no cause, a failed ``PRAGMA quick_check``. A full disk, a
read-only or unwritable folder or an I/O error is not damage: the file stays
where it is (moving a healthy cache aside cost a full re-embed, and the
moved files stayed for good) and the caller gets :class:`CacheUnavailable`
naming the cause and what to do.

Only the newest moved-aside file (with its ``-wal``/``-shm``) is kept: enough
to look into what damaged it. Older ones are of no use (the cache is rebuilt
from the model) and each can be as big as the cache, so every open sweeps
them, which also clears those an older version moved aside on a full disk.
"""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from pathlib import Path
from urllib.parse import quote

import structlog

from indexer.embedding.embedder import EmbeddingError
from indexer.runtime.storage_errors import StorageCause, StorageFault, classify

log = structlog.get_logger("indexer.embedding")

ASIDE_MARK = ".corrupt-"
#: Moved-aside cache files kept (the newest first).
KEEP_ASIDE = 1
#: How long an open waits for another connection's lock (then: unavailable, never "damaged").
BUSY_TIMEOUT_S = 10.0
_SIDE_FILES = ("", "-wal", "-shm")


class CacheUnavailable(EmbeddingError):
    """The cache file cannot be used now and was left in place. ``fault``: the storage cause
    (disk full, read-only, permission, I/O), None when the error names none (e.g. a lock held
    by another process)."""

    def __init__(self, path: Path, fault: StorageFault | None, error: str):
        self.path, self.fault, self.error = path, fault, error
        why = fault.message if fault is not None else f"{error} (not damage: the file is left as is)"
        super().__init__(f"the embedding cache {path} cannot be opened: {why}")


def connect(path: Path) -> sqlite3.Connection:
    """Open or create the cache (WAL, the vectors table); closes what it opened when that fails."""
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=BUSY_TIMEOUT_S)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS vectors ("
            " fingerprint TEXT NOT NULL, text_sha BLOB NOT NULL, dim INTEGER NOT NULL,"
            " vec BLOB NOT NULL, created_ms INTEGER NOT NULL,"
            " PRIMARY KEY (fingerprint, text_sha)) WITHOUT ROWID"
        )
        conn.execute("SELECT count(*) FROM vectors WHERE fingerprint = '' ").fetchone()
        return conn
    except BaseException:
        conn.close()  # an open handle would keep the failed file (and its file system) busy
        raise


def open_cache(path: Path) -> sqlite3.Connection:
    """The cache's connection. A damaged file is moved aside and a new one created; anything
    else raises :class:`CacheUnavailable` with the file left in place."""
    sweep_aside(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return connect(path)
    except (sqlite3.Error, OSError) as exc:
        fault = diagnose(path, exc)
        if fault is None or fault.cause is not StorageCause.CORRUPT:
            raise CacheUnavailable(path, fault, f"{type(exc).__name__}: {exc}") from exc
    try:
        move_aside(path, fault)  # damaged: the cache is disposable
        return connect(path)
    except (sqlite3.Error, OSError) as exc:
        raise CacheUnavailable(path, classify(exc, [path.parent]), f"{type(exc).__name__}: {exc}") from exc


def diagnose(path: Path, exc: BaseException) -> StorageFault | None:
    """The storage cause of an open failure; for an error naming none, damage only when the
    file fails ``quick_check`` (SQLite's integrity check without the index cross-checks)."""
    fault = classify(exc, [path.parent])
    if fault is not None or not isinstance(exc, sqlite3.Error) or intact(path):
        return fault
    return StorageFault(StorageCause.CORRUPT, path.parent, f"{type(exc).__name__}: {exc}; quick_check failed")


def intact(path: Path) -> bool:
    """False only when SQLite says the file is damaged; a check that cannot run (locked,
    no room for a WAL index) proves nothing, and the cache is not thrown away on a guess."""
    try:
        with closing(sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, timeout=1.0)) as conn:
            return conn.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    except sqlite3.Error as exc:
        fault = classify(exc)
        return fault is None or fault.cause is not StorageCause.CORRUPT


def move_aside(path: Path, fault: StorageFault) -> Path:
    """Move the damaged cache (and its -wal/-shm) to ``<name>.corrupt-<unix seconds>``; older
    moved-aside files are removed (:data:`KEEP_ASIDE`)."""
    aside = path.with_name(f"{path.name}{ASIDE_MARK}{int(time.time())}")
    for suffix in _SIDE_FILES:
        p = Path(str(path) + suffix)
        if p.exists():
            p.replace(Path(str(aside) + suffix))
    removed = sweep_aside(path)
    log.warning("embedding_cache.moved_aside", path=str(path), moved_to=str(aside), error=fault.error,
                older_removed=removed, consequence="every text is embedded again as it comes")
    return aside


def sweep_aside(path: Path, keep: int = KEEP_ASIDE) -> int:
    """Remove moved-aside copies of the cache but the newest ``keep``; the files removed."""
    prefix = path.name + ASIDE_MARK
    stamps: dict[int, list[Path]] = {}
    try:
        entries = list(path.parent.iterdir()) if path.parent.is_dir() else []
    except OSError:
        return 0
    for p in entries:
        if not p.name.startswith(prefix):
            continue
        stamp = p.name[len(prefix):].removesuffix("-wal").removesuffix("-shm")
        if stamp.isdigit():
            stamps.setdefault(int(stamp), []).append(p)
    removed = 0
    for stamp in sorted(stamps, reverse=True)[keep:]:
        for p in stamps[stamp]:
            try:
                p.unlink()
                removed += 1
            except OSError as exc:  # best effort: the next open tries again
                log.warning("embedding_cache.sweep_failed", path=str(p), error=str(exc))
    return removed
