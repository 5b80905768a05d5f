"""The process's native memory: what glibc's allocator keeps, and what the process holds.

ONNX Runtime (with its CPU arena off) and LanceDB allocate through glibc
``malloc``. Two glibc habits keep freed memory resident in a long-running
daemon:

- the *dynamic mmap threshold*: a freed ``mmap``-ed block (an activation
  tensor of a big batch) raises the threshold to its size (up to 32 MiB), so
  the next tensors of that size come from the heap, and a fragmented heap is
  not given back. :func:`configure` fixes the threshold (``M_MMAP_THRESHOLD``,
  1 MiB), which also turns the dynamic adjustment off: big blocks are mapped
  and unmapped, the heap holds small ones only.
- freed heap pages below the top of an arena stay resident until
  ``malloc_trim`` releases them (:func:`trim`).
- *one arena per thread*, up to 8 per core: the API's, the searcher's and
  LanceDB's threads each keep an arena's free pages. :func:`configure` caps
  them at ``MALLOC_ARENAS`` (2; the 100k memory benchmark: steady RSS −11 MB,
  the same throughput at 4 clients) unless ``MALLOC_ARENA_MAX`` is set in the
  environment, which glibc reads itself.

pyarrow's default memory pool in the wheels is mimalloc, with per-thread heaps
that keep their pages (the Arrow tables of query results, built on the API's
threads): :func:`configure` makes Arrow allocate from the system allocator
too, so those pages follow the same rules.

Both are no-ops where the C library is not glibc (one ``memory.native_tuning_unavailable`` event
says so). This module is the only one that calls into the C library's allocator; the sync worker
and the embedder call :func:`trim` and :func:`configure`. :func:`rss_bytes` and
:func:`peak_rss_bytes` read ``/proc/self/status`` (VmRSS, VmHWM), with
``getrusage`` as the fallback for the peak.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
import sys
import threading
import time

import structlog

log = structlog.get_logger("indexer.embedding")

M_MMAP_THRESHOLD = -3  # mallopt parameter numbers (malloc.h)
M_ARENA_MAX = -8
MMAP_THRESHOLD_BYTES = 1 << 20
MALLOC_ARENAS = 2

_lock = threading.Lock()
_libc: ctypes.CDLL | None | bool = False  # False: not looked up yet; None: not glibc
_configured = False


def _glibc() -> ctypes.CDLL | None:
    global _libc
    if _libc is False:
        lib = None
        if sys.platform.startswith("linux"):
            try:
                candidate = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                candidate.gnu_get_libc_version.restype = ctypes.c_char_p
                candidate.gnu_get_libc_version()
                candidate.malloc_trim.argtypes = [ctypes.c_size_t]
                candidate.malloc_trim.restype = ctypes.c_int
                candidate.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
                candidate.mallopt.restype = ctypes.c_int
                lib = candidate
            except (OSError, AttributeError):  # musl or another libc: nothing to tune
                lib = None
        if lib is None:
            log.info("memory.native_tuning_unavailable", platform=sys.platform,
                     reason="the C library is not glibc: no mmap threshold, arena cap or malloc_trim")
        _libc = lib
    return _libc  # type: ignore[return-value]


def available() -> bool:
    return _glibc() is not None


def configure() -> bool:
    """Fix glibc's mmap threshold and cap its arenas for this process, and move pyarrow's
    default pool to the system allocator (once). True when in effect (glibc only)."""
    global _configured
    with _lock:
        if _configured:
            return True
        lib = _glibc()
        if lib is None:
            return False
        _configured = bool(lib.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
        if "MALLOC_ARENA_MAX" not in os.environ:  # the operator's own setting wins
            lib.mallopt(M_ARENA_MAX, MALLOC_ARENAS)
        _arrow_to_system_pool()
        return _configured


def _arrow_to_system_pool() -> None:
    try:
        import pyarrow
    except ImportError:  # no Arrow in this process: nothing to move
        return
    pyarrow.set_memory_pool(pyarrow.system_memory_pool())


def configured() -> bool:
    return _configured


def trim() -> tuple[int, float] | None:
    """``malloc_trim(0)``: give freed heap pages back to the OS. Returns (resident
    bytes released, seconds taken), or None where there is no glibc."""
    lib = _glibc()
    if lib is None:
        return None
    before = rss_bytes()
    started = time.perf_counter()
    lib.malloc_trim(0)
    seconds = time.perf_counter() - started
    return max(0, before - rss_bytes()), seconds


def _status_kb(key: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def rss_bytes() -> int:
    """Resident memory now (VmRSS), 0 where unknown."""
    kb = _status_kb("VmRSS")
    return kb * 1024 if kb is not None else 0


def peak_rss_bytes() -> int:
    """The most resident memory this process has had (VmHWM; ``ru_maxrss`` where there is no /proc)."""
    kb = _status_kb("VmHWM")
    if kb is None:
        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return int(kb) * 1024


__all__ = ["MALLOC_ARENAS", "MMAP_THRESHOLD_BYTES", "available", "configure", "configured", "peak_rss_bytes", "rss_bytes", "trim"]
