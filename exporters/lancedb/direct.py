"""The search path's reads of one LanceDB table: awaited on the calling thread's own event loop.

lancedb's synchronous API runs every call on one background asyncio loop thread
(``LanceDBBackgroundEventLoop``) and hands each result back through it; with the full-text and
vector stages of several searches in flight, every call queues on that one thread. The search
path's reads (vector, full text, a filter's rows, the take of the shown rows, the version and
a routing count) run instead on the table's async handle — the same table, session and caches,
so the same version and the same rows — awaited on an event loop that belongs to the calling
thread (:class:`AsyncReads`).

The async handle is a private attribute of lancedb's table
(:mod:`exporters.lancedb.lance_private`); where the installed lancedb has none, the same reads
go through lancedb's synchronous API (:class:`SyncReads`): the same answers, the plain library
path. A thread that already runs an event loop (an async caller) cannot run a second one: its
reads are awaited on lancedb's background loop, as the synchronous API would.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import numpy as np

from exporters.lancedb import lance_private

_local = threading.local()


class _ThreadLoop:
    """The event loop of one thread, closed when the thread's locals go (its exit)."""

    __slots__ = ("loop",)

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()  # uvloop's answered no faster (issue 37)

    def __del__(self) -> None:
        if not self.loop.is_running():
            self.loop.close()  # its selector and self-pipe sockets


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


def _shape(query, where: str | None, select: list[str], with_row_id: bool, limit: int | None, **filter_kw):
    """A filter that every row passes is not sent (``where`` None): LanceDB would evaluate it on
    every row for every query. Every filter is a prefilter."""
    if where is not None:
        query = query.where(where, **filter_kw)
    return query.select(select)


def _match(text: str):
    """A full-text match of ``text`` on the ``text`` column (lancedb's defaults for the rest)."""
    from lancedb.query import MatchQuery

    return MatchQuery(text, "text")  # type: ignore[call-arg]  # its defaults are dataclass fields


class AsyncReads:
    """One table's search reads on its async handle, awaited on this thread's loop."""

    __slots__ = ("handle",)

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def _arrow(self, query, with_row_id: bool, limit: int | None):
        query = query.with_row_id() if with_row_id else query
        return run((query if limit is None else query.limit(limit)).to_arrow())

    def knn(self, vector: np.ndarray, where: str | None, select: list[str], with_row_id: bool, limit: int,
            nprobes: int | None, refine: int):
        q = _shape(self.handle.query().nearest_to(vector).column("vector").distance_type("cosine"), where, select,
                   with_row_id, limit)
        q = q.bypass_vector_index() if nprobes is None else q.nprobes(nprobes).refine_factor(refine)
        return self._arrow(q, with_row_id, limit)

    def fts(self, text: str, where: str | None, select: list[str], with_row_id: bool, limit: int):
        q = self.handle.query().nearest_to_text(_match(text))
        return self._arrow(_shape(q, where, select, with_row_id, limit), with_row_id, limit)

    def scan(self, where: str, select: list[str], with_row_id: bool, limit: int):
        return self._arrow(_shape(self.handle.query(), where, select, with_row_id, limit), with_row_id, limit)

    def take(self, rowids: list[int], select: list[str]):
        return self._arrow(self.handle.take_row_ids(rowids).select(select), True, None)

    def version(self) -> int:
        return int(run(self.handle.version()))

    def count(self, sql: str) -> int:
        return int(run(self.handle.count_rows(sql)))


class SyncReads:
    """The same reads through lancedb's synchronous (public) API."""

    __slots__ = ("table",)

    def __init__(self, table: Any) -> None:
        self.table = table

    def knn(self, vector: np.ndarray, where: str | None, select: list[str], with_row_id: bool, limit: int,
            nprobes: int | None, refine: int):
        q = self.table.search(vector, vector_column_name="vector").distance_type("cosine")
        q = _shape(q, where, select, with_row_id, limit, prefilter=True).with_row_id(with_row_id).limit(limit)
        q = q.bypass_vector_index() if nprobes is None else q.nprobes(nprobes).refine_factor(refine)
        return q.to_arrow()

    def fts(self, text: str, where: str | None, select: list[str], with_row_id: bool, limit: int):
        q = self.table.search(_match(text), query_type="fts")
        return _shape(q, where, select, with_row_id, limit, prefilter=True).with_row_id(with_row_id) \
            .limit(limit).to_arrow()

    def scan(self, where: str, select: list[str], with_row_id: bool, limit: int):
        q = _shape(self.table.search(), where, select, with_row_id, limit, prefilter=True)
        return q.with_row_id(with_row_id).limit(limit).to_arrow()

    def take(self, rowids: list[int], select: list[str]):
        return self.table.take_row_ids(rowids).select(select).with_row_id().to_arrow()

    def version(self) -> int:
        return int(self.table.version)

    def count(self, sql: str) -> int:
        return int(self.table.count_rows(sql))


def reads(table: Any) -> AsyncReads | SyncReads:
    """The search reads of ``table``: on its async handle where this lancedb exposes one."""
    handle = lance_private.async_handle(table)
    return SyncReads(table) if handle is None else AsyncReads(handle)


__all__ = ["AsyncReads", "SyncReads", "reads", "run"]
