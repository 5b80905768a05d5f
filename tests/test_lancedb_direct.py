"""Search-path queries awaited on the calling thread's own loop (exporters.lancedb.direct):
the same answers as lancedb's synchronous API, from any thread, and the synchronous API
wherever a loop already runs."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from fake_embedder import FakeEmbedder
from lancedb.table import AsyncTable

from exporters.lancedb import direct
from indexer.core.scopes import Scope
from tests.test_lancedb_ann import indexed, scope_where  # noqa: F401  (fixture)


@pytest.fixture
def runs(monkeypatch) -> list[int]:
    """Thread ids of every query :func:`direct.run` awaited."""
    seen: list[int] = []
    original = direct.run

    def spy(awaitable):
        seen.append(threading.get_ident())
        return original(awaitable)

    monkeypatch.setattr(direct, "run", spy)
    return seen


def _answers(retriever, table) -> dict:
    cols = retriever.rank_columns(table)  # the text of the shown rows comes from details()
    q = FakeEmbedder().embed_query("rockets and budgets")
    out = {}
    for label, where in (("persona", scope_where()), ("session", scope_where(Scope.SESSION, "s3")),
                         ("private", scope_where(private={"s3"}))):
        near = retriever.nearest(table, q, where, 40, cols)
        hits, vectors = retriever.matching(table, "rockets budgets", where, 40, cols, with_vectors=True)
        shown = retriever.details(table, [dict(r) for r in near[:6]])
        out[label] = ([(r["id"], r["_distance"]) for r in near], [(r["id"], r["_score"]) for r in hits],
                      vectors.tobytes() if vectors is not None else None,
                      [(r["id"], r["text"], r["start_line"], r["end_line"]) for r in shown])
    return out


def test_the_pinned_lancedb_gives_the_async_handle(indexed) -> None:  # noqa: F811
    _, _, table = indexed
    assert isinstance(direct.handle(table), AsyncTable)


def test_direct_queries_answer_exactly_as_the_synchronous_api(indexed, runs, monkeypatch) -> None:  # noqa: F811
    _, retriever, table = indexed
    fast = _answers(retriever, table)
    # vector, full text and the take of the shown rows, three scopes: all awaited here
    assert len(runs) == 9 and set(runs) == {threading.get_ident()}
    runs.clear()
    monkeypatch.setattr(direct, "handle", lambda table: None)  # lancedb's synchronous API
    slow = _answers(retriever, table)
    assert runs == []
    assert fast == slow
    assert fast["persona"][0] and fast["persona"][1] and fast["session"][0] and fast["persona"][3]


def test_each_thread_awaits_on_its_own_loop(indexed, runs) -> None:  # noqa: F811
    _, retriever, table = indexed
    cols = retriever.columns(table)
    queries = [FakeEmbedder().embed_query(w) for w in ("rockets", "budgets", "yoga", "kafka", "taxes", "hiking")]
    serial = [[r["id"] for r in retriever.nearest(table, q, scope_where(), 25, cols)] for q in queries]
    runs.clear()
    barrier = threading.Barrier(3)

    def one(q: np.ndarray) -> list[str]:
        barrier.wait(timeout=10)  # three queries in flight at once, on three threads
        return [r["id"] for r in retriever.nearest(table, q, scope_where(), 25, cols)]

    with ThreadPoolExecutor(3) as pool:
        concurrent = list(pool.map(one, queries[:3])) + list(pool.map(one, queries[3:]))
    assert concurrent == serial
    assert len(set(runs)) == 3 and threading.get_ident() not in runs  # three pool threads, none of them this one
    loops = {}

    def loop_of() -> int:
        direct.run(asyncio.sleep(0))
        return id(direct._local.own.loop)

    with ThreadPoolExecutor(2) as pool:
        for _ in range(4):
            for ident, loop in pool.map(lambda _: (threading.get_ident(), loop_of()), range(2)):
                assert loops.setdefault(ident, loop) == loop  # kept for the thread's life
    assert len(set(loops.values())) == len(loops)  # one loop per thread


def test_a_thread_s_loop_is_closed_when_the_thread_ends() -> None:
    seen = []

    def work() -> None:
        direct.run(asyncio.sleep(0))
        seen.append(direct._local.own.loop)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert len(seen) == 1 and seen[0].is_closed()


def test_inside_a_running_loop_the_synchronous_api_answers(indexed, runs) -> None:  # noqa: F811
    """A caller that runs an event loop itself (an async endpoint calling in directly) cannot
    await on a second loop in its thread: it gets lancedb's synchronous API, same rows."""
    _, retriever, table = indexed
    cols = retriever.columns(table)
    q = FakeEmbedder().embed_query("rockets and budgets")
    outside = [(r["id"], r["_distance"]) for r in retriever.nearest(table, q, scope_where(), 30, cols)]
    runs.clear()

    async def inside():
        assert direct.handle(table) is None
        return [(r["id"], r["_distance"]) for r in retriever.nearest(table, q, scope_where(), 30, cols)]

    assert asyncio.run(inside()) == outside
    assert runs == []


def test_the_search_path_never_queues_on_lancedb_s_background_loop(indexed, monkeypatch) -> None:  # noqa: F811
    import lancedb.background_loop as background

    _, retriever, table = indexed
    queued = []
    original = background.BackgroundEventLoop.run

    def spy(self, future):
        queued.append(future)
        return original(self, future)

    monkeypatch.setattr(background.BackgroundEventLoop, "run", spy)
    cols = retriever.rank_columns(table)
    q = FakeEmbedder().embed_query("rockets and budgets")

    def search_path() -> None:
        near = retriever.nearest(table, q, scope_where(), 20, cols)
        retriever.matching(table, "rockets budgets", scope_where(), 20, cols, with_vectors=True)
        retriever.details(table, [dict(r) for r in near[:6]])
        assert retriever.version(table) == table.version

    queued.clear()
    search_path()
    assert len(queued) == 1  # only the assert's own synchronous ``table.version``
    monkeypatch.setattr(direct, "handle", lambda table: None)
    queued.clear()
    search_path()
    assert len(queued) >= 5  # the synchronous API: every call through the one loop thread
