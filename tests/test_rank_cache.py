"""The rank columns in memory (exporters/lancedb/rank_cache.py): the LanceDB property it
rests on (a row address never names other data), candidates equal to reading the table,
misses, reloads, the memory budget, and a stale copy caught before anything is shown.
Real LanceDB in tmp dirs; the fake embedder for the retriever-level cases, the real model
for the search-level comparison."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from fake_embedder import FakeEmbedder

from exporters.lancedb import LanceSink, Retriever
from exporters.lancedb.rank_cache import RELOAD_MISSES, _Block
from indexer.core.scopes import Scope, ScopeFacts, resolve
from indexer.core.types import DocKind, Source
from indexer.search.searcher import Searcher, SearchRequest
from tests.builders import document
from tests.demo_index import build_demo_index

WORDS = "apples pears rockets kernels deploys invoices hiking postgres kafka budgets yoga guitars".split()
MB = 2**20


def turn(i: int, session: str, text: str | None = None):
    ws = [WORDS[(i * 7 + k) % len(WORDS)] for k in range(3)]
    body = text or f"User: note {i} about {' and '.join(ws)}\nAssistant: noted {ws[0]} {i}"
    ts = None if i % 11 == 0 else 1_700_000_000_000 + i  # some rows without a timestamp
    return document(body, persona="atlas", session=session, turn=f"t{i}", timestamp_ms=ts)


def corpus(n: int, start: int = 0, sessions: int = 5):
    docs = [turn(i, f"s{i % sessions}") for i in range(start, start + n)]
    docs.append(document("# Notes\nkafka budgets and yoga", path=f"memory/notes{start}.md", persona="atlas",
                         session=None, turn=None, kind=DocKind.MEMORY, source=Source.MEMORY))
    return docs


def make_sink(tmp_path: Path) -> LanceSink:
    return LanceSink(tmp_path / "db", FakeEmbedder(), vector_index_rows=None, retire_grace=timedelta(0))


def whole_where():
    facts = ScopeFacts(private=frozenset(), deleted=frozenset(), project_peers=frozenset())
    return Retriever.where(resolve("atlas", Scope.PERSONA, None, frozenset({"sessions", "memory"}), facts))


def addresses(sink: LanceSink) -> dict[int, tuple[str, str]]:
    """Every live row's address → (id, text)."""
    table = sink._db.open_table(sink.table_stats("atlas").table)
    rows = table.search().select(["id", "text"]).with_row_id(True).limit(None).to_list()
    return {r["_rowid"]: (r["id"], r["text"]) for r in rows}


QUERIES = ["kafka budgets", "apples and pears", "rockets deploys", "yoga guitars hiking", "invoices postgres"]


def candidates(retriever: Retriever, query: str) -> tuple[list[dict], list[dict], np.ndarray | None]:
    """The vector and keyword candidates of ``query`` as the searcher asks for them."""
    table = retriever.active_table("atlas")
    cols = retriever.rank_columns(table)
    vector = np.asarray(FakeEmbedder().embed_query(query), dtype=np.float32)
    near = retriever.nearest(table, vector, whole_where(), 30, cols)
    hits, vecs = retriever.matching(table, query, whole_where(), 30, cols, with_vectors=True)
    return near, hits, vecs


def same_candidates(cached: Retriever, direct: Retriever) -> None:
    for q in QUERIES:
        a_near, a_hits, a_vecs = candidates(cached, q)
        b_near, b_hits, b_vecs = candidates(direct, q)
        assert a_near == b_near and a_hits == b_hits  # every column, score and address
        assert (a_vecs is None) == (b_vecs is None) and (a_vecs is None or np.array_equal(a_vecs, b_vecs))


# --------------------------------------------------------------------------- the property it rests on


def test_a_row_address_never_names_other_data_across_updates_deletes_and_compaction(tmp_path: Path) -> None:
    sink = make_sink(tmp_path)
    sink.upsert("atlas", corpus(40))
    first = addresses(sink)
    seen = dict(first)
    changed = [turn(i, f"s{i % 5}", text=f"User: changed {i}\nAssistant: rewritten {i}") for i in range(0, 40, 3)]
    sink.upsert("atlas", changed)
    after_update = addresses(sink)
    sink.delete("atlas", [d.path for d in corpus(40)[1:40:4]])
    after_delete = addresses(sink)
    sink.maintain(force=True)
    after_compaction = addresses(sink)
    for later in (after_update, after_delete, after_compaction):
        for rowid, row in later.items():
            assert seen.setdefault(rowid, row) == row  # an address once seen holds the same row, always
    # Not vacuous: the updated rows and the compacted rows did move to new addresses.
    updated = {r for r, (_, text) in after_update.items() if "rewritten" in text}
    assert len(updated) == len(changed) and updated.isdisjoint(first)
    # the compaction rewrote the fragment with deleted rows (not every fragment: compaction.py's plan)
    assert set(after_delete) - set(after_compaction)
    sink.close()


# --------------------------------------------------------------------------- equal to reading the table


def test_candidates_from_memory_equal_those_read_from_the_table_through_writes_and_compaction(
        tmp_path: Path) -> None:
    sink = make_sink(tmp_path)
    sink.upsert("atlas", corpus(120))
    cached = Retriever(tmp_path / "db", rank_cache_bytes=64 * MB)
    direct = Retriever(tmp_path / "db")
    assert cached.warm("atlas") and not direct.warm("atlas")
    same_candidates(cached, direct)
    caches = cached.rank_caches
    assert caches.misses == 0 and caches.hits > 0  # warmed: every candidate came from memory

    sink.upsert("atlas", corpus(30, start=120))  # new rows: read from the table, then held
    same_candidates(cached, direct)
    misses = caches.misses
    assert 0 < misses <= 31
    same_candidates(cached, direct)
    assert caches.misses == misses  # the second time, from memory

    sink.delete("atlas", [d.path for d in corpus(120)[::5]])
    sink.maintain(force=True)  # every row moves
    same_candidates(cached, direct)
    cached.close()
    direct.close()
    sink.close()


def test_many_misses_reload_the_table_in_the_background(tmp_path: Path) -> None:
    sink = make_sink(tmp_path)
    sink.upsert("atlas", corpus(RELOAD_MISSES + 200, sessions=20))
    cached = Retriever(tmp_path / "db", rank_cache_bytes=64 * MB)
    table = cached.active_table("atlas")
    cols = cached.rank_columns(table)
    every = [r["_rowid"] for r in table.search().select(["id"]).with_row_id(True).limit(None).to_list()]
    rows = cached.rank_caches.rows(table, every, cols)  # nothing loaded: all read by address
    assert [r["_rowid"] for r in rows] == every
    entry = cached.rank_caches._tables[table.name]
    loading = entry.loading
    assert loading is not None  # past RELOAD_MISSES: a reload was scheduled
    loading.result(timeout=60)
    assert entry.main is not None and entry.rows_loaded == len(every) and entry.extra == [] and entry.misses == 0
    hits = cached.rank_caches.hits
    assert cached.rank_caches.rows(table, every[:50], cols) == rows[:50]
    assert cached.rank_caches.hits == hits + 50
    cached.close()
    sink.close()


def test_a_table_over_the_budget_is_read_directly_and_the_oldest_table_goes_first(tmp_path: Path) -> None:
    sink = make_sink(tmp_path)
    sink.upsert("atlas", corpus(200))
    tiny = Retriever(tmp_path / "db", rank_cache_bytes=1_000)
    assert not tiny.warm("atlas")  # does not fit: never held
    direct = Retriever(tmp_path / "db")
    same_candidates(tiny, direct)
    assert tiny.rank_caches.nbytes == 0 and tiny.rank_caches.hits == 0

    sink.upsert("zeta", [document("User: hi\nAssistant: hello", persona="zeta", session="z1")])
    both = Retriever(tmp_path / "db", rank_cache_bytes=64 * MB)
    assert both.warm("atlas") and both.warm("zeta")
    atlas_bytes = both.rank_caches._tables[both.active_table("atlas").name].nbytes
    both.rank_caches.budget_bytes = atlas_bytes + 10  # room for atlas alone: zeta (used last) evicts it
    assert both.warm("zeta")
    assert list(both.rank_caches._tables) == [both.active_table("zeta").name]
    for r in (tiny, direct, both):
        r.close()
    sink.close()


# --------------------------------------------------------------------------- a stale copy is never shown


@pytest.fixture
def searchers(tmp_path: Path):
    """The demo index with the real model; a searcher reading the rank columns from the table and
    one holding them in memory (warmed, as the daemon's), and the demo's persona."""
    demo = build_demo_index(tmp_path)
    plain = Searcher(demo.config, embedder=demo.embedder, state=demo.ix.state, rank_cache=False)
    cached = Searcher(demo.config, embedder=demo.embedder, state=demo.ix.state)
    cached.warm_up()
    try:
        yield plain, cached, cached.retriever.personas()[0]
    finally:
        plain.close()
        cached.close()
        demo.close()


def test_a_stale_copy_is_caught_by_the_shown_rows_dropped_and_the_search_answered_from_the_table(
        searchers) -> None:
    plain, cached, persona = searchers
    req = SearchRequest(query="what did we decide about the deploy", persona=persona)
    expected = plain.search(req).as_dict()["results"]
    assert expected and cached.search(req).as_dict()["results"] == expected

    # Corrupt the copy: every row's path (and so its id) shifted by one address.
    table = cached.retriever.active_table(persona)
    caches = cached.retriever.rank_caches
    entry = caches._tables[table.name]
    tbl = table.search().select(list(entry.columns)).with_row_id(True).limit(None).to_arrow()
    for name in ("path", "id"):
        values = tbl.column(name).to_pylist()
        tbl = tbl.set_column(tbl.schema.get_field_index(name), name, pa.array(values[1:] + values[:1]))
    entry.main = _Block.of(tbl, entry.columns)

    assert cached.search(req).as_dict()["results"] == expected  # nothing from the stale copy reached it
    assert table.name not in caches._tables or caches._tables[table.name].main is not entry.main


def test_search_results_with_the_cache_equal_those_without_in_every_scope(searchers) -> None:
    plain, cached, persona = searchers
    sessions = sorted({r["session"] for r in cached.retriever.active_table(persona).search()
                       .select(["session"]).limit(None).to_list() if r["session"]})
    queries = ["JWT expiry", "what did we decide about the deploy", "postgres migration", "birthday"]
    asked = 0
    for q in queries:
        for scope, session in (("persona", None), ("session", sessions[0]), ("project", sessions[-1])):
            for mode in ("hybrid", "vector", "keyword"):
                req = SearchRequest(query=q, persona=persona, scope=scope, session=session, mode=mode,
                                    max_results=10)
                assert cached.search(req).as_dict()["results"] == plain.search(req).as_dict()["results"]
                asked += 1
    assert asked == 36 and cached.retriever.rank_caches.hits > 0
