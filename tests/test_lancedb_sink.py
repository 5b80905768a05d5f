"""LanceDB sink: real LanceDB in tmp dirs; the fake embedder for logic, the real model end to end."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from fake_embedder import FakeEmbedder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporters.base import Exporter, Rebuild, SinkError
from exporters.lancedb import (
    ACTIVE_FILE,
    RESULT_COLUMNS,
    LanceSink,
    open_retriever,
    sql_in,
    sql_str,
    table_name,
)
from exporters.lancedb.rows import document_chunks
from indexer.core.types import DocKind, Document, Source
from tests.builders import document

REPO = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent

os.environ.setdefault("LANCEDB_LOG", "error")


def mkdoc(path: str, body: str, *, persona: str = "atlas", session: str | None = "s1", turn: str = "t1",
          kind: DocKind = DocKind.TURN, source: Source = Source.SESSIONS, ts: int | None = 1_700_000_000_000) -> Document:
    return document(body, path=path, persona=persona, session=session, turn=turn, kind=kind, source=source,
                    title=f"title of {path}", timestamp_ms=ts)


def long_body(n: int, word: str = "apples") -> str:
    return "\n".join(f"User: line {i} talks about {word} and more {word} today" for i in range(n))


@pytest.fixture
def sink(tmp_path: Path) -> LanceSink:
    s = LanceSink(tmp_path / "db", FakeEmbedder(), chunk_max_tokens=24, chunk_overlap=6, retire_grace=timedelta(0))
    yield s
    s.close()


def chunk_counts(sink: LanceSink, persona: str = "atlas") -> dict[str, int]:
    tbl = sink.active_table(persona)
    rows = tbl.search().select(["path", "id"]).limit(None).to_list()
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "duplicate chunk ids"
    out: dict[str, int] = {}
    for r in rows:
        out[r["path"]] = out.get(r["path"], 0) + 1
    return out


# --------------------------------------------------------------------------- protocol, schema


def test_satisfies_the_exporter_protocol(sink: LanceSink) -> None:
    assert isinstance(sink, Exporter)
    assert sink.name == "lancedb"
    rb = sink.rebuild("atlas")
    assert isinstance(rb, Rebuild)
    rb.abort()


def test_schema_and_rows(sink: LanceSink) -> None:
    d = mkdoc("sessions/s1/turns/t1.md", long_body(12))
    sink.upsert("atlas", [d])
    tbl = sink.active_table("atlas")
    names = tbl.schema.names
    for col in RESULT_COLUMNS + ["doc_text", "title", "content_hash", "vector"]:
        assert col in names
    rows = sorted(tbl.search().limit(None).to_list(), key=lambda r: r["chunk_index"])
    assert len(rows) > 1
    assert rows[0]["doc_text"] == d.text and all(r["doc_text"] == "" for r in rows[1:])
    assert rows[0]["id"] == f"{d.path}#0"
    lines = d.text.split("\n")
    for r in rows:
        assert r["start_line"] >= d.body_start_line  # body only: the header is not embedded
        assert r["text"] == "\n".join(lines[r["start_line"] - 1 : r["end_line"]])
        assert (r["session"], r["kind"], r["source"], r["persona"]) == ("s1", "turn", "sessions", "atlas")
        assert abs(np.linalg.norm(np.asarray(r["vector"])) - 1) < 1e-5
    indexed = {tuple(ix.columns): ix.index_type for ix in tbl.list_indices()}
    assert indexed[("text",)] == "FTS"
    assert indexed[("id",)] == indexed[("path",)] == "BTree"
    assert indexed[("session",)] == indexed[("kind",)] == indexed[("source",)] == "Bitmap"


def test_table_names_are_safe_and_distinct() -> None:
    personas = ["atlas", "Atlas", "../../etc", "a'b\"c", "ünïcødé 🙂", "x" * 300, "", " ", "a b", "a-b", "a_b"]
    names = [table_name(p, 1) for p in personas]
    assert len(set(names)) == len(names)
    for n in names:
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", n), n
    assert table_name("atlas", 2) != table_name("atlas", 1)
    assert table_name("atlas", 3) == table_name("atlas", 3)


# --------------------------------------------------------------------------- upsert / delete


def test_upsert_replace_shrink_leaves_no_stale_chunks(sink: LanceSink) -> None:
    p = "sessions/s1/turns/t1.md"
    sink.upsert("atlas", [mkdoc(p, long_body(30)), mkdoc("sessions/s1/turns/t2.md", "User: other")])
    big = chunk_counts(sink)[p]
    assert big >= 5
    sink.upsert("atlas", [mkdoc(p, long_body(30))])  # idempotent
    assert chunk_counts(sink)[p] == big
    sink.upsert("atlas", [mkdoc(p, "User: now it is short")])
    assert chunk_counts(sink) == {p: 1, "sessions/s1/turns/t2.md": 1}
    assert sink.read("atlas", p).endswith("User: now it is short")
    sink.upsert("atlas", [mkdoc(p, long_body(8, "pears"))])  # grows again
    tbl = sink.active_table("atlas")
    assert tbl.count_rows(f"path = {sql_str(p)} AND text LIKE '%apples%'") == 0


def test_batch_is_deduplicated_last_wins(sink: LanceSink) -> None:
    p = "sessions/s1/turns/t1.md"
    sink.upsert("atlas", [mkdoc(p, long_body(20)), mkdoc(p, "User: final version")])
    assert chunk_counts(sink) == {p: 1}
    assert sink.read("atlas", p).endswith("User: final version")


def test_one_commit_per_batch(sink: LanceSink) -> None:
    sink.upsert("atlas", [mkdoc("a.md", "User: a")])
    tbl = sink.active_table("atlas")
    v = tbl.version
    sink.upsert("atlas", [mkdoc(f"d{i}.md", long_body(i % 7 + 1)) for i in range(40)])
    assert tbl.version == v + 1


def test_delete_paths_and_personas(sink: LanceSink) -> None:
    sink.upsert("atlas", [mkdoc("a.md", long_body(20)), mkdoc("b.md", "User: b")])
    sink.upsert("nova", [mkdoc("a.md", "User: nova's a", persona="nova")])
    sink.delete("atlas", ["a.md", "unknown.md"])
    assert sink.paths("atlas") == {"b.md"}
    assert sink.read("atlas", "a.md") is None
    assert sink.paths("nova") == {"a.md"}  # other persona untouched
    sink.delete("ghost", ["a.md"])  # no table: ignored
    sink.delete("atlas", [])
    assert sink.paths("ghost") == set() and sink.read("ghost", "x") is None


def test_persona_mismatch_is_refused(sink: LanceSink) -> None:
    with pytest.raises(SinkError, match="belongs to persona"):
        sink.upsert("atlas", [mkdoc("a.md", "User: x", persona="nova")])


def test_empty_body_document_still_exists(sink: LanceSink) -> None:
    d = mkdoc("e.md", "")
    sink.upsert("atlas", [d])
    assert sink.paths("atlas") == {"e.md"}
    assert sink.read("atlas", "e.md") == d.text


HOSTILE = [
    "it's", "''", "'", "a\\b", "\\'", 'say "hi"', "new\nline", "x' OR '1'='1", "a;--b",
    "100%_x", "ünï 🙂", "nul\x00byte", "  spaced  ", "back`tick", "\\", "E'x'",
]


def test_hostile_labels_and_paths(sink: LanceSink) -> None:
    docs = [mkdoc(f"sessions/{i}/turns/{h}#.md", f"User: body {i}", session=h, turn=h) for i, h in enumerate(HOSTILE)]
    sink.upsert("atlas", docs)
    assert sink.paths("atlas") == {d.path for d in docs}
    tbl = sink.active_table("atlas")
    for d in docs:
        assert sink.read("atlas", d.path) == d.text
        assert tbl.count_rows(f"session = {sql_str(d.session)}") == 1
        assert tbl.count_rows(f"path = {sql_str(d.path)}") == 1
    assert tbl.count_rows(sql_in("session", HOSTILE)) == len(HOSTILE)
    sink.upsert("atlas", docs[:5])  # re-upsert: by-source delete IN list with hostile paths
    assert tbl.count_rows() == len(HOSTILE)
    sink.delete("atlas", [d.path for d in docs[::2]])
    assert sink.paths("atlas") == {d.path for d in docs[1::2]}


@pytest.fixture(scope="module")
def seed_table(tmp_path_factory):
    s = LanceSink(tmp_path_factory.mktemp("rt"), FakeEmbedder())
    s.upsert("p", [mkdoc("seed.md", "User: seed", persona="p", session="seed")])
    return s.active_table("p")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(s=st.text(max_size=40))
def test_sql_str_round_trips(seed_table, s: str) -> None:
    literal = sql_str(s)
    assert literal.startswith("'") and literal.endswith("'")
    assert seed_table.count_rows(f"session = {literal}") == (1 if s == "seed" else 0)
    assert seed_table.count_rows(f"session = {literal} OR session = 'seed'") == 1


def test_sql_str_escaping() -> None:
    assert sql_str("plain") == "'plain'"
    assert sql_str("it's") == "'it''s'"
    assert sql_str("''") == "''''''"
    assert sql_str("a\\b") == "'a\\b'"
    assert sql_str("\ud800") == "'\ufffd'"
    with pytest.raises(TypeError):
        sql_str(None)  # type: ignore[arg-type]
    assert sql_in("path", []) == "false"


# --------------------------------------------------------------------------- search freshness, readers


def test_fts_finds_a_freshly_upserted_row(sink: LanceSink) -> None:
    sink.upsert("atlas", [mkdoc("a.md", "User: the weather is nice")])
    tbl = sink.active_table("atlas")
    sink.upsert("atlas", [mkdoc("b.md", "User: we chose zanzibarite for the cluster")])
    hits = tbl.search("zanzibarite", query_type="fts", fts_columns="text").select(["path"]).limit(5).to_list()
    assert [h["path"] for h in hits] == ["b.md"]
    hits = tbl.search("running", query_type="fts", fts_columns="text").limit(5).to_list()
    assert hits == []


def test_reader_in_another_handle_sees_new_commits(sink: LanceSink) -> None:
    sink.upsert("atlas", [mkdoc("a.md", "User: one")])
    reader = open_retriever(sink.db_dir)
    assert reader.personas() == ["atlas"]
    rt = reader.active_table("atlas")
    assert rt.count_rows() == 1
    sink.upsert("atlas", [mkdoc("b.md", "User: two")])
    assert rt.count_rows() == 2  # same handle, next commit visible (read_consistency_interval=0)
    assert reader.paths("atlas") == {"a.md", "b.md"}
    assert reader.read("atlas", "b.md").endswith("User: two")
    sink.delete("atlas", ["a.md"])
    assert reader.paths("atlas") == {"b.md"}
    assert reader.active_table("nobody") is None
    assert reader.meta("atlas")["fingerprint"] == sink.embedder.fingerprint


# --------------------------------------------------------------------------- rebuild


def test_rebuild_commit_switches_atomically(sink: LanceSink) -> None:
    sink.upsert("atlas", [mkdoc("old1.md", "User: old one"), mkdoc("old2.md", "User: old two")])
    reader = open_retriever(sink.db_dir)
    old_name = reader.meta("atlas")["table"]
    rb = sink.rebuild("atlas")
    rb.upsert([mkdoc("new1.md", long_body(10))])
    rb.upsert([mkdoc("new2.md", "User: new two")])
    # Invisible until commit: search answers from the old table.
    assert sink.paths("atlas") == {"old1.md", "old2.md"}
    assert reader.paths("atlas") == {"old1.md", "old2.md"}
    # A second reader reads all through the commit: every answer is the whole old set or the whole new one.
    # With the shipped grace period: a read still in flight on the old table must find it (grace 0 would
    # drop it under that read — what the grace period is for).
    sink.retire_grace = timedelta(minutes=10)
    racer = open_retriever(sink.db_dir)
    reads: list[tuple[float, float, frozenset[str]]] = []
    stop = threading.Event()

    errors: list[BaseException] = []

    def read_through_the_switch() -> None:
        try:
            while not stop.is_set():
                t0 = time.monotonic()
                got = frozenset(racer.paths("atlas"))
                reads.append((t0, time.monotonic(), got))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=read_through_the_switch)
    thread.start()
    while not reads:
        time.sleep(0.001)
    began = time.monotonic()
    rb.commit()
    ended = time.monotonic()
    time.sleep(0.05)
    stop.set()
    thread.join()
    racer.close()
    assert not errors
    assert {got for _, _, got in reads} == {frozenset({"old1.md", "old2.md"}), frozenset({"new1.md", "new2.md"})}
    assert sum(1 for t0, t1, _ in reads if t0 < ended and t1 > began) > 0  # reads in flight during the commit
    assert sink.paths("atlas") == {"new1.md", "new2.md"}
    assert reader.paths("atlas") == {"new1.md", "new2.md"}
    meta = reader.meta("atlas")
    assert meta["generation"] == 2 and meta["table"] == table_name("atlas", 2)
    assert sink.table_stats("atlas").unindexed_rows == 0  # commit folded the rows into the indexes
    # The old table is retired (kept through the grace period), then dropped (grace 0 from here).
    active = json.loads((sink.db_dir / ACTIVE_FILE).read_text())
    assert old_name not in {e["table"] for e in active["personas"].values()}
    assert (sink.db_dir / f"{old_name}.lance").exists()
    sink.retire_grace = timedelta(0)
    sink.maintain()
    assert not (sink.db_dir / f"{old_name}.lance").exists()
    with pytest.raises(SinkError, match="already committed"):
        rb.upsert([mkdoc("x.md", "User: x")])
    sink.upsert("atlas", [mkdoc("new3.md", "User: after")])  # live writes go to the new table
    assert sink.paths("atlas") == {"new1.md", "new2.md", "new3.md"}


def test_rebuild_abort_keeps_the_old(sink: LanceSink) -> None:
    sink.upsert("atlas", [mkdoc("old.md", "User: old")])
    before = json.loads((sink.db_dir / ACTIVE_FILE).read_text())
    rb = sink.rebuild("atlas")
    rb.upsert([mkdoc("new.md", "User: new")])
    new_dir = sink.db_dir / f"{rb.table_name}.lance"
    assert new_dir.exists()
    rb.abort()
    rb.abort()  # idempotent
    assert not new_dir.exists()
    assert sink.paths("atlas") == {"old.md"}
    assert json.loads((sink.db_dir / ACTIVE_FILE).read_text()) == before

    with pytest.raises(RuntimeError, match="boom"):
        with sink.rebuild("atlas") as rb2:
            rb2.upsert([mkdoc("new.md", "User: new")])
            raise RuntimeError("boom")
    assert sink.paths("atlas") == {"old.md"}
    with sink.rebuild("atlas") as rb3:  # a clean `with` commits
        rb3.upsert([mkdoc("w.md", "User: with")])
    assert sink.paths("atlas") == {"w.md"}


def test_rebuild_of_a_new_persona_and_orphans(tmp_path: Path) -> None:
    db = tmp_path / "db"
    s = LanceSink(db, FakeEmbedder(), retire_grace=timedelta(0))
    rb = s.rebuild("fresh")
    rb.upsert([mkdoc("a.md", "User: a", persona="fresh")])
    # A crash here leaves an orphan table; a new writer cleans it up at maintain().
    orphan = rb.table_name
    s2 = LanceSink(db, FakeEmbedder(), retire_grace=timedelta(0))
    assert s2.paths("fresh") == set()
    s2.maintain()
    assert not (db / f"{orphan}.lance").exists()
    with s2.rebuild("fresh") as rb2:
        rb2.upsert([mkdoc("b.md", "User: b", persona="fresh")])
    assert s2.paths("fresh") == {"b.md"}


def test_model_change_requires_a_rebuild(tmp_path: Path) -> None:
    db = tmp_path / "db"
    LanceSink(db, FakeEmbedder(dim=64)).upsert("atlas", [mkdoc("a.md", "User: a")])
    s = LanceSink(db, FakeEmbedder(dim=32, version="2"), retire_grace=timedelta(0))
    assert "reindex" in (s.needs_rebuild("atlas") or "")
    with pytest.raises(SinkError, match="reindex"):
        s.upsert("atlas", [mkdoc("b.md", "User: b")])
    with s.rebuild("atlas") as rb:
        rb.upsert([mkdoc("a.md", "User: a"), mkdoc("b.md", "User: b")])
    assert s.needs_rebuild("atlas") is None
    assert s.fingerprint != LanceSink(tmp_path / "other", FakeEmbedder(dim=64)).fingerprint
    s.upsert("atlas", [mkdoc("c.md", "User: c")])
    assert s.index_meta("atlas")["dim"] == 32
    assert s.active_table("atlas").schema.field("vector").type.list_size == 32


# --------------------------------------------------------------------------- maintenance, stats, crashes


def test_auto_optimize_and_maintain(tmp_path: Path) -> None:
    s = LanceSink(tmp_path / "db", FakeEmbedder(), optimize_every=5)
    for i in range(12):
        s.upsert("atlas", [mkdoc(f"d{i}.md", f"User: doc {i}")])
    assert s.optimizations >= 2
    st = s.table_stats("atlas")
    assert st.documents == 12 and st.chunks == 12 and st.fragments <= 5
    done = s.maintain()
    assert done["optimized"] == [st.table]
    st = s.table_stats("atlas")
    # fragments folded under different index segments stay apart until the segments merge
    # (exporters/lancedb/compaction.py): 12 one-row commits leave a few, not one per commit
    assert st.unindexed_rows == 0 and st.fragments <= 4 and st.version is not None
    assert st.as_dict()["persona"] == "atlas"
    assert s.maintain()["optimized"] == []  # nothing changed since: nothing to do
    assert s.maintain(force=True)["optimized"] == [st.table]
    empty = s.table_stats("nobody")
    assert empty.chunks == 0 and empty.table is None
    assert s.stats("nobody")["chunks"] == 0


def test_maintenance_drops_cached_vectors_of_an_earlier_model(tmp_path: Path) -> None:
    """After a model upgrade (a new fingerprint), the old model's cached vectors are never read
    again: maintenance deletes them and keeps the current model's."""
    from indexer.embedding.cache import CachedEmbedder

    cache = tmp_path / "embed_cache.sqlite"
    old = CachedEmbedder(FakeEmbedder(version="1"), cache)
    s = LanceSink(tmp_path / "db", old)
    s.upsert("atlas", [mkdoc(f"d{i}.md", f"User: old model doc {i}") for i in range(6)])
    assert s.maintain()["embed_cache_pruned"] == 0  # nothing of another model yet
    s.close()
    old.close()

    new = CachedEmbedder(FakeEmbedder(version="2"), cache)
    s = LanceSink(tmp_path / "db", new)
    s.upsert("zeta", [mkdoc("n.md", "User: new model doc", persona="zeta")])  # (atlas: rebuilt by the engine)
    assert (new.entries(), new.entries(new.fingerprint)) == (7, 1)
    assert s.maintain()["embed_cache_pruned"] == 6
    assert (new.entries(), new.entries(new.fingerprint)) == (1, 1)
    assert s.maintain()["embed_cache_pruned"] == 0
    s.close()
    new.close()


def test_maintenance_goes_on_when_the_embedding_cache_fails(tmp_path: Path) -> None:
    class BrokenCache(FakeEmbedder):
        def prune_other_models(self) -> int:
            raise OSError("disk I/O error")

    s = LanceSink(tmp_path / "db", BrokenCache())
    s.upsert("atlas", [mkdoc("a.md", "User: a")])
    done = s.maintain()
    assert done["embed_cache_pruned"] == 0 and done["optimized"] == [s.index_meta("atlas")["table"]]


def test_stale_tmp_files_are_swept_at_open(tmp_path: Path) -> None:
    db = tmp_path / "db"
    s = LanceSink(db, FakeEmbedder())
    s.upsert("atlas", [mkdoc("a.md", "User: a")])
    data = db / f"{s.index_meta('atlas')['table']}.lance" / "data"
    old, fresh = data / ".tmpOLD123", data / ".tmpNEW456"
    old.write_bytes(b"x" * 1000)
    fresh.write_bytes(b"y")
    past = time.time() - 3600
    os.utime(old, (past, past))
    LanceSink(db, FakeEmbedder())
    assert not old.exists() and fresh.exists()


N_CRASH_DOCS = 1500


def crash_batch(rnd: int) -> list[Document]:
    return [mkdoc(f"d{i}.md", long_body(2 + (i * 7 + rnd * 5) % 23, f"w{rnd}")) for i in range(N_CRASH_DOCS)]


CHILD = textwrap.dedent(
    """
    import os, sys
    sys.path[:0] = [{repo!r}, {tests!r}]
    os.environ["LANCEDB_LOG"] = "error"
    from fake_embedder import FakeEmbedder
    from test_lancedb_sink import crash_batch
    from exporters.lancedb import LanceSink
    from exporters.lancedb.rows import document_rows
    s = LanceSink({db!r}, FakeEmbedder(), chunk_max_tokens=24, chunk_overlap=6, optimize_every=10**9,
                  small_fragment_limit=10**9)
    sets = [document_rows("atlas", crash_batch(r), s.embedder, s.chunk_settings) for r in (0, 1)]
    tbl = s._live("atlas", create=True)
    rnd = 0
    while True:
        rows, paths = sets[rnd % 2]
        print("merging", rnd, flush=True)
        s._merge(tbl, rows, paths, "atlas")
        print("merged", rnd, flush=True)
        rnd += 1
    """
)


def test_sigkill_mid_upsert_leaves_a_readable_table_and_rerun_converges(tmp_path: Path) -> None:
    db = tmp_path / "db"
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(repo=str(REPO), tests=str(TESTS), db=str(db)))
    probe = LanceSink(tmp_path / "probe", FakeEmbedder(), chunk_max_tokens=24, chunk_overlap=6)
    versions = [{d.path: len(document_chunks(d, probe.embedder, probe.chunk_settings)) for d in crash_batch(r)} for r in (0, 1)]
    assert versions[0] != versions[1]
    killed_mid_merge = 0
    for delay in (0.0, 0.02, 0.05):
        proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            lines: list[str] = []
            while not any(ln.startswith("merged") for ln in lines) or not lines[-1].startswith("merging"):
                out = proc.stdout.readline()
                assert out, proc.stderr.read()
                lines.append(out)
            time.sleep(delay)
            os.kill(proc.pid, signal.SIGKILL)
            rest = proc.stdout.read()
        finally:
            proc.wait(timeout=30)
        last = lines[-1].split()[1]
        if f"merged {last}" not in rest:
            killed_mid_merge += 1
        # Readable at a committed version; every document whole: all of its chunks from one batch
        # (a batch commits per 500 documents, so the table may mix batches, documents never do).
        s = LanceSink(db, FakeEmbedder(), chunk_max_tokens=24, chunk_overlap=6)
        tbl = s.active_table("atlas")
        counts = chunk_counts(s)
        assert set(counts) == set(versions[0])
        rounds: dict[str, set[str]] = {}
        for r in tbl.search().select(["path", "text"]).limit(None).to_list():
            rounds.setdefault(r["path"], set()).update(re.findall(r"\bw[01]\b", r["text"]))
        for path, n in counts.items():
            [rnd] = rounds[path]
            assert n == versions[int(rnd[1])][path], f"{path} is half-applied"
        assert tbl.search("line", query_type="fts", fts_columns="text").limit(3).to_list()
        assert tbl.search(np.ones(64, dtype=np.float32) / 8).limit(3).select(["id"]).to_list()
        assert tbl.count_rows("chunk_index = 0 AND doc_text = ''") == 0
        s.close()
    assert killed_mid_merge >= 1, "no kill landed inside a merge; make the batch bigger"
    # Replaying a batch converges: exactly the chunks of the new version, nothing stale.
    s = LanceSink(db, FakeEmbedder(), chunk_max_tokens=24, chunk_overlap=6)
    final = [mkdoc(f"d{i}.md", long_body(1 + i % 9, "final")) for i in range(N_CRASH_DOCS)]
    s.upsert("atlas", final)
    s.upsert("atlas", final)
    assert chunk_counts(s) == {d.path: len(document_chunks(d, s.embedder, s.chunk_settings)) for d in final}
    assert s.active_table("atlas").count_rows("text NOT LIKE '%final%'") == 0
    s.maintain()
    assert chunk_counts(s) == {d.path: len(document_chunks(d, s.embedder, s.chunk_settings)) for d in final}


# --------------------------------------------------------------------------- real model end to end


def test_real_model_end_to_end(tmp_path: Path) -> None:
    from lancedb.rerankers import RRFReranker

    from indexer.embedding.cache import CachedEmbedder
    from indexer.embedding.embedder import FastEmbedder

    inner = FastEmbedder()
    emb = CachedEmbedder(inner, tmp_path / "embed-cache.sqlite")
    s = LanceSink(tmp_path / "db", emb)
    docs = [
        mkdoc("t1.md", "User: Which database should the billing service use?\n"
                       "Assistant: We decided on PostgreSQL 16 with logical replication.", session="dev"),
        mkdoc("t2.md", "User: Any plans for the weekend?\nAssistant: Hiking in the mountains if the weather holds.",
              session="chat"),
        mkdoc("t3.md", "User: The deploy failed again.\nAssistant: The Kubernetes rollout timed out on readiness probes.",
              session="dev"),
    ]
    # Same body in a forked session: embedded once.
    fork = mkdoc("fork/t1.md", docs[0].body, session="dev-fork")
    s.upsert("atlas", docs + [fork])
    assert emb.misses == 3 and emb.hits == 1
    calls = inner.calls
    s.upsert("atlas", docs)  # re-sync of unchanged text: no model call
    assert inner.calls == calls

    tbl = s.active_table("atlas")
    q = emb.embed_query("what data store did we pick for invoices?")
    hits = tbl.search(q).distance_type("cosine").select(["path", "_distance"]).limit(2).to_list()
    assert hits[0]["path"] in {"t1.md", "fork/t1.md"}
    hits = (
        tbl.search(query_type="hybrid", fts_columns="text")
        .vector(emb.embed_query("kubernetes rollout problem"))
        .text("kubernetes rollout")
        .where(f"session = {sql_str('dev')}", prefilter=True)
        .rerank(RRFReranker())
        .select(["path", "session"])
        .limit(3)
        .to_list()
    )
    assert hits[0]["path"] == "t3.md" and {h["session"] for h in hits} == {"dev"}
    assert s.index_meta("atlas")["dim"] == 384


def test_a_build_killed_before_its_switch_is_dropped_when_the_sink_opens(tmp_path: Path) -> None:
    first = LanceSink(tmp_path / "db", FakeEmbedder())
    first.upsert("atlas", [mkdoc("sessions/s1/turns/t1.md", "the live document")])
    live = set(first._table_names())
    build = first.rebuild("atlas")
    build.upsert([mkdoc("sessions/s1/turns/t2.md", "written by a build that never switches")])
    orphan = set(first._table_names()) - live
    assert len(orphan) == 1  # a real new table generation on disk
    # The process dies here: no commit, no abort. The next writer opens the sink.
    again = LanceSink(tmp_path / "db", FakeEmbedder())
    assert set(again._table_names()) == live
    assert again.paths("atlas") == {"sessions/s1/turns/t1.md"}
    assert not (tmp_path / "db" / f"{orphan.pop()}.lance").exists()
