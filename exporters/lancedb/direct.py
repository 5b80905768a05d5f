"""Search-path LanceDB queries run on the calling thread's own event loop.

lancedb's synchronous API runs every call on one background asyncio loop
thread (``LanceDBBackgroundEventLoop``) and hands each result back through it;
with the full-text and vector stages of several searches in flight, every
call queues on that one thread. The search path's queries (vector, full text,
the take of the shown rows) run instead on the table's async handle — the same
table, session and caches, so the same version and the same rows — awaited on
an event loop that belongs to the calling thread. Measured on the 100k corpus
(bench/RESULTS.md "Query latency", 2026-11-24): the full-text stage of one
thread 7.8 → 5.5 ms, 4 threads 214 → 264 queries/s.

``lancedb.table.LanceTable`` keeps its async handle in ``_table``; lancedb is
pinned (pyproject.toml) and :func:`handle` checks the type, so another version
that stores it differently falls back to the synchronous API (slower, never
wrong), and ``tests/test_lancedb_direct.py`` fails on the pin that does.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

_local = threading.local()


class _ThreadLoop:
    """The event loop of one thread, closed when the thread's locals go (its exit)."""

    __slots__ = ("loop",)

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def __del__(self) -> None:
        if not self.loop.is_running():
            self.loop.close()  # its selector and self-pipe sockets


def handle(table: Any):
    """The async handle of a synchronous LanceDB table, or None when this thread
    cannot await it (it runs an event loop already) or the table has none."""
    from lancedb.table import AsyncTable

    inner = getattr(table, "_table", None)
    if not isinstance(inner, AsyncTable):
        return None
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return inner
    return None  # e.g. called from an async endpoint's own loop: use the synchronous API


def run(awaitable: Any) -> Any:
    """Await ``awaitable`` on this thread's own event loop (made on first use, kept
    for the thread's life: the search threads are pool threads)."""
    own = getattr(_local, "own", None)
    if own is None or own.loop.is_closed():
        own = _local.own = _ThreadLoop()
    return own.loop.run_until_complete(awaitable)


def call(table: Any, awaited: Callable[[Any], Awaitable[T]], synchronous: Callable[[], T]) -> T:
    """``awaited(async handle)`` awaited here, or ``synchronous()`` where :func:`handle` gives none."""
    fast = handle(table)
    return run(awaited(fast)) if fast is not None else synchronous()


class Direct:
    """An async LanceDB query with the synchronous builders' ``to_arrow()``."""

    __slots__ = ("query",)

    def __init__(self, query: Any) -> None:
        self.query = query

    def to_arrow(self):
        return run(self.query.to_arrow())
