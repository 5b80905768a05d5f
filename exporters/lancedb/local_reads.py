"""How a reader of a local index reads the table files: io_uring or lance's thread pool.

A search makes hundreds of small reads (the rows a vector query re-scores, the vectors of
its full-text hits, the shown rows), which lance's local reader hands to its runtime's
threads; a profile of the project-scope query put a quarter of the process's samples in the
kernel's scheduler (bench/RESULTS.md, "API under load", 2026-11-24). Lance's io_uring reader (the
``file+uring://`` scheme) submits the same reads to a ring served by two threads of its
own: in-process at 100k chunks, project- and persona-scope p50 ~10 % lower (ABBA), 12–19 %
less CPU a sequential project-scope search.

The choice is ``[index] local_reads``: ``auto`` (io_uring when this kernel lets the
process create a ring: containers often forbid it by seccomp, ``kernel.io_uring_disabled``
may too), ``io_uring`` (required: a reader that cannot use it fails with a clear error),
``threads`` (lance's default). Only table *reads* of a searcher take this path: the
database connection, the writer and object storage are unchanged. This module is the only one
that sets lance's io_uring environment or opens a table through the ring (:func:`choose`,
:func:`open_table`). Side by side again on the 100k corpus (issue 37, ``bench/adapters_ab.py``,
load 10-17): 13-16 % more queries a second at 4 threads and 16-22 % less CPU a query than the
threads in two of three runs (the third, with uvloop still on the search threads, was slower).

lancedb creates the connection's folder relative to the working directory when the
connection URI has this scheme (``file+uring:/…``), so the connection stays a plain path
and each table is opened with an explicit ``file+uring://`` location.
"""

from __future__ import annotations

import ctypes
import enum
import errno
import functools
import os
import sys
from pathlib import Path
from typing import Any

import structlog

from exporters.base import SinkError

log = structlog.get_logger("indexer.lancedb")

#: The ring's threads wait this long for a request before they look again (lance's default,
#: 10 ms, wakes both threads 100 times a second in an idle daemon); a request arriving ends
#: the wait at once, so a longer one costs no latency.
IDLE_POLL_MS = "1000"

#: Entries of each ring (lance's default, 16,384, maps ~1.5 MB per ring thread into the daemon's
#: memory; a ring thread submits at most 128 reads at a time, and a full completion queue
#: is held by the kernel, not dropped): the memory benchmark's steady RSS 396-398 -> 391 MB.
RING_ENTRIES = "1024"

_SYS_IO_URING_SETUP = 425  # the same number on x86-64 and arm64 (the unified syscall table)


class LocalReads(str, enum.Enum):
    AUTO = "auto"
    IO_URING = "io_uring"
    THREADS = "threads"


class IoUringUnavailable(SinkError):
    """``local_reads = "io_uring"`` on a machine where the process cannot create a ring."""


@functools.cache
def io_uring_status() -> str:
    """``"ok"`` when this process may create an io_uring ring, else why not (a short reason).

    Creates a one-entry ring and closes it: the only reliable test (the kernel may lack it,
    a seccomp filter may refuse it with EPERM, the sysctl may limit it to a group)."""
    if not sys.platform.startswith("linux"):
        return f"io_uring is Linux-only (this is {sys.platform})"
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
        fd = libc.syscall(_SYS_IO_URING_SETUP, ctypes.c_uint(1), params)
    except (OSError, AttributeError) as exc:  # no libc syscall(): not a glibc/musl Linux
        return f"cannot call io_uring_setup: {exc}"
    if fd < 0:
        code = ctypes.get_errno()
        return f"io_uring_setup failed: {errno.errorcode.get(code, code)} ({os.strerror(code)})"
    os.close(fd)
    return "ok"


def resolve(mode: LocalReads | str) -> LocalReads:
    """The read path a reader takes under ``mode``: never ``AUTO``.

    Raises :class:`IoUringUnavailable` for ``io_uring`` where the process cannot use it."""
    mode = LocalReads(mode)
    if mode is LocalReads.THREADS:
        return mode
    status = io_uring_status()
    if status == "ok":
        return LocalReads.IO_URING
    if mode is LocalReads.IO_URING:
        raise IoUringUnavailable(f'[index] local_reads = "io_uring", but {status}: '
                                 'set local_reads = "auto" or "threads"')
    return LocalReads.THREADS


def configure_rings() -> None:
    """Set lance's ring-thread settings before its first io_uring read (lance reads them from
    the environment when its ring threads start); an operator's own values win."""
    os.environ.setdefault("LANCE_URING_POLL_TIMEOUT_MS", IDLE_POLL_MS)
    os.environ.setdefault("LANCE_URING_QUEUE_DEPTH", RING_ENTRIES)


def choose(mode: LocalReads | str) -> LocalReads:
    """:func:`resolve`, with lance's ring settings in the environment when io_uring is chosen."""
    reads = resolve(mode)
    if reads is LocalReads.IO_URING:
        configure_rings()
    return reads


def open_table(db: Any, db_dir: Path, name: str, reads: LocalReads, mode: LocalReads) -> tuple[Any, LocalReads]:
    """Open table ``name`` of connection ``db`` (folder ``db_dir``) for reading as ``reads`` says.
    Returns the table and the reads in effect from now on: under ``auto`` (``mode``), a table that
    opens with lance's threads but not through io_uring is logged once and the reader goes on with
    the threads; under ``io_uring`` the failure is the caller's."""
    if reads is not LocalReads.IO_URING:
        return db.open_table(name), reads
    from lancedb.table import LanceTable

    try:
        return LanceTable.open(db, name, location=table_location(db_dir, name)), reads
    except Exception as exc:
        if mode is LocalReads.IO_URING:
            raise
        table = db.open_table(name)  # its error, if it fails too: not an io_uring matter
        log.warning("lancedb.io_uring_failed", table=name, error=f"{type(exc).__name__}: {str(exc)[:300]}",
                    action='reading with lance\'s threads; [index] local_reads = "threads" skips the try')
        return table, LocalReads.THREADS


def table_location(db_dir: Path, name: str) -> str:
    """The explicit location that opens table ``name`` of ``db_dir`` for io_uring reads."""
    return f"file+uring://{Path(db_dir).absolute()}/{name}.lance"


__all__ = ["LocalReads", "IoUringUnavailable", "choose", "configure_rings", "io_uring_status", "open_table", "resolve",
           "table_location"]
