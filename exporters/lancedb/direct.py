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
pinned (pyproject.toml), :func:`handle` checks the type, and
``tests/test_lancedb_direct.py`` fails on a pin that stores it otherwise.
A thread that already runs an event loop (an async caller) cannot run a second
one: its queries are awaited on lancedb's background loop, as the synchronous
API would.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

_local = threading.local()


def _new_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop where installed (each search awaits about nine native calls on it; 4
    search threads answered more queries a second than on asyncio's loop, bench/RESULTS.md),
    else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class _ThreadLoop:
    """The event loop of one thread, closed when the thread's locals go (its exit)."""

    __slots__ = ("loop",)

    def __init__(self) -> None:
        self.loop = _new_loop()

    def __del__(self) -> None:
        if not self.loop.is_running():
            self.loop.close()  # its selector and self-pipe sockets


def handle(table: Any):
    """The async handle of a synchronous LanceDB table (the same table, session and caches)."""
    from lancedb.table import AsyncTable

    inner = getattr(table, "_table", None)
    if not isinstance(inner, AsyncTable):  # tests/test_lancedb_direct.py fails first on such a pin
        raise TypeError(f"lancedb {type(table).__name__} has no async handle in `_table`: "
                        "this lancedb version is not the one pyproject.toml pins")
    return inner


def run(awaitable: Any) -> Any:
    """Await ``awaitable`` on this thread's own event loop (made on first use, kept for the
    thread's life: the search threads are pool threads); on lancedb's background loop, as its
    synchronous API does, in a thread that runs an event loop already (an async caller)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        own = getattr(_local, "own", None)
        if own is None or own.loop.is_closed():
            own = _local.own = _ThreadLoop()
        return own.loop.run_until_complete(awaitable)
    from lancedb.background_loop import LOOP

    return LOOP.run(awaitable)


async def collect(query: Any):
    """``query``'s rows as one Arrow table: the query's native stream, collected.

    lancedb's ``to_arrow()`` first awaits the table's schema (to add a row id for blob
    columns; these tables have none) and wraps the batches twice in Python; without them,
    4 search threads answered ~10 % more queries a second in-process (bench/RESULTS.md
    "API under load", 2026-11-24). A query with a reranker goes the library's way."""
    if getattr(query, "_reranker", None) is not None:
        return await query.to_arrow()
    import pyarrow as pa

    stream = await query._inner.execute(max_batch_length=None, timeout=None)
    batches = [batch async for batch in stream]
    return pa.Table.from_batches(batches, schema=stream.schema)


class Direct:
    """An async LanceDB query with the synchronous builders' ``to_arrow()``."""

    __slots__ = ("query",)

    def __init__(self, query: Any) -> None:
        self.query = query

    def to_arrow(self):
        return run(collect(self.query))
