"""Why a write to local storage failed: disk full, read-only, permission, I/O error, or a damaged file.

SQLite and the OS name one condition many ways: ``SQLITE_FULL`` / ``ENOSPC``
("database or disk is full", LanceDB's "No space left on device (os error
28)"), a plain "disk I/O error" when a full tmpfs cannot grow a WAL index
(``-shm``), or only a transaction manager's "cannot rollback" with the real
error in its context. Each door (the embedding cache, the API, readiness)
asks :func:`classify` and gets one typed cause, the folder it concerns, and
what to do, instead of guessing from the symptom.

``places``: the folders the caller writes to. A cause is pinned to the one
that shows it (the fullest file system, the read-only one), and an
ambiguous error (``SQLITE_IOERR``, ``SQLITE_CANTOPEN``, ``EIO``) is read
through them: an I/O error on a file system with no room left is a full disk.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

__all__ = ["FULL_BELOW_BYTES", "StorageCause", "StorageFailure", "StorageFault", "classify", "sqlite_code"]


class StorageCause(StrEnum):
    DISK_FULL = "disk_full"
    READ_ONLY = "read_only"
    PERMISSION = "permission"
    IO_ERROR = "io_error"
    CORRUPT = "corrupt"


_LABEL = {
    StorageCause.DISK_FULL: "disk full",
    StorageCause.READ_ONLY: "read-only file system",
    StorageCause.PERMISSION: "permission denied",
    StorageCause.IO_ERROR: "I/O error",
    StorageCause.CORRUPT: "damaged database file",
}

_ADVICE = {
    StorageCause.DISK_FULL: "free space on that file system (or move the index to a bigger one); nothing written "
                            "is lost, and writes resume on their own once there is room",
    StorageCause.READ_ONLY: "the file system is mounted read-only: remount it read-write (dmesg says why it was "
                            "remounted) or move the index to a writable one",
    StorageCause.PERMISSION: "the daemon's user may not write there: fix the owner or mode (chown/chmod) or use "
                             "a folder that user owns",
    StorageCause.IO_ERROR: "the device reported an I/O error: check its health (dmesg, smartctl) before trusting "
                           "it; the write is retried",
    StorageCause.CORRUPT: "the file is damaged: move it aside (a disposable file is rebuilt) or restore it from "
                          "a backup",
}

# SQLite primary result codes (sqlite3.h); an extended code's low byte is its primary code.
SQLITE_PERM, SQLITE_READONLY, SQLITE_IOERR, SQLITE_CORRUPT = 3, 8, 10, 11
SQLITE_FULL, SQLITE_CANTOPEN, SQLITE_NOTADB = 13, 14, 26

_BY_SQLITE = {
    SQLITE_FULL: StorageCause.DISK_FULL,
    SQLITE_READONLY: StorageCause.READ_ONLY,
    SQLITE_PERM: StorageCause.PERMISSION,
    SQLITE_CORRUPT: StorageCause.CORRUPT,
    SQLITE_NOTADB: StorageCause.CORRUPT,
}
_BY_ERRNO = {
    errno.ENOSPC: StorageCause.DISK_FULL,
    errno.EDQUOT: StorageCause.DISK_FULL,
    errno.EROFS: StorageCause.READ_ONLY,
    errno.EACCES: StorageCause.PERMISSION,
    errno.EPERM: StorageCause.PERMISSION,
}
# Errors that carry neither code (LanceDB's Rust errors, messages wrapped by a sink): their text.
_BY_TEXT = (
    (re.compile(r"no space left on device|os error 28\b|\bdisk (?:\(or quota\) )?is full|disk quota exceeded"
                r"|os error 122\b", re.IGNORECASE), StorageCause.DISK_FULL),
    (re.compile(r"read-only file system|os error 30\b", re.IGNORECASE), StorageCause.READ_ONLY),
    (re.compile(r"permission denied|os error 13\b", re.IGNORECASE), StorageCause.PERMISSION),
    (re.compile(r"database disk image is malformed|file is not a database", re.IGNORECASE), StorageCause.CORRUPT),
)
_SQLITE_READ_ONLY_TEXT = re.compile(r"attempt to write a readonly database", re.IGNORECASE)
_IO_TEXT = re.compile(r"disk I/O error|input/output error|os error 5\b", re.IGNORECASE)

#: Less room than this is a full disk for an ambiguous error: a WAL index alone takes 32 KiB, a
#: LanceDB fragment far more. (A non-root user sees 0 on a full ext4: the root reserve is not counted.)
FULL_BELOW_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class StorageFault:
    """What happened (``cause``), where, the error as raised, and the room left there."""

    cause: StorageCause
    where: Path | None
    error: str
    free_bytes: int | None = None
    total_bytes: int | None = None

    @property
    def advice(self) -> str:
        return _ADVICE[self.cause]

    @property
    def message(self) -> str:
        """One line: the cause, the folder, the room left, what to do, then the error as raised."""
        at = f" at {self.where}" if self.where is not None else ""
        room = ""
        if self.cause is StorageCause.DISK_FULL and self.free_bytes is not None and self.total_bytes:
            room = f" ({_size(self.free_bytes)} free of {_size(self.total_bytes)})"
        return f"{_LABEL[self.cause]}{at}{room}: {self.advice} [{self.error}]"

    def log_fields(self) -> dict:
        """Fields for a structured log event (the caller adds its own ``error``)."""
        return {"cause": str(self.cause), "where": None if self.where is None else str(self.where),
                "free_bytes": self.free_bytes, "total_bytes": self.total_bytes, "advice": self.advice}


class StorageFailure(RuntimeError):
    """A failure with a storage cause, raised by a layer that knows the folders involved. (Any
    exception with a :class:`StorageFault` as ``fault`` is read the same way by :func:`classify`.)"""

    def __init__(self, fault: StorageFault):
        super().__init__(fault.message)
        self.fault = fault


def sqlite_code(exc: BaseException) -> int | None:
    """The primary SQLite result code of an error (peewee's wrapper included), None without one."""
    for e in _chain(exc):
        code = getattr(e, "sqlite_errorcode", None)
        if isinstance(code, int):
            return code & 0xFF
    return None


def classify(exc: BaseException, places: Sequence[Path | str] = ()) -> StorageFault | None:
    """The storage cause of ``exc`` (its whole chain is read), or None when it has none."""
    folders = [Path(p) for p in places]
    for e in _chain(exc):
        carried = getattr(e, "fault", None)  # StorageFailure, or another error that names its fault
        if isinstance(carried, StorageFault):
            return carried
        cause = _cause_of(e, folders)
        if cause is not None:
            return _fault(cause, f"{type(e).__name__}: {e}", folders)
    return None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then its causes and contexts, and an exception a wrapper carries as its first argument
    (peewee raises its own OperationalError with the sqlite3 error as ``args[0]``)."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop(0)
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo += [n for n in (e.__cause__, e.__context__) if n is not None]
        if e.args and isinstance(e.args[0], BaseException):
            todo.append(e.args[0])


def _cause_of(e: BaseException, folders: list[Path]) -> StorageCause | None:
    if isinstance(e, sqlite3.Error) and isinstance(getattr(e, "sqlite_errorcode", None), int):
        code = e.sqlite_errorcode & 0xFF
        if code == SQLITE_READONLY:  # a file system mounted read-only, or a folder or file not ours to write
            return _read_only_or_permission(folders)
        if code in _BY_SQLITE:
            return _BY_SQLITE[code]
        if code == SQLITE_IOERR:
            return _probe(folders) or StorageCause.IO_ERROR
        if code == SQLITE_CANTOPEN:
            return _probe(folders)
        return None  # another code (SQLITE_ERROR, BUSY, ...): not a storage cause, whatever the text
    if isinstance(e, OSError) and e.errno is not None:
        if e.errno in _BY_ERRNO:
            return _BY_ERRNO[e.errno]
        if e.errno == errno.EIO:
            return _probe(folders) or StorageCause.IO_ERROR
    text = str(e)
    for pattern, cause in _BY_TEXT:
        if pattern.search(text):
            return cause
    if _SQLITE_READ_ONLY_TEXT.search(text):  # SQLite's words, without its code (a wrapped error)
        return _read_only_or_permission(folders)
    if _IO_TEXT.search(text):
        return _probe(folders) or StorageCause.IO_ERROR
    return None


def _probe(folders: list[Path]) -> StorageCause | None:
    """What the folders show: no room, mounted read-only, or not writable by us."""
    if any(0 <= _room(p)[0] < FULL_BELOW_BYTES for p in folders):
        return StorageCause.DISK_FULL
    if any(_read_only(p) for p in folders):
        return StorageCause.READ_ONLY
    if any(not _writable(p) for p in folders):
        return StorageCause.PERMISSION
    return None


def _read_only_or_permission(folders: list[Path]) -> StorageCause:
    """"Read-only" as SQLite says it: the file system only when one of the folders is mounted so; a
    folder this user may not write is a permission problem (a file system remount would not fix it)."""
    if any(_read_only(p) for p in folders) or all(_writable(p) for p in folders):
        return StorageCause.READ_ONLY
    return StorageCause.PERMISSION


def _fault(cause: StorageCause, error: str, folders: list[Path]) -> StorageFault:
    where = _pin(cause, folders)
    free, total = _room(where) if where is not None and cause is StorageCause.DISK_FULL else (None, None)
    return StorageFault(cause, where, error, None if free is None or free < 0 else free,
                        None if total is None or total < 0 else total)


def _pin(cause: StorageCause, folders: list[Path]) -> Path | None:
    """The folder that shows ``cause``: the fullest for a full disk, the first read-only or
    unwritable one, else the first folder (None when none shows a permission problem)."""
    if not folders:
        return None
    if cause is StorageCause.DISK_FULL:
        measured = [(free, i) for i, p in enumerate(folders) if (free := _room(p)[0]) >= 0]
        return folders[min(measured)[1]] if measured else folders[0]
    if cause is StorageCause.READ_ONLY:
        return next((p for p in folders if _read_only(p)), folders[0])
    if cause is StorageCause.PERMISSION:
        return next((p for p in folders if not _writable(p)), None)
    return folders[0]


def _existing(path: Path) -> Path:
    """``path`` or its nearest existing parent (a folder not created yet is on its parent's disk)."""
    for p in (path, *path.parents):
        if p.exists():
            return p
    return path


def _room(path: Path) -> tuple[int, int]:
    """(free bytes for an unprivileged user, total bytes) of ``path``'s file system; (-1, -1) unknown."""
    try:
        usage = shutil.disk_usage(_existing(path))
    except OSError:
        return -1, -1
    return usage.free, usage.total


def _read_only(path: Path) -> bool:
    try:
        return bool(os.statvfs(_existing(path)).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _writable(path: Path) -> bool:
    return os.access(_existing(path), os.W_OK)


def _size(n: int) -> str:
    value, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            break
        value /= 1024
    return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
