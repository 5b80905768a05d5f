"""The vector index (issue 12): built by maintenance past a row threshold, kept fresh,
queried per filter (index for broad filters, exact for selective ones), never outside
the filter, always with exact cosine distances. Real LanceDB in tmp dirs; the fake
embedder for the routing logic, the real model where the results must equal exact search."""

from __future__ import annotations

import dataclasses
import json
import random
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from fake_embedder import FakeEmbedder

from exporters.lancedb import ACTIVE_FILE, LanceSink, Retriever
from exporters.lancedb import retriever as retriever_mod
from exporters.lancedb import schema as schema_mod
from exporters.lancedb.retriever import Where
from indexer.core.scopes import Scope, ScopeFacts, resolve
from tests.builders import document

WORDS = ("apples pears rockets kernels deploys invoices hiking postgres kafka budgets yoga guitars "
         "painting migrations tokens latency gardens recipes camping taxes").split()


def turn(i: int, session: str, words: list[str] | None = None, persona: str = "atlas"):
    rng = random.Random(i)
    ws = words or rng.sample(WORDS, 3)
    body = f"User: note {i} about {' and '.join(ws)}\nAssistant: noted {ws[0]} {i}"
    return document(body, persona=persona, session=session, turn=f"t{i}", timestamp_ms=1_700_000_000_000 + i)


def corpus(n: int, sessions: int = 10, start: int = 0):
    return [turn(i, f"s{i % sessions}") for i in range(start, start + n)]


def make_sink(tmp_path: Path, embedder=None, rows: int | None = 300) -> LanceSink:
    return LanceSink(tmp_path / "db", embedder or FakeEmbedder(), vector_index_rows=rows,
                     retire_grace=timedelta(0))


def pointer(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "db" / ACTIVE_FILE).read_text())


def scope_where(scope: Scope = Scope.PERSONA, session: str | None = None, private=(), sources=("sessions", "memory")):
    facts = ScopeFacts(private=frozenset(private), deleted=frozenset(), project_peers=frozenset())
    return Retriever.where(resolve("atlas", scope, session, frozenset(sources), facts))


def exact(table, vector, where: Where, limit: int, columns=("id", "session")) -> list[dict]:
    return (table.search(vector, vector_column_name="vector").distance_type("cosine")
            .where(where.sql, prefilter=True).select([*columns, "_distance"]).limit(limit)
            .bypass_vector_index().to_list())


# --------------------------------------------------------------------------- building and freshness


def test_the_index_is_built_past_the_threshold_and_not_below(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, rows=300)
    sink.upsert("atlas", corpus(250))
    done = sink.maintain()
    assert done["vector_index"] == {}
    st = sink.table_stats("atlas")
    assert st.vector_index is None and st.vector_partitions is None and st.vector_indexed_rows == 0
    assert "vector_index" not in pointer(tmp_path)["personas"]["atlas"]
    assert sink.maintain()["vector_index"] == {}  # still below: nothing to do

    sink.upsert("atlas", corpus(100, start=250))  # 350 rows: past the threshold
    st = sink.table_stats("atlas")
    assert st.vector_index is None  # a write never builds it: maintenance does
    done = sink.maintain()
    built = done["vector_index"][st.table]
    assert built["reason"] == "create" and built["trained_rows"] == 350 and built["partitions"] >= 1
    st = sink.table_stats("atlas")
    assert st.vector_index == "IVF_SQ" and st.vector_partitions == built["partitions"]
    assert st.vector_trained_rows == 350 and st.vector_indexed_rows == 350 and st.vector_unindexed_rows == 0
    assert st.vector_index_segments == 1
    assert sink.stats("atlas")["vector_index"] == "IVF_SQ"
    assert pointer(tmp_path)["personas"]["atlas"]["vector_index"]["partitions"] == built["partitions"]
    assert sink.maintain()["vector_index"] == {}  # up to date: not built again
    sink.close()


def test_disabled_threshold_never_builds(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, rows=None)
    sink.upsert("atlas", corpus(120))
    assert sink.maintain(force=True)["vector_index"] == {}
    assert sink.table_stats("atlas").vector_index is None
    sink.close()


def test_new_rows_are_found_before_maintenance_and_folded_in_by_it(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, rows=200)
    sink.upsert("atlas", corpus(300))
    sink.maintain()
    assert sink.table_stats("atlas").vector_index == "IVF_SQ"
    new = turn(10_000, "s-new", words=["zeppelin", "quasar", "marmalade"])
    sink.upsert("atlas", [new])
    st = sink.table_stats("atlas")
    assert st.vector_unindexed_rows == 1 and st.vector_indexed_rows == 300

    retriever = Retriever(tmp_path / "db")
    table = retriever.active_table("atlas")
    where = scope_where()
    assert retriever.vector_route(table, where) is not None  # the whole table: the index route
    q = FakeEmbedder().embed_query("zeppelin quasar marmalade")
    hits = retriever.nearest(table, q, where, 5, retriever.columns(table))
    assert hits[0]["path"] == new.path  # searched exactly beside the index until folded in

    done = sink.maintain()
    assert done["optimized"] and not done["vector_index"]  # folded in, not re-trained
    st = sink.table_stats("atlas")
    assert st.vector_unindexed_rows == 0 and st.vector_indexed_rows == 301
    hits = retriever.nearest(table, q, where, 5, retriever.columns(table))
    assert hits[0]["path"] == new.path
    retriever.close()
    sink.close()


def test_the_index_is_retrained_when_the_table_doubled(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, rows=150)
    sink.upsert("atlas", corpus(160))
    assert sink.maintain()["vector_index"]
    sink.upsert("atlas", corpus(170, start=160))  # 330 rows >= 2 x 160
    done = sink.maintain()
    (built,) = done["vector_index"].values()
    assert built["reason"] == "grown" and built["trained_rows"] == 330
    assert pointer(tmp_path)["personas"]["atlas"]["vector_index"]["trained_rows"] == 330
    st = sink.table_stats("atlas")
    assert st.vector_indexed_rows == 330 and st.vector_index_segments == 1
    sink.close()


def test_the_index_is_retrained_when_folded_segments_pile_up(tmp_path: Path, monkeypatch) -> None:
    import exporters.lancedb.vector_maint as sink_mod  # where the sink decides a re-train

    monkeypatch.setattr(sink_mod, "RETRAIN_SEGMENTS", 3)
    sink = make_sink(tmp_path, rows=100)
    sink.upsert("atlas", corpus(200))
    sink.maintain()
    for k in range(2):  # each maintenance folds the new rows in as one more segment
        sink.upsert("atlas", corpus(5, start=200 + 5 * k))
        assert sink.maintain()["vector_index"] == {}
    assert sink.table_stats("atlas").vector_index_segments == 3
    sink.upsert("atlas", corpus(5, start=210))
    (built,) = sink.maintain()["vector_index"].values()
    assert built["reason"] == "segments" and built["trained_rows"] == 215
    st = sink.table_stats("atlas")
    assert st.vector_index_segments == 1 and st.vector_indexed_rows == 215
    sink.close()


def test_an_index_the_pointer_does_not_record_is_retrained(tmp_path: Path) -> None:
    """A crash between the build and the pointer write: readers would not use the index
    (no partition count), so maintenance trains it again and records it."""
    sink = make_sink(tmp_path, rows=100)
    sink.upsert("atlas", corpus(150))
    sink.maintain()
    data = pointer(tmp_path)
    del data["personas"]["atlas"]["vector_index"]
    (tmp_path / "db" / ACTIVE_FILE).write_text(json.dumps(data))
    retriever = Retriever(tmp_path / "db")
    table = retriever.active_table("atlas")
    assert retriever.vector_route(table, scope_where()) is None  # unrecorded: searched exactly
    sink2 = make_sink(tmp_path, rows=100)
    (built,) = sink2.maintain()["vector_index"].values()
    assert built["reason"] == "unrecorded"
    assert retriever.vector_route(table, scope_where()) is not None
    retriever.close()
    sink.close()
    sink2.close()


def test_a_rebuild_goes_live_with_its_index(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, rows=100)
    sink.upsert("atlas", corpus(20))
    with sink.rebuild("atlas") as rb:
        rb.upsert(corpus(140))
    entry = pointer(tmp_path)["personas"]["atlas"]
    assert entry["table"] == rb.table_name and entry["vector_index"]["trained_rows"] == 140
    st = sink.table_stats("atlas")
    assert st.vector_index == "IVF_SQ" and st.vector_unindexed_rows == 0
    with sink.rebuild("atlas") as rb2:  # a small rebuild: no index
        rb2.upsert(corpus(30))
    assert "vector_index" not in pointer(tmp_path)["personas"]["atlas"]
    assert sink.table_stats("atlas").vector_index is None
    sink.close()


# --------------------------------------------------------------------------- queries


def test_a_one_session_filter_is_read_whole_and_ranked_exactly(indexed, monkeypatch) -> None:
    """A session's 50 rows, 200 asked for: read whole (no nearest-neighbour query), ranked by the
    exact cosine distance — the rows and distances of exact search, with and without the rank
    columns in memory, and inside a time window too. Asked for fewer rows than the session holds,
    the read overflows once, is remembered, and the filter is searched as any other."""
    import lancedb.query as lq

    sink, _, table = indexed
    knn = []
    original = lq.AsyncQuery.nearest_to
    monkeypatch.setattr(lq.AsyncQuery, "nearest_to", lambda self, *a, **k: knn.append(1) or original(self, *a, **k))
    emb = FakeEmbedder()
    session = scope_where(Scope.SESSION, "s3")
    assert session.few and scope_where(Scope.PROJECT, "s3").few  # a session in no project: itself only
    assert not scope_where().few and not scope_where(private={"s3"}).few
    window = Retriever.within(session, [(1_700_000_000_000, 1_700_000_000_300)])
    assert window.few
    for cache in (0, 1 << 20):
        retriever = Retriever(sink.db_dir, rank_cache_bytes=cache)
        table = retriever.active_table("atlas")
        if cache:
            assert retriever.warm("atlas")
        cols = retriever.rank_columns(table)
        for text in ("rockets and budgets", "yoga gardens", "note 17 about kafka"):
            q = emb.embed_query(text)
            for where, n in ((session, 50), (window, 25)):
                want = {r["id"]: r["_distance"] for r in exact(table, q, where, 200)}
                knn.clear()
                got = retriever.nearest(table, q, where, 200, cols)
                assert knn == []  # no nearest-neighbour query
                assert len(got) == len(want) == n and {r["session"] for r in got} == {"s3"}
                assert {r["id"] for r in got} == set(want)
                assert all(abs(r["_distance"] - want[r["id"]]) < 1e-6 for r in got)
                assert [r["_distance"] for r in got] == sorted(r["_distance"] for r in got)
        assert retriever.whole_reads == 6 and retriever.whole_overflows == 0
        # 40 asked of 50 rows: the read overflows, then the nearest-neighbour query answers
        q = emb.embed_query("rockets and budgets")
        want40 = [r["id"] for r in exact(table, q, session, 40)]
        for _ in range(2):
            knn.clear()
            got = retriever.nearest(table, q, session, 40, cols)
            assert len(knn) == 1 and [r["id"] for r in got] == want40
        assert retriever.whole_overflows == 1  # remembered: the second query did not read it whole
        retriever.close()


def test_where_is_typed_and_whole_only_for_the_unrestricted_persona_scope() -> None:
    assert scope_where().whole
    assert not scope_where(private={"s3"}).whole
    assert not scope_where(Scope.SESSION, "s1").whole
    assert not scope_where(sources=("sessions",)).whole
    w = Retriever.within(scope_where(), [(1, 5)])
    assert isinstance(w, Where) and not w.whole and "timestamp_ms >= 1" in w.sql
    assert Retriever.within(scope_where(), []) == scope_where()
    assert str(scope_where()) == scope_where().sql


@pytest.fixture
def indexed(tmp_path: Path, monkeypatch):
    """600 rows in 12 sessions, an index of 12 partitions (50 rows each)."""
    monkeypatch.setattr(schema_mod, "ROWS_PER_PARTITION", 50)
    sink = make_sink(tmp_path, rows=100)
    sink.upsert("atlas", corpus(600, sessions=12))
    sink.maintain()
    assert sink.table_stats("atlas").vector_partitions == 12
    retriever = Retriever(tmp_path / "db")
    yield sink, retriever, retriever.active_table("atlas")
    retriever.close()
    sink.close()


def test_selective_filters_are_searched_exactly_unless_every_partition_is_probed(indexed, monkeypatch) -> None:
    _, retriever, table = indexed
    q = FakeEmbedder().embed_query("rockets and budgets")
    session = dataclasses.replace(scope_where(Scope.SESSION, "s3"), few=False)  # not read whole: routed
    want = [r["id"] for r in exact(table, q, session, 200)]
    # 12 partitions, all probed: the quantised scan sees every row of the session, then re-scores them,
    # and the answer is complete without counting the rows that pass
    assert retriever.vector_route(table, session) == 12
    counted = []
    retriever.count = lambda *args: counted.append(args) or 10**9  # the instance's own, removed below
    got = retriever.nearest(table, q, session, 200, retriever.columns(table))
    del retriever.count
    assert counted == []
    assert len(got) == 50 and {r["session"] for r in got} == {"s3"}  # every row there is, none outside
    assert [r["id"] for r in got] == want
    # Probing fewer than all: 50 rows <= FLAT_MAX_ROWS, searched exactly
    monkeypatch.setattr(retriever_mod, "vector_nprobes", lambda partitions: 6)
    assert retriever.vector_route(table, session) is None
    assert retriever.vector_route(table, scope_where()) == 6  # the whole table still through the index
    got = retriever.nearest(table, q, session, 200, retriever.columns(table))
    assert [r["id"] for r in got] == want


def test_the_index_never_returns_rows_outside_the_filter_nor_fewer_than_exist(indexed, monkeypatch) -> None:
    """Forced through the index (FLAT_MAX_ROWS 0) and probing 1 of 12 partitions: a private
    session's exclusion and a one-session filter still return only rows that pass, and never
    fewer than exist (the probed partition holds too few: answered exactly)."""
    _, retriever, table = indexed
    monkeypatch.setattr(retriever_mod, "FLAT_MAX_ROWS", 0)
    monkeypatch.setattr(schema_mod, "MIN_NPROBES", 1)
    monkeypatch.setattr(retriever_mod, "vector_nprobes", lambda partitions: 1)
    cols = retriever.columns(table)
    emb = FakeEmbedder()
    for text in ("rockets and budgets", "yoga gardens", "note 17 about kafka"):
        q = emb.embed_query(text)
        private = scope_where(private={"s3", "s7"})
        assert retriever.vector_route(table, private) == 1
        got = retriever.nearest(table, q, private, 40, cols)
        assert len(got) == 40 and not {r["session"] for r in got} & {"s3", "s7"}
        session = dataclasses.replace(scope_where(Scope.SESSION, "s5"), few=False)  # through the index
        got = retriever.nearest(table, q, session, 200, cols)
        assert len(got) == 50 and {r["session"] for r in got} == {"s5"}
        assert {r["id"] for r in got} == {r["id"] for r in exact(table, q, session, 200)}


def test_broad_filters_use_the_index_with_exact_distances(indexed, monkeypatch) -> None:
    """Whole table and a private-session exclusion through the index (every partition
    probed: 12 <= MIN_NPROBES): the same top-k as exact search, exact cosine distances."""
    _, retriever, table = indexed
    monkeypatch.setattr(retriever_mod, "FLAT_MAX_ROWS", 0)
    cols = retriever.columns(table)
    emb = FakeEmbedder()
    for where in (scope_where(), scope_where(private={"s3"})):
        assert retriever.vector_route(table, where) == 12
        for text in ("rockets and budgets", "yoga gardens camping", "invoices postgres"):
            q = emb.embed_query(text)
            got = retriever.nearest(table, q, where, 20, cols)
            want = exact(table, q, where, 20)
            assert len(got) == 20
            if not where.whole:
                assert "s3" not in {r["session"] for r in got}
            assert np.allclose([r["_distance"] for r in got], [r["_distance"] for r in want], atol=1e-5)
            assert {r["id"] for r in got if r["_distance"] < want[-1]["_distance"] - 1e-6} <= {r["id"] for r in want}
    retriever.use_vector_index = False
    assert retriever.vector_route(table, scope_where()) is None


def test_a_filter_every_row_passes_is_not_sent_and_changes_nothing(indexed, monkeypatch) -> None:
    """The unrestricted persona scope's filter admits every row: LanceDB would evaluate it on
    every row for nothing, so it is not sent (vector and full-text stages); the rows and
    scores are the same as with it sent. Any other filter is sent."""
    import lancedb.query as lq

    _, retriever, table = indexed
    sent = []
    original = lq.AsyncStandardQuery.where  # the queries the search path awaits (exporters.lancedb.direct)

    def spy(self, where, *args, **kwargs):
        sent.append(where)
        return original(self, where, *args, **kwargs)

    monkeypatch.setattr(lq.AsyncStandardQuery, "where", spy)
    cols = retriever.columns(table)
    q = FakeEmbedder().embed_query("rockets and budgets")
    whole = scope_where()
    assert whole.whole
    as_sent = Where(whole.sql)  # the same SQL, sent
    for route in (True, False):  # through the index and exactly
        retriever.use_vector_index = route
        sent.clear()
        got = retriever.nearest(table, q, whole, 30, cols)
        assert sent == []
        want = retriever.nearest(table, q, as_sent, 30, cols)
        assert sent == [whole.sql]
        assert [(r["id"], r["_distance"]) for r in got] == [(r["id"], r["_distance"]) for r in want]
    sent.clear()
    hits, vectors = retriever.matching(table, "rockets budgets", whole, 50, cols, with_vectors=True)
    assert sent == []
    hits2, vectors2 = retriever.matching(table, "rockets budgets", as_sent, 50, cols, with_vectors=True)
    assert sent == [whole.sql]
    assert [(r["id"], r["_score"]) for r in hits] == [(r["id"], r["_score"]) for r in hits2] and len(hits) == 50
    assert np.array_equal(vectors, vectors2)
    private = scope_where(private={"s3"})
    sent.clear()
    got = retriever.nearest(table, q, private, 30, cols)
    assert sent == [private.sql] and "s3" not in {r["session"] for r in got}


def test_indexed_search_equals_exact_search_with_the_real_model(tmp_path: Path, monkeypatch) -> None:
    """Real MiniLM vectors, 400 chunks, an index of 8 partitions: with the shipped probe policy
    (every partition while there are at most MIN_NPROBES) the vector stage returns exact search's
    top 10, in order, with its distances."""
    from indexer.embedding.embedder import FastEmbedder

    monkeypatch.setattr(schema_mod, "ROWS_PER_PARTITION", 50)
    subjects = ["the billing service", "our Kubernetes cluster", "the weekend hike", "Grandma's apple pie",
                "the quarterly tax filing", "my guitar lessons", "the Kafka consumer lag", "the garden beds",
                "the flight to Lisbon", "the React dashboard"]
    verbs = ["needs a fix for", "was discussed together with", "depends on", "reminded me of", "is blocked by"]
    objects = ["the database migration", "a broken readiness probe", "rainy weather", "too much sugar",
               "missing receipts", "a new chord progression", "slow disk writes", "tomato seedlings"]
    rng = random.Random(7)
    docs = []
    for i in range(400):
        body = f"User: {rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}?\n" \
               f"Assistant: Yes, {rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}."
        docs.append(document(body, session=f"s{i % 8}", turn=f"t{i}"))
    emb = FastEmbedder()
    sink = make_sink(tmp_path, emb, rows=100)
    sink.upsert("atlas", docs)
    sink.maintain()
    assert sink.table_stats("atlas").vector_partitions == 8
    retriever = Retriever(tmp_path / "db")
    table = retriever.active_table("atlas")
    where = scope_where()
    assert retriever.vector_route(table, where) == 8
    for text in ("what went wrong with the deploy?", "which dessert did we bake", "taxes and receipts",
                 "music practice", "trip to Portugal", "consumer lag in the pipeline"):
        q = np.asarray(emb.embed_query(text), dtype=np.float32)
        got = retriever.nearest(table, q, where, 10, retriever.columns(table))
        want = exact(table, q, where, 10)
        assert [r["id"] for r in got] == [r["id"] for r in want]
        assert np.allclose([r["_distance"] for r in got], [r["_distance"] for r in want], atol=1e-5)
    retriever.close()
    sink.close()


# --------------------------------------------------------------------------- columns


def test_rank_columns_then_details_for_the_results(indexed) -> None:
    sink, retriever, table = indexed
    rank = retriever.rank_columns(table)
    assert "text" not in rank and {"id", "path", "session", "source", "persona", "turn_seq"} <= set(rank)
    q = FakeEmbedder().embed_query("rockets and budgets")
    for rows in (retriever.nearest(table, q, scope_where(), 30, rank),
                 retriever.matching(table, "rockets budgets", scope_where(), 30, rank)[0]):
        assert rows and all("text" not in r and "_rowid" in r for r in rows)
        chosen = rows[:5]
        full = retriever.details(table, chosen)
        assert len(full) == 5
        for r in full:
            doc = {x["id"]: x for x in table.search().where(f"id = '{r['id']}'")
                   .select(retriever.columns(table)).limit(1).to_list()}[r["id"]]
            assert {c: r[c] for c in doc} == doc
    rows = retriever.nearest(table, q, scope_where(), 5, rank)
    gone = rows[0]["path"]
    sink.delete("atlas", [gone])
    for r in rows:
        r.pop("_rowid")  # by key
    assert [r["path"] for r in retriever.details(table, rows)] == [r["path"] for r in rows[1:]]
