"""One writer per index: an exclusive ``flock`` on ``<index_dir>/writer.lock``.

``ledger-indexer run``, ``sync`` and ``reindex`` (when it runs the reindex
itself) take the lock before they touch the state DB or the sinks; a second
writer gets :class:`LockHeldError`, whose message names the holder (pid,
command, since when) and says what to do.

Why ``flock``: the kernel drops the lock when the holder's last file
descriptor closes, which includes any death of the process (``kill -9``, OOM
kill, power loss). There is never a stale lock to clean up; the pid written in
the file is only information for the message, and is not trusted to mean the
lock is held. The file itself is never deleted (deleting a lock file lets two
processes lock two different inodes).

Caveats: ``flock`` locks belong to the open file description, so a child made
with a bare ``fork()`` (multiprocessing's "fork" start method) would share
and keep the lock; the descriptor is close-on-exec, so ``subprocess`` children
do not. ``flock`` is not reliable on NFS; keep the index dir on a local disk.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["LOCK_NAME", "Holder", "LockHeldError", "WriterLock", "acquire", "read_holder"]

LOCK_NAME = "writer.lock"

# A reader (read_holder) holds a shared lock for microseconds; a writer that
# collides with it retries for this long before reporting the lock as held.
DEFAULT_WAIT_S = 0.5
_POLL_S = 0.02


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds (or last held) the writer lock, as it wrote itself down.

    Any field may be None when the holder has just taken the lock and not
    written its record yet, or when the record is unreadable.
    """

    pid: int | None
    role: str | None
    since: datetime | None
    hostname: str | None = None
    argv: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """``pid 1234 (ledger-indexer run) since 2026-05-01T10:00:00Z, 3h12m ago``."""
        who = f"pid {self.pid}" if self.pid is not None else "an unknown process"
        if self.role:
            who += f" (ledger-indexer {self.role})"
        if self.hostname and self.hostname != socket.gethostname():
            who += f" on {self.hostname}"
        if self.since is not None:
            since = self.since.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            age = _age(datetime.now(UTC) - self.since)
            who += f" since {since} ({age} ago)"
        return who

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "role": self.role,
            "since": self.since.isoformat() if self.since else None,
            "hostname": self.hostname,
            "argv": list(self.argv),
            **({"extra": self.extra} if self.extra else {}),
        }

    @classmethod
    def from_json(cls, data: Any) -> Holder:
        if not isinstance(data, dict):
            return cls(pid=None, role=None, since=None)
        pid = data.get("pid")
        since = data.get("since")
        try:
            since_dt = datetime.fromisoformat(since) if isinstance(since, str) else None
        except ValueError:
            since_dt = None
        argv = data.get("argv")
        extra = data.get("extra")
        return cls(
            pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
            role=data.get("role") if isinstance(data.get("role"), str) else None,
            since=since_dt,
            hostname=data.get("hostname") if isinstance(data.get("hostname"), str) else None,
            argv=tuple(str(a) for a in argv) if isinstance(argv, list) else (),
            extra=extra if isinstance(extra, dict) else {},
        )


def _age(delta) -> str:
    s = max(0, int(delta.total_seconds()))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    if h < 48:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h"


class LockHeldError(RuntimeError):
    """Another writer holds the index. ``str()`` is the message for the operator."""

    def __init__(self, index_dir: Path, holder: Holder | None, role: str) -> None:
        self.index_dir = Path(index_dir)
        self.holder = holder
        self.role = role
        super().__init__(self._message())

    def _message(self) -> str:
        who = self.holder.describe() if self.holder else "another process"
        msg = (
            f"cannot {self.role}: the index at {self.index_dir} is in use by {who}; "
            "only one writer may use an index at a time. "
        )
        holder_role = self.holder.role if self.holder else None
        if holder_role == "run":
            if self.role == "reindex":
                msg += (
                    "`ledger-indexer reindex` delegates to the running daemon through its API; "
                    "check [api] host/port and admin_token_file in the config, "
                    "or stop the daemon (systemctl stop ledger-indexer) and retry."
                )
            else:
                msg += (
                    "The daemon keeps the index up to date by itself. To force a full rebuild use "
                    "`ledger-indexer reindex`, which delegates to the running daemon; "
                    "otherwise stop the daemon first (systemctl stop ledger-indexer)."
                )
        elif holder_role in ("sync", "reindex"):
            msg += f"Wait for that `ledger-indexer {holder_role}` to finish, then retry."
        else:
            msg += (
                "Stop the daemon (systemctl stop ledger-indexer) or use `ledger-indexer reindex`, "
                "which delegates to the running daemon."
            )
        return msg


class WriterLock:
    """The writer lock of one index dir; a context manager.

    ``with WriterLock(index_dir, "run"):`` acquires on enter (raising
    :class:`LockHeldError`) and releases on exit. :func:`acquire` returns an
    already-acquired lock, usable in a ``with`` block too.
    """

    def __init__(self, index_dir: str | os.PathLike[str], role: str, *, extra: dict[str, Any] | None = None) -> None:
        self.index_dir = Path(index_dir)
        self.path = self.index_dir / LOCK_NAME
        self.role = role
        self.extra = dict(extra or {})
        self._fd: int | None = None
        self.holder: Holder | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, *, wait: float = DEFAULT_WAIT_S) -> WriterLock:
        """Take the lock or raise :class:`LockHeldError`; returns self.

        Non-blocking in spirit: ``wait`` only rides out a concurrent
        :func:`read_holder` probe (microseconds), not a real writer.
        """
        if self._fd is not None:
            return self
        self.index_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        try:
            deadline = time.monotonic() + max(0.0, wait)
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                        raise
                    if time.monotonic() >= deadline:
                        raise LockHeldError(self.index_dir, _read_record(self.path), self.role) from None
                    time.sleep(_POLL_S)
            holder = Holder(
                pid=os.getpid(),
                role=self.role,
                since=datetime.now(UTC).replace(microsecond=0),
                hostname=socket.gethostname(),
                argv=tuple(sys.argv),
                extra=self.extra,
            )
            _write_record(fd, holder)
        except BaseException:
            os.close(fd)  # closing drops the flock, if we got it
            raise
        self._fd = fd
        self.holder = holder
        return self

    def update(self, **extra: Any) -> None:
        """Add information to the holder record (e.g. ``api="http://127.0.0.1:8765"``)."""
        if self._fd is None or self.holder is None:
            raise RuntimeError("writer lock not held")
        self.extra.update(extra)
        self.holder = Holder(
            pid=self.holder.pid,
            role=self.holder.role,
            since=self.holder.since,
            hostname=self.holder.hostname,
            argv=self.holder.argv,
            extra=dict(self.extra),
        )
        _write_record(self._fd, self.holder)

    def release(self) -> None:
        """Release the lock (idempotent). The record is cleared (a blank line), the file kept."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            # one byte, not none: the file keeps its block, so the next holder can write its
            # record on a full disk (_write_record)
            os.pwrite(fd, b"\n", 0)
            os.ftruncate(fd, 1)
        except OSError:
            pass
        finally:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    def __enter__(self) -> WriterLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.release()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"WriterLock({str(self.index_dir)!r}, {self.role!r}, held={self.held})"


def acquire(
    index_dir: str | os.PathLike[str],
    role: str,
    *,
    extra: dict[str, Any] | None = None,
    wait: float = DEFAULT_WAIT_S,
) -> WriterLock:
    """Acquire the writer lock of ``index_dir`` for ``role`` (run/sync/reindex).

    Raises :class:`LockHeldError` naming the holder when another writer has it.
    """
    return WriterLock(index_dir, role, extra=extra).acquire(wait=wait)


def read_holder(index_dir: str | os.PathLike[str]) -> Holder | None:
    """Who holds the writer lock now, or None when nobody does.

    Probes with a shared lock (which never succeeds while a writer holds the
    exclusive one) and releases it at once; then reads the holder's record.
    For ``status`` and for ``reindex`` deciding whether to delegate.
    """
    path = Path(index_dir) / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
    finally:
        os.close(fd)
    return _read_record(path)


def _write_record(fd: int, holder: Holder) -> None:
    data = (json.dumps(holder.to_json(), ensure_ascii=False) + "\n").encode("utf-8")
    try:
        # over the old record, then cut to length: truncating first gives the file's block back, and
        # on a full disk the record could not get one again (the CLI finds the daemon's port here)
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
    except OSError:
        # The lock is what matters; the record is only for messages.
        pass


def _read_record(path: Path, settle_s: float = 0.2) -> Holder:
    """The holder's record; waits briefly if it is being written right now."""
    deadline = time.monotonic() + settle_s
    while True:
        try:
            raw = path.read_bytes()
        except OSError:
            raw = b""
        if raw.strip():
            try:
                return Holder.from_json(json.loads(raw.decode("utf-8", "replace")))
            except ValueError:
                pass
        if time.monotonic() >= deadline:
            return Holder(pid=None, role=None, since=None)
        time.sleep(_POLL_S)
