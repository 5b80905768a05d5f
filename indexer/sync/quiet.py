"""Checks a pass can skip because the ledger files have not changed since they last ran.

A tail pass reads the rows after its cursor, and that is cheap whatever the
ledger's size. Four other checks are not free: the session registry refresh
(every session of the persona: ``deleted`` statuses, sessions made live again or
moved between personas), revisiting pending turns, reading the ``messages`` rows
written since the last pass (late messages, :mod:`indexer.sync.late`), and
comparing the fingerprints of bad turns (repairs in place). None of them
can find anything new unless the ledger was written, and every write to a WAL
database changes its ``-wal`` file (appended frames: size and mtime) or, after
a checkpoint, the main file. So each check records the files' (inode, size,
mtime) when it ran, and a later pass with the same stamp skips it.

A stamp is trusted only when it is *settled*: every file's mtime at least
``SETTLE_S`` older than now. A write in the same timestamp tick as the stat, of
the same size (a WAL restarted after a checkpoint), would otherwise look
unchanged; while the files are that fresh every check runs (git's "racy clean"
rule). Whatever is skipped also runs at least every ``FULL_CHECK_S`` seconds,
should a filesystem not keep mtimes. New history rows never depend on this:
the cursor is compared with the ledger's head by a query every pass.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

SETTLE_S = 2.0
FULL_CHECK_S = 300.0


@dataclass(frozen=True, slots=True)
class LedgerStamp:
    files: tuple  # per file (main, -wal): stat_key(), or None when absent
    settled: bool


def stat_key(st: os.stat_result, *, ctime: bool = True) -> tuple:
    """What a write to the file changes: inode, size, mtime, and ctime (which no one can set back).
    Not ctime for the ledger's files: a read-only SQLite connection changes the ``-wal``'s."""
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    return (*key, st.st_ctime_ns) if ctime else key


def settled_stat(st: os.stat_result, now: float | None = None, *, ctime: bool = True) -> bool:
    """The file was last changed at least ``SETTLE_S`` ago (a stat of it can be trusted)."""
    now = time.time() if now is None else now
    changed = max(st.st_mtime_ns, st.st_ctime_ns) if ctime else st.st_mtime_ns
    return changed / 1e9 <= now - SETTLE_S


def ledger_stamp(path: Path, *, now: float | None = None) -> LedgerStamp:
    """The ledger files as they are now (stat only; the ledger is not opened)."""
    now = time.time() if now is None else now
    files: list[tuple | None] = []
    settled = True
    for suffix in ("", "-wal"):
        try:
            st = os.stat(f"{path}{suffix}")
        except OSError:
            files.append(None)
            continue
        files.append(stat_key(st, ctime=False))
        if not settled_stat(st, now, ctime=False):
            settled = False
    return LedgerStamp(tuple(files), settled)


class QuietChecks:
    """Per (check, persona): the stamp at which the check last ran in full."""

    def __init__(self) -> None:
        self._done: dict[tuple[str, str], tuple[tuple, float]] = {}
        self._started: dict[str, tuple[tuple | None, int]] = {}  # files None: no settled stamp
        self._lock = threading.Lock()

    def unchanged(self, check: str, persona: str, stamp: LedgerStamp | None) -> bool:
        """True when ``check`` ran in full at this very (settled) stamp, not too long ago."""
        if stamp is None or not stamp.settled:
            return False
        with self._lock:
            done = self._done.get((check, persona))
        return done is not None and done[0] == stamp.files and time.monotonic() - done[1] < FULL_CHECK_S

    def ran(self, check: str, persona: str, stamp: LedgerStamp | None) -> None:
        """``check`` just ran in full on the ledger as of ``stamp`` (taken before it read)."""
        with self._lock:
            if stamp is not None and stamp.settled:
                self._done[(check, persona)] = (stamp.files, time.monotonic())
            else:
                self._done.pop((check, persona), None)

    def rotation_start_ms(self, persona: str, stamp: LedgerStamp | None, now_ms: int) -> int:
        """When the bad-turn comparisons of this stamp began (a rotation over
        more bad turns than one pass compares spans several passes)."""
        # Only settled stamps count: a comparison made while the files were fresh
        # may have missed a write that left the stamp as it was.
        files = stamp.files if stamp is not None and stamp.settled else None
        with self._lock:
            started = self._started.get(persona)
            if started is None or files is None or started[0] != files:
                started = (files, now_ms)
                self._started[persona] = started
            return started[1]

    def forget(self, persona: str | None = None) -> None:
        with self._lock:
            for key in [k for k in self._done if persona is None or k[1] == persona]:
                del self._done[key]
            for label in [p for p in self._started if persona is None or p == persona]:
                del self._started[label]


__all__ = ["FULL_CHECK_S", "SETTLE_S", "LedgerStamp", "QuietChecks", "ledger_stamp", "settled_stat", "stat_key"]
