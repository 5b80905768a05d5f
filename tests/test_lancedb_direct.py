"""Search-path reads awaited on the calling thread's own loop (exporters.lancedb.direct):
the same answers as lancedb's synchronous API, from any thread, and on lancedb's background
loop wherever a loop already runs."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import lancedb.background_loop as background
import numpy as np
import pytest
from fake_embedder import FakeEmbedder
from lancedb.query import MatchQuery
from lancedb.table import AsyncTable

from exporters.lancedb import direct, lance_private
from exporters.lancedb.schema import refine_factor
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


@pytest.fixture
def queued(monkeypatch) -> list:
    """Every call that went through lancedb's background loop."""
    seen: list = []
    original = background.BackgroundEventLoop.run

    def spy(self, future):
        seen.append(future)
        return original(self, future)

    monkeypatch.setattr(background.BackgroundEventLoop, "run", spy)
    return seen


SCOPES = (("persona", scope_where()), ("session", scope_where(Scope.SESSION, "s3")),
          ("private", scope_where(private={"s3"})))


def _answers(retriever, table) -> dict:
    cols = retriever.rank_columns(table)  # the text of the shown rows comes from details()
    q = FakeEmbedder().embed_query("rockets and budgets")
    out = {}
    for label, where in SCOPES:
        near = retriever.nearest(table, q, where, 40, cols)
        hits, vectors = retriever.matching(table, "rockets budgets", where, 40, cols, with_vectors=True)
        shown = retriever.details(table, [dict(r) for r in near[:6]])
        out[label] = ([(r["id"], r["_distance"]) for r in near], [(r["id"], r["_score"]) for r in hits],
                      vectors.tobytes() if vectors is not None else None,
                      [(r["id"], r["text"], r["start_line"], r["end_line"]) for r in shown])
    return out


def test_the_pinned_lancedb_gives_the_async_handle(indexed) -> None:  # noqa: F811
    _, _, table = indexed
    assert isinstance(lance_private.async_handle(table), AsyncTable)  # the pin: the fast path is taken
    assert isinstance(direct.reads(table), direct.AsyncReads)


def test_direct_queries_answer_as_the_synchronous_api(indexed, runs, queued) -> None:  # noqa: F811
    _, retriever, table = indexed
    retriever.columns(table)  # read once per table generation (its schema), not per search
    queued.clear()
    got = _answers(retriever, table)
    # vector, full text and the take of the shown rows, three scopes, and the session's rows read
    # whole first (50 > 40: then searched as any filter): all awaited on this thread
    assert len(runs) == 10 and set(runs) == {threading.get_ident()} and queued == []
    assert retriever.whole_overflows == 1 and retriever.whole_reads == 0
    assert got["persona"][0] and got["persona"][1] and got["session"][0] and got["persona"][3]
    q = FakeEmbedder().embed_query("rockets and budgets")
    for label, where in SCOPES:  # lancedb's synchronous API, the same queries
        knn = table.search(q, vector_column_name="vector").distance_type("cosine")
        knn = (knn if where.whole else knn.where(where.sql, prefilter=True)).select(["id"]).limit(40)
        nprobes = retriever.vector_route(table, where)
        knn = knn.bypass_vector_index() if nprobes is None else knn.nprobes(nprobes).refine_factor(refine_factor(40))
        fts = table.search(MatchQuery("rockets budgets", "text"), query_type="fts")
        fts = (fts if where.whole else fts.where(where.sql, prefilter=True)).select(["id"]).limit(40)
        assert got[label][0] == [(r["id"], r["_distance"]) for r in knn.to_list()]
        assert got[label][1] == [(r["id"], r["_score"]) for r in fts.to_list()]


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
    direct.run(asyncio.sleep(0))
    assert type(direct._local.own.loop).__module__.startswith("asyncio")  # uvloop's answered no faster (issue 37)


def test_a_thread_s_loop_is_closed_when_the_thread_ends() -> None:
    seen = []

    def work() -> None:
        direct.run(asyncio.sleep(0))
        seen.append(direct._local.own.loop)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert len(seen) == 1 and seen[0].is_closed()


def test_inside_a_running_loop_lancedb_s_background_loop_answers(indexed, queued) -> None:  # noqa: F811
    """A caller that runs an event loop itself (an async endpoint calling in directly) cannot
    run a second one in its thread: its queries are awaited on lancedb's background loop, as
    the synchronous API would, with the same answers."""
    _, retriever, table = indexed
    retriever.columns(table)  # read once per table generation (its schema), not per search
    queued.clear()
    outside = _answers(retriever, table)
    assert queued == []

    async def inside():
        return _answers(retriever, table)

    assert asyncio.run(inside()) == outside
    assert len(queued) == 9


def test_the_search_path_never_queues_on_lancedb_s_background_loop(indexed, queued) -> None:  # noqa: F811
    _, retriever, table = indexed
    cols = retriever.rank_columns(table)  # read once per table generation (its schema), not per search
    queued.clear()
    q = FakeEmbedder().embed_query("rockets and budgets")
    near = retriever.nearest(table, q, scope_where(), 20, cols)
    retriever.matching(table, "rockets budgets", scope_where(), 20, cols, with_vectors=True)
    retriever.details(table, [dict(r) for r in near[:6]])
    retriever.count(table, scope_where(Scope.SESSION, "s3").sql)
    assert retriever.version(table) == table.version
    assert len(queued) == 1  # only the assert's own synchronous ``table.version``
