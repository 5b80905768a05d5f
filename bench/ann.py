"""The vector index (issue 12): persona-scope search with and without it, recall, crossover.

Corpus: the latency benchmark's (``bench/latency.py``: turns of two real LoCoMo lines
drawn from a pool of 2,000, a chunk's vector normalize(v(a) + v(b) + noise) from the
pool's real MiniLM vectors, 100 turns per session, one persona, LoCoMo questions
embedded by the real model at query time), at 10k / 100k / 300k / 1M chunks. Each
table is built once, *without* a vector index, and cached under
``bench/out/ann-index/<size>-<key>/`` (1M: ~30 min to build, ~2.5 GB); the first
1,000 turns go through ``LanceSink.upsert``, the rest are appended as the same rows
(``document_rows``), then ``maintain(force=True)``.

Per size, on a scratch copy of the cached table (deleted afterwards):

- the index build: ``LanceSink.maintain()`` with the threshold at 1 row (so every size
  gets one, for the comparison); its time and the disk use before and after;
- hybrid ``memory_search`` p50/p95 in-process through the real ``Searcher`` (query
  embedding included, ``max_results=6``), persona scope and session scope, each with the
  index and without it (``Retriever.use_vector_index = False``: every vector query an
  exact scan, as before issue 12), the four variants taking turns query by query;
- the vector stage alone (``Retriever.nearest``, 200 candidates as the searcher asks):
  recall@10 and recall@200 of the index route against the exact scan
  (``bypass_vector_index``) over >= 100 questions, its latency both ways, and a
  persona scope excluding 3 private sessions through the index (rows outside the filter
  must be 0); the same stage with the rank columns only plus ``details`` for 6 results
  (the two-phase fetch the searcher could use);
- maintenance: 1,000 new turns upserted, found before maintenance (searched exactly
  beside the index), then ``maintain()`` (optimize folds them in) timed.

And the crossover: the vector stage (whole-table filter, 200 candidates) exact vs
indexed on tables of the first 5k .. 100k rows of the 100k corpus.

    python -m bench.ann [--quick] [--sizes 10k,100k,300k,1M] [--queries 100] [--recall-queries 100]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.common import (
    OUT,
    Timer,
    file_lock,
    fmt_s,
    loadavg,
    log,
    md_table,
    percentile,
    sha256_file,
    sha256_json,
    write_outputs,
)
from bench.latency import (
    LOCOMO_PATH,
    MAX_RESULTS,
    NOISE,
    PERSONA,
    POOL_SIZE,
    TURNS_PER_SESSION,
    PoolEmbedder,
    corpus_config,
    locomo_lines,
    locomo_questions,
    make_docs,
    pool_texts,
    real_embedder,
    register_corpus,
    requests_for,
    session_labels,
)

NAME = "ann"
CORPUS_VERSION = "ann-corpus-v1"
SIZES = {"10k": 10_000, "100k": 100_000, "300k": 300_000, "1M": 1_000_000}
#: Queries without the index at a size, at most (an exact scan of 1M rows takes seconds).
FLAT_QUERY_CAP = {"300k": 60, "1M": 25}
UPSERT_DOCS = 1000
APPEND_DOCS = 10_000
NEW_TURNS = 1000
PRIVATE = 3
CROSSOVER_ROWS = (1_000, 2_500, 5_000, 10_000, 20_000, 35_000, 50_000, 75_000, 100_000)
CACHE = OUT / "ann-index"


def _no_facts():
    from indexer.core.scopes import ScopeFacts

    return ScopeFacts(private=frozenset(), deleted=frozenset(), project_peers=frozenset())


# -- corpus -----------------------------------------------------------------------------------------


def build_corpus(size_name: str, n_turns: int, real, pool: Sequence[str], pool_vecs: np.ndarray) -> dict:
    """The table of ``n_turns`` turns (the latency corpus, larger), built once through the real
    :class:`LanceSink` *without* a vector index and cached under ``bench/out/ann-index/``."""
    with file_lock(CACHE / f".lock-{size_name}"):
        return _build_corpus(size_name, n_turns, real, pool, pool_vecs)


def _build_corpus(size_name: str, n_turns: int, real, pool: Sequence[str], pool_vecs: np.ndarray) -> dict:
    from exporters.lancedb import LanceSink
    from exporters.lancedb.rows import document_rows
    from indexer.core.build import DOCUMENT_FORMAT_VERSION
    from indexer.core.chunking import CHUNKING_VERSION

    key = sha256_json({"v": CORPUS_VERSION, "n": n_turns, "pool": POOL_SIZE, "noise": NOISE,
                       "data": sha256_file(LOCOMO_PATH), "fp": real.fingerprint, "chunking": CHUNKING_VERSION,
                       "format": DOCUMENT_FORMAT_VERSION, "tps": TURNS_PER_SESSION})[:12]
    root = CACHE / f"{size_name}-{key}"
    done = root / "built.json"
    if done.exists():
        info = json.loads(done.read_text())
        info["cached"] = True
        info["root"] = str(root)
        return info
    if root.exists():
        shutil.rmtree(root)
    config = corpus_config(root)
    config.index.dir.mkdir(parents=True)
    log(f"building the {size_name} corpus ({n_turns:,} turns) in {root}")
    emb = PoolEmbedder(real, pool, pool_vecs)
    sink = LanceSink(config.lancedb_dir, emb, vector_index_rows=None)  # rows only: the bench adds the index
    with Timer() as total:
        # The first batch through the real upsert (creates the table, its indexes and the pointer); the
        # rest appended as the same rows (document_rows, what upsert writes): merge_insert's join over
        # a growing table would make a 1M build take hours, and a fresh corpus has nothing to replace.
        sink.upsert(PERSONA, make_docs(n_turns, pool, 0, UPSERT_DOCS))
        table = sink.active_table(PERSONA)
        for start in range(UPSERT_DOCS, n_turns, APPEND_DOCS):
            rows, _ = document_rows(PERSONA, make_docs(n_turns, pool, start, APPEND_DOCS), emb, sink.chunk_settings)
            table.add(rows)
            if (start // APPEND_DOCS) % 10 == 9:
                log(f"  {min(n_turns, start + APPEND_DOCS):,} / {n_turns:,} turns "
                    f"({fmt_s(time.perf_counter() - total.start)})")
        sink.maintain(force=True)
    stats = sink.table_stats(PERSONA)
    sink.close()
    labels = register_corpus(config, n_turns)
    info = {"size": size_name, "turns": n_turns, "sessions": len(labels), "chunks": stats.chunks,
            "bytes": stats.total_bytes, "build_seconds": round(total.seconds, 1),
            "when": time.strftime("%Y-%m-%d %H:%M:%S")}
    done.write_text(json.dumps(info, indent=1))
    log(f"built {size_name}: {stats.chunks:,} chunks in {fmt_s(total.seconds)}")
    info["cached"] = False
    info["root"] = str(root)
    return info


def scratch_copy(info: dict, scratch: Path):
    """A private copy of the cached corpus (the run adds an index and rows to it)."""
    dest = scratch / info["size"]
    shutil.copytree(info["root"], dest)
    return dest, corpus_config(dest)


def dir_bytes(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(dirpath, f))
            except OSError:
                pass
    return total


def table_dir(config) -> Path:
    return next(Path(config.lancedb_dir).glob("mem_*.lance"))


def stats_of(values: Sequence[float]) -> dict:
    return {"p50": percentile(values, 50), "p95": percentile(values, 95), "n": len(values)}


# -- measurements -----------------------------------------------------------------------------------


def build_index(config, emb) -> tuple[object, dict]:
    """The index as maintenance builds it (threshold 1 row: every size gets one)."""
    from exporters.lancedb import LanceSink

    sink = LanceSink(config.lancedb_dir, emb, vector_index_rows=1)
    before = dir_bytes(table_dir(config))
    with Timer() as t:
        done = sink.maintain()
    built = next(iter(done["vector_index"].values()))
    st = sink.table_stats(PERSONA)
    index_bytes = next((ix.size_bytes for ix in sink.active_table(PERSONA).list_indices() if ix.name == "vector_idx"), 0)
    return sink, {"build_seconds": built["build_seconds"], "maintain_seconds": t.seconds,
                  "partitions": built["partitions"], "trained_rows": built["trained_rows"],
                  "table_bytes_before": before, "table_bytes_after": dir_bytes(table_dir(config)),
                  "index_bytes": int(index_bytes or 0), "stats": st.as_dict()}


def search_latency(config, real, questions: Sequence[str], sessions: int, n: int, n_flat: int) -> dict:
    """Hybrid search through the real Searcher: persona and session scope, with and without the
    index; the variants take turns query by query, in a new (seeded) random order each round:
    a query right after an exact scan of the whole table runs slower (caches), and a fixed
    cyclic order would always put the same variant there."""
    from indexer.search.searcher import Searcher

    labels = session_labels(sessions)
    searcher = Searcher(config, embedder=real)
    searcher.warm_up()  # as the daemon does at start: the model and the rank columns in memory
    reqs = {scope: requests_for(scope, labels, questions, n, seed) for seed, scope in ((1, "session"), (3, "persona"))}
    variants = [("persona", True), ("persona", False), ("session", True), ("session", False)]
    times: dict[str, list[float]] = {f"{s}/{'index' if ix else 'exact'}": [] for s, ix in variants}
    out: dict = {"load_before": loadavg()}
    try:
        for w in requests_for("persona", labels, questions, 3, 99):  # warm-up: model, table, indexes
            searcher.search(w)
        rng = random.Random(17)
        for i in range(n):
            for scope, use_index in rng.sample(variants, len(variants)):
                if scope == "persona" and not use_index and i >= n_flat:
                    continue
                searcher.retriever.use_vector_index = use_index
                t0 = time.perf_counter()
                searcher.search(reqs[scope][i])
                times[f"{scope}/{'index' if use_index else 'exact'}"].append((time.perf_counter() - t0) * 1000)
    finally:
        searcher.close()
    out.update({k: stats_of(v) for k, v in times.items()})
    out["load_after"] = loadavg()
    return out


def vector_stage(config, real, questions: Sequence[str], n: int, sessions: int) -> dict:
    """Recall and latency of the vector stage, index route vs exact scan, and the filters."""
    from exporters.lancedb import Retriever
    from indexer.core.scopes import Scope, ScopeFacts, resolve
    from indexer.search.searcher import CANDIDATES

    retriever = Retriever(config.lancedb_dir)
    table = retriever.active_table(PERSONA)
    cols, rank = retriever.columns(table), retriever.rank_columns(table)
    labels = session_labels(sessions)
    private = frozenset(random.Random(5).sample(labels, PRIVATE))
    both = frozenset({"sessions", "memory"})
    whole = retriever.where(resolve(PERSONA, Scope.PERSONA, None, both, _no_facts()))
    facts = ScopeFacts(private=private, deleted=frozenset(), project_peers=frozenset())
    excl = retriever.where(resolve(PERSONA, Scope.PERSONA, None, both, facts))
    session = retriever.where(resolve(PERSONA, Scope.SESSION, labels[0], both, _no_facts()))
    out: dict = {"route_whole": retriever.vector_route(table, whole),
                 "route_private": retriever.vector_route(table, excl),
                 "route_session": retriever.vector_route(table, session), "candidates": CANDIDATES}
    times: dict[str, list[float]] = {k: [] for k in ("exact", "index", "index rank columns + details")}
    r10, r200, rx10, outside, short = [], [], [], 0, 0
    qs = [np.asarray(real.embed_query(q), dtype=np.float32) for q in questions[:n]]

    def timed(key, fn):
        t0 = time.perf_counter()
        res = fn()
        times[key].append((time.perf_counter() - t0) * 1000)
        return res

    def exact(qv, where, limit, columns):
        retriever.use_vector_index = False
        try:
            return retriever.nearest(table, qv, where, limit, columns)
        finally:
            retriever.use_vector_index = True

    stages = {
        "exact": lambda qv: exact(qv, whole, CANDIDATES, cols),
        "index": lambda qv: retriever.nearest(table, qv, whole, CANDIDATES, cols),
        "index rank columns + details": lambda qv: retriever.details(
            table, retriever.nearest(table, qv, whole, CANDIDATES, rank)[:MAX_RESULTS]),
    }
    rng = random.Random(23)
    try:
        for i, qv in enumerate(qs):
            got = {key: timed(key, lambda: stages[key](qv)) for key in rng.sample(list(stages), len(stages))}
            ex, ix = got["exact"], got["index"]
            top10 = retriever.nearest(table, qv, whole, 10, cols)
            exact_ids = [r["id"] for r in ex]
            r10.append(len({r["id"] for r in top10} & set(exact_ids[:10])) / min(10, len(exact_ids)))
            r200.append(len({r["id"] for r in ix} & set(exact_ids)) / len(exact_ids))
            short += len(ix) < len(ex)
            if i < max(20, n // 4):  # the private-session exclusion through the index
                got10 = retriever.nearest(table, qv, excl, 10, cols)
                outside += sum(1 for r in got10 if r["session"] in private)
                want = exact(qv, excl, 10, cols)
                rx10.append(len({r["id"] for r in got10} & {r["id"] for r in want}) / max(1, len(want)))
    finally:
        retriever.close()
    out.update({"recall10": float(np.mean(r10)), "recall200": float(np.mean(r200)), "recall10_min": float(min(r10)),
                "private_recall10": float(np.mean(rx10)), "private_outside": outside, "private_queries": len(rx10),
                "short": short, "queries": len(qs)})
    out.update({k: stats_of(v) for k, v in times.items()})
    return out


def maintenance(sink, config, n_turns: int, real, pool, pool_vecs) -> dict:
    """1,000 new turns after the build: found before maintenance, then folded in by it."""
    from exporters.lancedb import Retriever
    from indexer.core.scopes import Scope, resolve

    emb = sink.embedder
    docs = make_docs(n_turns + NEW_TURNS, pool, n_turns, NEW_TURNS)
    with Timer() as t_up:
        sink.upsert(PERSONA, docs)
    before = sink.table_stats(PERSONA)
    retriever = Retriever(config.lancedb_dir)
    table = retriever.active_table(PERSONA)
    whole = retriever.where(resolve(PERSONA, Scope.PERSONA, None, frozenset({"sessions", "memory"}), _no_facts()))
    cols = retriever.columns(table)
    probe = docs[:: max(1, NEW_TURNS // 20)]

    def found() -> int:
        hits = 0
        for d in probe:
            v = emb.embed([emb_text(d)])[0]
            rows = retriever.nearest(table, v, whole, 10, cols)
            hits += any(r["path"] == d.path for r in rows)
        return hits

    found_before = found()
    with Timer() as t_m:
        done = sink.maintain()
    after = sink.table_stats(PERSONA)
    found_after = found()
    retriever.close()
    return {"upsert_seconds": t_up.seconds, "maintain_seconds": t_m.seconds, "optimized": done["optimized"],
            "retrained": done["vector_index"], "unindexed_before": before.vector_unindexed_rows,
            "unindexed_after": after.vector_unindexed_rows, "segments_after": after.vector_index_segments,
            "found_before": found_before, "found_after": found_after, "probes": len(probe),
            "table_bytes_after": dir_bytes(table_dir(config))}


def emb_text(doc) -> str:
    """What the sink embeds for a one-chunk turn (its body without role labels)."""
    from indexer.core.chunking import embedding_text

    return embedding_text(doc.body)


def crossover(info: dict, real, questions: Sequence[str], scratch: Path, n: int) -> list[dict]:
    """The vector stage (whole-table filter, 200 candidates, every result column) exact vs indexed,
    on tables of the first N rows of the 100k corpus (with the scalar indexes the filter uses)."""
    import lancedb
    from lancedb.index import Bitmap

    from exporters.lancedb import RESULT_COLUMNS
    from exporters.lancedb.schema import (
        VECTOR_INDEX,
        refine_factor,
        vector_index_config,
        vector_nprobes,
        vector_partitions,
    )
    from indexer.search.searcher import CANDIDATES

    src = lancedb.connect(str(corpus_config(Path(info["root"])).lancedb_dir))
    full = src.open_table(next(iter(src.list_tables().tables))).to_arrow()
    db = lancedb.connect(str(scratch / "crossover"))
    where = "(source = 'memory') OR ((source = 'sessions' AND session IS NOT NULL))"
    qs = [np.asarray(real.embed_query(q), dtype=np.float32) for q in questions[:n]]
    out = []
    for rows in CROSSOVER_ROWS:
        if rows > full.num_rows:
            break
        tbl = db.create_table(f"t{rows}", full.slice(0, rows), mode="overwrite")
        for col in ("source", "session"):
            tbl.create_index(col, config=Bitmap())
        with Timer() as t:
            tbl.create_index("vector", config=vector_index_config(rows), replace=True, name=VECTOR_INDEX)
        parts = vector_partitions(rows)
        probes = vector_nprobes(parts)

        def q(v, indexed: bool):
            b = (tbl.search(v).distance_type("cosine").where(where, prefilter=True)
                 .select([*RESULT_COLUMNS, "_distance"]).limit(CANDIDATES))
            b = b.nprobes(probes).refine_factor(refine_factor(CANDIDATES)) if indexed else b.bypass_vector_index()
            return b.to_list()

        for v in qs[:3]:
            q(v, True), q(v, False)
        te, ti = [], []
        for i, v in enumerate(qs):
            for indexed in ((True, False) if i % 2 else (False, True)):
                t0 = time.perf_counter()
                q(v, indexed)
                (ti if indexed else te).append((time.perf_counter() - t0) * 1000)
        out.append({"rows": rows, "partitions": parts, "nprobes": probes, "build_seconds": t.seconds,
                    "exact": stats_of(te), "index": stats_of(ti)})
        log(f"  crossover {rows:,} rows: exact p50 {percentile(te, 50):.1f} ms, index p50 {percentile(ti, 50):.1f} ms")
        db.drop_table(f"t{rows}")
    return out


# -- report -----------------------------------------------------------------------------------------


def mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB"


def report(ctx: dict) -> str:
    from exporters.lancedb.schema import (
        FLAT_MAX_ROWS,
        MIN_NPROBES,
        MIN_REFINE_ROWS,
        REFINE_FACTOR,
        ROWS_PER_PARTITION,
        VECTOR_INDEX_MIN_ROWS,
    )

    runs = ctx["runs"]
    lines = ["## ANN vector index (issue 12)", "",
             "Corpus: the latency benchmark's (turns of two real LoCoMo lines from a pool of 2,000, chunk vector "
             "normalize(v(a) + v(b) + noise) from the pool's real MiniLM vectors, 100 turns per session; LoCoMo "
             "questions embedded by the real model), built once per size without a vector index and cached; each run "
             "works on a scratch copy. Index: IVF_SQ, cosine, "
             f"{ROWS_PER_PARTITION:,} rows per partition; queries probe max({MIN_NPROBES}, half) of the partitions "
             f"(all of them up to {MIN_NPROBES} partitions) and refine ≥ {MIN_REFINE_ROWS} candidates "
             f"(factor ≥ {REFINE_FACTOR}) on the stored vectors, so distances are exact; filters matching ≤ "
             f"{FLAT_MAX_ROWS:,} rows are searched exactly. Shipped threshold: {VECTOR_INDEX_MIN_ROWS:,} rows "
             "(here every size gets the index, for the comparison). \"Exact\" = "
             "`Retriever.use_vector_index = False`: every vector query a flat scan, as before issue 12.", ""]
    rows = []
    for _size, r in runs.items():
        lat = r["latency"]
        rows.append([f"{r['corpus']['chunks']:,}",
                     f"{lat['persona/exact']['p50']:.0f} / {lat['persona/exact']['p95']:.0f} ({lat['persona/exact']['n']})",
                     f"**{lat['persona/index']['p50']:.0f}** / {lat['persona/index']['p95']:.0f} ({lat['persona/index']['n']})",
                     f"{lat['session/exact']['p50']:.0f} / {lat['session/exact']['p95']:.0f}",
                     f"{lat['session/index']['p50']:.0f} / {lat['session/index']['p95']:.0f}",
                     f"{lat['load_before']} → {lat['load_after']}"])
    lines += ["### Hybrid `memory_search`, in-process (real `Searcher`, query embedding included), p50 / p95 ms (queries)",
              "", md_table(["chunks", "persona, exact", "persona, index", "session, exact", "session, index",
                            "load average"], rows), ""]
    rows = []
    for _size, r in runs.items():
        v = r["vector"]
        rows.append([f"{r['corpus']['chunks']:,}", f"{r['index']['partitions']}", f"{v['route_whole']}",
                     f"**{v['recall10']:.3f}** (min {v['recall10_min']:.1f})", f"{v['recall200']:.3f}",
                     f"{v['private_recall10']:.3f}, {v['private_outside']} outside",
                     f"{v['exact']['p50']:.0f} / {v['exact']['p95']:.0f}",
                     f"{v['index']['p50']:.0f} / {v['index']['p95']:.0f}",
                     f"{v['index rank columns + details']['p50']:.0f} / {v['index rank columns + details']['p95']:.0f}",
                     v["queries"]])
    lines += ["### Vector stage (`Retriever.nearest`, 200 candidates), index route vs exact scan", "",
              md_table(["chunks", "partitions", "probed", "recall@10", "recall@200",
                        f"persona minus {PRIVATE} private sessions: recall@10, rows outside",
                        "exact p50 / p95 ms", "index p50 / p95 ms", "index, rank columns + details of 6, ms",
                        "queries"], rows), "",
              "The last latency column is the two-phase fetch the searcher could use (`rank_columns()` for the "
              "candidates, `details()` for the results shown): each selected column is a random read per candidate.",
              ""]
    rows = []
    for _size, r in runs.items():
        ix, m = r["index"], r["maintenance"]
        rows.append([f"{r['corpus']['chunks']:,}", f"{ix['build_seconds']:.1f} s",
                     f"{m['upsert_seconds']:.1f} s", f"{m['found_before']}/{m['probes']} ({m['unindexed_before']:,})",
                     f"{m['maintain_seconds']:.1f} s", f"{m['found_after']}/{m['probes']} ({m['unindexed_after']})",
                     f"{mb(ix['table_bytes_before'])} → {mb(ix['table_bytes_after'])}", mb(ix["index_bytes"])])
    lines += ["### Build, maintenance, disk", "",
              md_table(["chunks", "index build", f"upsert {NEW_TURNS:,} new turns",
                        "new turns found before maintenance (unindexed rows)", "maintenance (optimize folds them in)",
                        "found after (unindexed rows)", "table folder before → after the build", "index"], rows), "",
              "The table folder keeps the versions of the last 10 minutes (`cleanup_older_than`), so it also counts "
              "the pre-build version's files.", ""]
    cx = ctx.get("crossover")
    if cx:
        rows = [[f"{c['rows']:,}", c["partitions"], c["nprobes"], f"{c['build_seconds']:.1f} s",
                 f"{c['exact']['p50']:.1f} / {c['exact']['p95']:.1f}", f"{c['index']['p50']:.1f} / {c['index']['p95']:.1f}"]
                for c in cx]
        lines += ["### Crossover: vector stage exact vs indexed by table size", "",
                  "Tables of the first N rows of the 100k corpus (scalar indexes on `source`, `session`), whole-table "
                  "filter, 200 candidates with every result column, the two taking turns query by query.", "",
                  md_table(["rows", "partitions", "probed", "build", "exact p50 / p95 ms", "index p50 / p95 ms"], rows),
                  "", f"Crossover (first size where the index's p50 is lower): **{ctx.get('crossover_rows') or 'none'}**.",
                  ""]
    lines += ["### Time", "", md_table(["step", "time"], [[k, fmt_s(v)] for k, v in ctx["timing"].items()])]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.ann", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="10k only, few queries, no crossover")
    ap.add_argument("--sizes", default=None, help="comma-separated subset of " + ",".join(SIZES))
    ap.add_argument("--queries", type=int, default=None, help="hybrid queries per variant and size (default 100)")
    ap.add_argument("--recall-queries", type=int, default=None, help="vector-stage queries per size (default 100)")
    ap.add_argument("--no-crossover", action="store_true")
    args = ap.parse_args(argv)
    sizes = (args.sizes or ("10k" if args.quick else ",".join(SIZES))).split(",")
    nq = args.queries or (20 if args.quick else 100)
    nr = args.recall_queries or (20 if args.quick else 100)
    started = time.perf_counter()
    timing: dict[str, float] = {}
    with Timer() as t:
        real = real_embedder(OUT / "latency-index")
        questions = locomo_questions()
        random.Random(3).shuffle(questions)
        pool = pool_texts(locomo_lines())
        pool_vecs = real.embed(pool)
    timing["model load + data"] = t.seconds
    ctx: dict = {"runs": {}, "timing": timing}
    scratch = OUT / f"ann-scratch-{os.getpid()}"
    try:
        for size in sizes:
            n_turns = SIZES[size]
            with Timer() as t:
                info = build_corpus(size, n_turns, real, pool, pool_vecs)
            timing[f"{size} corpus {'(cached)' if info.get('cached') else 'build'}"] = t.seconds
            with Timer() as t:
                root, config = scratch_copy(info, scratch)
                emb = PoolEmbedder(real, pool, pool_vecs)
                sink, index = build_index(config, emb)
            timing[f"{size} scratch copy + index build"] = t.seconds
            log(f"{size}: index built in {index['build_seconds']:.1f} s ({index['partitions']} partitions)")
            with Timer() as t:
                lat = search_latency(config, real, questions, info["sessions"], nq, min(nq, FLAT_QUERY_CAP.get(size, nq)))
            timing[f"{size} hybrid queries"] = t.seconds
            log(f"{size}: persona p50 index {lat['persona/index']['p50']:.1f} ms, exact {lat['persona/exact']['p50']:.1f} ms; "
                f"session index {lat['session/index']['p50']:.1f}, exact {lat['session/exact']['p50']:.1f}")
            with Timer() as t:
                vec = vector_stage(config, real, questions[500:], nr, info["sessions"])
            timing[f"{size} vector stage, recall"] = t.seconds
            log(f"{size}: recall@10 {vec['recall10']:.3f}, recall@200 {vec['recall200']:.3f}, "
                f"outside the filter {vec['private_outside']}")
            with Timer() as t:
                maint = maintenance(sink, config, n_turns, real, pool, pool_vecs)
            timing[f"{size} maintenance"] = t.seconds
            log(f"{size}: {NEW_TURNS} new turns found {maint['found_before']}/{maint['probes']} before maintenance; "
                f"maintenance {maint['maintain_seconds']:.1f} s")
            sink.close()
            ctx["runs"][size] = {"corpus": {k: v for k, v in info.items() if k != "root"}, "index": index,
                                 "latency": lat, "vector": vec, "maintenance": maint}
            shutil.rmtree(root, ignore_errors=True)
        if not args.quick and not args.no_crossover:
            with Timer() as t:
                info = build_corpus("100k", SIZES["100k"], real, pool, pool_vecs)
                ctx["crossover"] = crossover(info, real, questions[500:], scratch, 60)
                faster = [c["rows"] for c in ctx["crossover"] if c["index"]["p50"] < c["exact"]["p50"]]
                ctx["crossover_rows"] = f"{faster[0]:,} rows" if faster else None
            timing["crossover"] = t.seconds
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    timing["total"] = time.perf_counter() - started
    md = report(ctx)
    path = write_outputs(NAME, md, ctx)
    log(f"wrote {path} ({fmt_s(timing['total'])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
