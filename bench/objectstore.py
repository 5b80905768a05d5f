"""The index on object storage beside the local disk: build, maintenance, size, query latency.

Corpus: the ``latency`` benchmark's (turn documents from LoCoMo lines, vectors
drawn from a pool of real model vectors, see ``bench/latency.py``), one
persona, 100 turns per session, one project of 50 sessions; written through
the real :class:`exporters.lancedb.LanceSink` (chunking, ``merge_insert`` per
500 documents, FTS/BTREE/BITMAP indexes, optimize) into

- ``local``: a folder on this machine's disk;
- ``s3``: a bucket on an S3-compatible server on 127.0.0.1 (moto's server
  mode, in memory, in its own process): every read and write goes through Lance's
  object-store client over HTTP, as against a cloud bucket, minus the
  network's round trips (add 10-30 ms per cold read in a cloud region).

Measured per store and size: build (upserts of 1,000 documents) and its
final ``maintain(force=True)``; maintenance after 1,000 more documents (the
steady state: compaction, index update, old versions removed); bytes on disk
or in the bucket; ``memory_search`` hybrid, persona scope, ``max_results=6``,
p50/p95 over LoCoMo questions embedded by the real model, in-process
(:class:`indexer.search.searcher.Searcher`: on S3 it reads the published
scope state, refreshed every 2 s, as a reader machine does), first query
included separately.

1M: bulk-built locally once (the sink's own rows — chunking, pool vectors,
schema — appended in batches of 20,000 documents, then ``maintain(force=True)``
builds the indexes; cached under ``bench/out/objectstore/``): the layout a sync
writes, without its 2,000 merge commits (the sync path is measured at 10k and
100k). On S3 only up to ``--s3-max`` (default 100k): with no vector index a
query reads the whole vector column from the store (see the results); with
``--s3-max 1m`` the local 1M build is uploaded object by object, then queried
and maintained there.

    python -m bench.objectstore [--quick] [--sizes 100k,1m] [--queries N]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench.common import OUT, Timer, file_lock, fmt_s, loadavg, log, md_table, percentile, write_outputs
from bench.latency import (
    PROJECT,
    PROJECT_SESSIONS,
    PoolEmbedder,
    locomo_lines,
    locomo_questions,
    make_docs,
    pool_texts,
    real_embedder,
    session_labels,
    PERSONA,
    TURNS_PER_SESSION,
)

NAME = "objectstore"
SIZES = {"10k": 10_000, "100k": 100_000, "1m": 1_000_000}
UPSERT_DOCS = 1000
MAINT_DOCS = 1000
ROOT = OUT / "objectstore"


def _config(index_dir: Path, uri: str = "", options: dict | None = None):
    from indexer.runtime.config import load_config

    return load_config(None, env={}, overrides={
        "ledger": {"path": str(index_dir.parent / "no-ledger.db")},
        "index": {"dir": str(index_dir), "sinks": ["lancedb"], "uri": uri, "storage_options": options or {}},
    })


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _bucket_bytes(s3, uri: str) -> tuple[int, int]:
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    c = s3.client()
    total = count = 0
    token = None
    while True:
        kw = {"Bucket": bucket, "Prefix": prefix}
        if token:
            kw["ContinuationToken"] = token
        r = c.list_objects_v2(**kw)
        for o in r.get("Contents", []):
            total += o["Size"]
            count += 1
        if not r.get("IsTruncated"):
            return total, count
        token = r["NextContinuationToken"]


def _register(config, n_turns: int, publisher=None) -> None:
    from indexer.state.db import StateDB

    labels = session_labels(-(-n_turns // TURNS_PER_SESSION))
    state = StateDB(config.state_db_path)
    try:
        with state.atomic():
            state.register_sessions([(label, PERSONA, "active") for label in labels])
        state.project_add(PROJECT, labels[:PROJECT_SESSIONS])
        if publisher is not None:
            publisher.publish(state)
    finally:
        state.close()


def build(store: str, size: str, n_turns: int, emb: PoolEmbedder, pool: Sequence[str], s3=None) -> dict:
    """Write the corpus through the real sink into ``store``; build and maintenance times, bytes."""
    from exporters.lancedb import LanceSink
    from exporters.lancedb.location import IndexLocation

    root = ROOT / f"{size}-{store}"
    if root.exists():
        shutil.rmtree(root)
    index_dir = root / "index"
    index_dir.mkdir(parents=True)
    uri = s3.bucket() if store == "s3" else ""
    config = _config(index_dir, uri, s3.options() if store == "s3" else None)
    sink = LanceSink(IndexLocation.from_config(config), emb, writer_dir=index_dir, role="bench")
    log(f"building {size} on {store} ({n_turns:,} turns)")
    with Timer() as total:
        for start in range(0, n_turns, UPSERT_DOCS):
            sink.upsert(PERSONA, make_docs(n_turns, pool, start, UPSERT_DOCS))
            if (start // UPSERT_DOCS) % 20 == 19:
                log(f"  {start + UPSERT_DOCS:,} / {n_turns:,} ({fmt_s(time.perf_counter() - total.start)})")
        with Timer() as m0:
            sink.maintain(force=True)
    extra = make_docs(n_turns + MAINT_DOCS, pool, n_turns, MAINT_DOCS)
    with Timer() as up:
        sink.upsert(PERSONA, extra)
    with Timer() as m1:
        sink.maintain(force=True)
    stats = sink.stats(PERSONA)
    _register(config, n_turns, sink.publisher)
    sink.close()
    if store == "s3":
        size_bytes, objects = _bucket_bytes(s3, uri)
    else:
        size_bytes, objects = _dir_bytes(config.lancedb_dir), sum(1 for p in config.lancedb_dir.rglob("*")
                                                                    if p.is_file())
    info = {"store": store, "size": size, "turns": n_turns, "chunks": stats["chunks"], "build_s": total.seconds,
            "final_maintain_s": m0.seconds, "upsert_1000_s": up.seconds, "maintain_after_1000_s": m1.seconds,
            "bytes": size_bytes, "objects": objects, "uri": uri or str(config.lancedb_dir), "built": "here"}
    log(f"  built {size} on {store}: {stats['chunks']:,} chunks, {fmt_s(total.seconds)}, {size_bytes / 1e6:.0f} MB")
    return {"info": info, "config": config}


BULK_ROWS = 20_000


def bulk_build(size: str, n_turns: int, emb: PoolEmbedder, pool: Sequence[str]) -> dict:
    """1M: the sink's own rows (chunking, vectors, schema, indexes) appended with ``add`` in
    batches of 20,000 documents, then ``maintain(force=True)`` builds the indexes: the layout a
    sync writes, without 2,000 merge commits (the sync path's build is measured at 100k)."""
    from exporters.lancedb import LanceSink
    from exporters.lancedb.location import IndexLocation
    from exporters.lancedb.rows import document_rows

    root = ROOT / f"{size}-local"
    if root.exists():
        shutil.rmtree(root)
    index_dir = root / "index"
    index_dir.mkdir(parents=True)
    config = _config(index_dir)
    sink = LanceSink(IndexLocation.from_config(config), emb, writer_dir=index_dir, role="bench")
    log(f"bulk-building {size} locally ({n_turns:,} turns)")
    rows_s = add_s = 0.0
    with Timer() as total:
        tbl = sink._live(PERSONA, create=True)
        for start in range(0, n_turns, BULK_ROWS):
            with Timer() as t:
                rows, _ = document_rows(PERSONA, make_docs(n_turns, pool, start, BULK_ROWS), emb, sink.chunk_settings)
            rows_s += t.seconds
            with Timer() as t:
                tbl.add(rows)
            add_s += t.seconds
            log(f"  {start + BULK_ROWS:,} / {n_turns:,} ({fmt_s(time.perf_counter() - total.start)})")
        with Timer() as m0:
            sink.maintain(force=True)
    with Timer() as up:
        sink.upsert(PERSONA, make_docs(n_turns + MAINT_DOCS, pool, n_turns, MAINT_DOCS))
    with Timer() as m1:
        sink.maintain(force=True)
    stats = sink.stats(PERSONA)
    sink.close()
    _register(config, n_turns)
    info = {"store": "local", "size": size, "turns": n_turns, "chunks": stats["chunks"], "build_s": total.seconds,
            "final_maintain_s": m0.seconds, "upsert_1000_s": up.seconds, "maintain_after_1000_s": m1.seconds,
            "bytes": _dir_bytes(config.lancedb_dir), "objects": sum(1 for p in config.lancedb_dir.rglob("*") if p.is_file()),
            "uri": str(config.lancedb_dir), "built": f"bulk: rows+vectors {fmt_s(rows_s)}, add {fmt_s(add_s)}"}
    log(f"  built {size}: {stats['chunks']:,} chunks in {fmt_s(total.seconds)} (indexes {fmt_s(m0.seconds)})")
    return {"info": info, "config": config}


def build_local_cached(size: str, n_turns: int, emb: PoolEmbedder, pool: Sequence[str]) -> dict:
    """The local build of ``size``, reused when a complete one is cached (1M takes long)."""
    done = ROOT / f"{size}-local" / "built.json"
    with file_lock(ROOT / f".lock-{size}"):
        if done.exists():
            info = json.loads(done.read_text())
            info["built"] = "cached: " + str(info.get("built"))
            return {"info": info, "config": _config(ROOT / f"{size}-local" / "index")}
        out = bulk_build(size, n_turns, emb, pool) if n_turns > 100_000 else build("local", size, n_turns, emb, pool)
        done.write_text(json.dumps(out["info"], indent=1))
        return out


def upload(local: dict, s3, size: str) -> dict:
    """The local table (and its state) as an S3 index: objects copied, pointer and scopes written."""
    from exporters.lancedb.location import IndexLocation
    from exporters.lancedb.objectstore import open_remote_writer

    src = local["config"].lancedb_dir
    uri = s3.bucket()
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    c = s3.client()
    with Timer() as t:
        for path in sorted(src.rglob("*")):
            if path.is_file() and ".lance/" in str(path.relative_to(src)) + "/":
                c.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(src)}")
    root = ROOT / f"{size}-s3"
    if root.exists():
        shutil.rmtree(root)
    index_dir = root / "index"
    index_dir.mkdir(parents=True)
    config = _config(index_dir, uri, s3.options())
    active = json.loads((src / "active.json").read_text())
    db, lease, pointer, publisher = open_remote_writer(IndexLocation.from_config(config), role="bench",
                                                       writer_dir=index_dir)
    pointer.save(active)
    _register(config, local["info"]["turns"], publisher)
    lease.release()
    size_bytes, objects = _bucket_bytes(s3, uri)
    info = dict(local["info"], store="s3", built=f"uploaded from the local build in {fmt_s(t.seconds)}",
                bytes=size_bytes, objects=objects, uri=uri, build_s=None, final_maintain_s=None,
                upsert_1000_s=None, maintain_after_1000_s=None)
    return {"info": info, "config": config}


def maintain_s3_after_upserts(entry: dict, emb: PoolEmbedder, pool: Sequence[str]) -> None:
    """Steady-state maintenance on the uploaded S3 table: 1,000 more documents, then optimize."""
    from exporters.lancedb import LanceSink
    from exporters.lancedb.location import IndexLocation

    config = entry["config"]
    n = entry["info"]["turns"]
    sink = LanceSink(IndexLocation.from_config(config), emb, writer_dir=config.index.dir, role="bench")
    try:
        with Timer() as up:
            sink.upsert(PERSONA, make_docs(n + 2 * MAINT_DOCS, pool, n + MAINT_DOCS, MAINT_DOCS))
        with Timer() as m:
            sink.maintain(force=True)
    finally:
        sink.close()
    entry["info"]["upsert_1000_s"], entry["info"]["maintain_after_1000_s"] = up.seconds, m.seconds


def latency(entry: dict, real, questions: Sequence[str], n: int) -> dict:
    from indexer.search.searcher import Searcher, SearchRequest

    labels = session_labels(-(-entry["info"]["turns"] // TURNS_PER_SESSION))
    rng = random.Random(7)
    reqs = [SearchRequest(query=questions[i % len(questions)], persona=PERSONA, session=rng.choice(labels),
                          scope="persona", max_results=6, mode="hybrid") for i in range(n + 1)]
    searcher = Searcher(entry["config"], embedder=real)
    try:
        real.embed_query("warm up the model")
        t0 = time.perf_counter()
        first = searcher.search(reqs[0])
        first_ms = (time.perf_counter() - t0) * 1000
        assert first.results, "no results: the corpus or the scope state is wrong"
        times = []
        for r in reqs[1:]:
            t0 = time.perf_counter()
            searcher.search(r)
            times.append((time.perf_counter() - t0) * 1000)
    finally:
        searcher.close()
    out = {"first_ms": first_ms, "p50": percentile(times, 50), "p95": percentile(times, 95), "n": len(times),
           "load": loadavg()}
    log(f"  {entry['info']['size']} {entry['info']['store']}: first {first_ms:.0f} ms, p50 {out['p50']:.1f}, "
        f"p95 {out['p95']:.1f} ms")
    return out


def modes(entry: dict, real, questions: Sequence[str], n: int) -> dict:
    """p50/p95 per search mode (where an object store's time goes), persona scope."""
    from indexer.search.searcher import Searcher, SearchRequest

    searcher = Searcher(entry["config"], embedder=real)
    out = {}
    try:
        for mode in ("vector", "keyword", "hybrid"):
            reqs = [SearchRequest(query=questions[i % len(questions)], persona=PERSONA, scope="persona", mode=mode)
                    for i in range(n + 1)]
            searcher.search(reqs[0])
            times = []
            for r in reqs[1:]:
                t0 = time.perf_counter()
                searcher.search(r)
                times.append((time.perf_counter() - t0) * 1000)
            out[mode] = {"p50": percentile(times, 50), "p95": percentile(times, 95), "n": n}
            log(f"  {entry['info']['store']} {mode}: p50 {out[mode]['p50']:.0f} ms")
    finally:
        searcher.close()
    return out


def modes_report(size: str, rows: dict) -> str:
    table = md_table(["store", "vector p50 / p95", "keyword p50 / p95", "hybrid p50 / p95"],
                     [[store] + [f"{m[k]['p50']:.0f} / {m[k]['p95']:.0f} ms" for k in ("vector", "keyword", "hybrid")]
                      for store, m in rows.items()], align=["l", "r", "r", "r"])
    return f"""### Where the time goes on object storage ({size}, persona scope, by mode)

{table}

`vector`: a flat scan of the vector column (no vector index), prefiltered by the scope. `keyword`:
the FTS index and the hits' result columns. `hybrid`: both, and the keyword hits fetch their vectors
too (exact vector scores for every candidate): 200 rows taken at random positions, one ranged GET
each on an object store. Load average at the end: {loadavg()}.
"""


def _s(v) -> str:
    return "–" if v is None else fmt_s(v)


def report(rows: list[dict], timing: dict, skipped: Sequence[str] = ()) -> str:
    table = md_table(
        ["size", "store", "chunks", "hybrid persona scope p50 / p95", "first query", "build (upserts of 1,000)",
         "its final maintain", "1,000 more docs: upsert / maintain", "size (objects)"],
        [[r["info"]["size"], r["info"]["store"], f"{r['info']['chunks']:,}",
          f"{r['lat']['p50']:.0f} / {r['lat']['p95']:.0f} ms", f"{r['lat']['first_ms']:.0f} ms",
          _s(r["info"]["build_s"]) if r["info"]["build_s"] is not None else r["info"]["built"],
          _s(r["info"]["final_maintain_s"]),
          f"{_s(r['info']['upsert_1000_s'])} / {_s(r['info']['maintain_after_1000_s'])}",
          f"{r['info']['bytes'] / 1e6:,.0f} MB ({r['info']['objects']:,})"] for r in rows],
        align=["l", "l", "r", "r", "r", "r", "r", "r", "r"])
    loads = "; ".join(f"{r['info']['size']} {r['info']['store']}: {r['lat']['load']}" for r in rows)
    return f"""## Object storage (index on S3 beside the local disk)

{__doc__.split(chr(10) + chr(10), 1)[1].split("    python -m")[0].strip()}

{table}

Queries: {rows[0]['lat']['n'] if rows else 0} per row after one first query, in-process, real query embedding
included. Load average (1/5/15 min) after each row: {loads}. The S3 server runs on this
machine (moto, in memory, its own process, over HTTP on 127.0.0.1): the difference to `local` is Lance's object-store
path (HTTP requests, no page cache, per-request overhead of the server), not a cloud network.

{"Not on S3: " + ", ".join(skipped) + " (see below)." if skipped else ""}

Run time: {", ".join(f"{k} {fmt_s(v)}" for k, v in timing.items())}.
"""


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.objectstore", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="10k only, 30 queries")
    ap.add_argument("--sizes", default=None, help="comma-separated subset of 10k,100k,1m (default 100k,1m)")
    ap.add_argument("--queries", type=int, default=None)
    ap.add_argument("--s3-queries", type=int, default=None, help="queries per S3 row (default: as --queries, "
                    "20 at 100k: each costs seconds there)")
    ap.add_argument("--s3-max", default="100k", help="largest size also measured on S3 (default 100k)")
    ap.add_argument("--modes", action="store_true", help="only the per-mode breakdown, local vs S3, at the "
                    "first size (section objectstore-modes)")
    args = ap.parse_args(argv)
    sizes = (args.sizes or ("10k" if args.quick else "10k,100k,1m")).split(",")
    nq = args.queries or (30 if args.quick else 100)
    from tests.s3_server import start_s3

    started = time.perf_counter()
    timing: dict[str, float] = {}
    real = real_embedder(OUT / "latency-index")
    pool = pool_texts(locomo_lines())
    questions = locomo_questions()
    random.Random(3).shuffle(questions)
    pool_vecs = real.embed(pool)
    emb = PoolEmbedder(real, pool, pool_vecs)
    s3 = start_s3(own_process=True)  # its threads must not share this process's GIL
    rows: list[dict] = []
    skipped: list[str] = []
    if args.modes:
        try:
            size = sizes[0]
            local = build_local_cached(size, SIZES[size], emb, pool)
            remote = build("s3", size, SIZES[size], emb, pool, s3)
            found = {"local": modes(local, real, questions, nq), "s3": modes(remote, real, questions, nq)}
        finally:
            s3.stop()
        path = write_outputs(f"{NAME}-modes", modes_report(size, found), found)
        log(f"wrote {path}")
        return 0
    try:
        for size in sizes:
            n = SIZES[size]
            with Timer() as t:
                local = build_local_cached(size, n, emb, pool)
            timing[f"{size} local build"] = t.seconds
            local["lat"] = latency(local, real, questions, nq)
            rows.append(local)
            if n > SIZES[args.s3_max]:
                skipped.append(size)
                continue
            with Timer() as t:
                remote = build("s3", size, n, emb, pool, s3) if n <= 100_000 else upload(local, s3, size)
            timing[f"{size} s3 {'build' if n <= 100_000 else 'upload'}"] = t.seconds
            remote["lat"] = latency(remote, real, questions, args.s3_queries or (20 if n >= 100_000 else nq))
            if n > 100_000:
                with Timer() as t:
                    maintain_s3_after_upserts(remote, emb, pool)
                timing[f"{size} s3 maintenance"] = t.seconds
            rows.append(remote)
            write_outputs(NAME, report(rows, timing, skipped),
                          {"rows": [{"info": r["info"], "lat": r["lat"]} for r in rows]})
    finally:
        s3.stop()
    timing["total"] = time.perf_counter() - started
    path = write_outputs(NAME, report(rows, timing, skipped), {"rows": [{"info": r["info"], "lat": r["lat"]} for r in rows]})
    log(f"wrote {path} ({fmt_s(timing['total'])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
