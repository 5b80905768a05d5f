"""The index on object storage beside the local disk: build, maintenance, size, query latency.

Corpus: the ``latency`` benchmark's (turn documents from LoCoMo lines, vectors
drawn from a pool of real model vectors, see ``bench/latency.py``), one
persona, 100 turns per session, one project of 50 sessions; written through
the real :class:`exporters.lancedb.LanceSink` (chunking, ``merge_insert`` per
500 documents, FTS/BTREE/BITMAP indexes, optimize, and past
``VECTOR_INDEX_MIN_ROWS`` (2,500) rows the IVF_SQ vector index that
``maintain`` builds) into

- ``local``: a folder on this machine's disk;
- ``s3``: a bucket on an S3-compatible server on 127.0.0.1 (moto's server
  mode, in memory, in its own process, with ranged reads served at the cost of
  the range: ``bench/s3_ranges.py``): every read and write goes through Lance's
  object-store client over HTTP, as against a cloud bucket, minus the
  network's round trips (add 10-30 ms per cold read in a cloud region).

Measured per store and size: build (upserts of 1,000 documents) and its
final ``maintain(force=True)``, the vector index's build; maintenance after
1,000 more documents (the steady state: compaction, index update, old versions
removed); bytes on disk or in the bucket; ``memory_search`` hybrid, persona
scope, ``max_results=6``, p50/p95 over LoCoMo questions embedded by the real
model, in-process (:class:`indexer.search.searcher.Searcher`: on S3 it reads
the published scope state, refreshed every 2 s, as a reader machine does),
first query included separately.

1M: the ``ann`` benchmark's cached corpus (``bench/out/ann-index/1M-*``: the
same documents, sink rows, sessions and project; the first 1,000 documents
upserted, the rest appended as the sink's own rows, then ``maintain(force=True)``;
built once, ~2.5 GB, shared by both benchmarks) copied, then the product's
``maintain()`` builds its vector index (past the threshold, as a running
daemon's maintenance does): the layout a sync writes, without its 2,000 merge
commits (the sync path is measured at 10k and 100k). On S3 with
``--s3-max 1m``: the local 1M build uploaded object by object, queried, maintained
after 1,000 new documents, and its vector index re-trained there (the build
reading every vector from the store).

    python -m bench.objectstore [--quick] [--sizes 10k,100k,1m] [--s3-max 1m] [--queries N]
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

from bench import objectstore_readers as readers
from bench.common import OUT, Timer, file_lock, fmt_s, loadavg, log, md_table, percentile, write_outputs
from bench.latency import (
    PERSONA,
    TURNS_PER_SESSION,
    PoolEmbedder,
    locomo_lines,
    locomo_questions,
    make_docs,
    pool_texts,
    real_embedder,
    register_corpus,
    session_labels,
)

NAME = "objectstore"
SIZES = {"10k": 10_000, "100k": 100_000, "1m": 1_000_000}
#: The ``ann`` benchmark's name of a size whose corpus is shared with it (above 100k).
ANN_SIZES = {"1m": "1M"}
UPSERT_DOCS = 1000
MAINT_DOCS = 1000
ROOT = OUT / "objectstore"
#: The cached local builds' layout: a build.json of another layout is rebuilt (v2: the vector
#: index built by maintenance past VECTOR_INDEX_MIN_ROWS; 1M from the ann corpus).
LAYOUT = "objectstore-v2"


def _config(index_dir: Path, uri: str = "", options: dict | None = None):
    from indexer.runtime.config import load_config

    return load_config(None, env={}, overrides={
        "ledger": {"path": str(index_dir.parent / "no-ledger.db")},
        "index": {"dir": str(index_dir), "sinks": ["lancedb"], "uri": uri, "storage_options": options or {}},
    })


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _dir_objects(path: Path) -> int:
    return sum(1 for p in path.rglob("*") if p.is_file())


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


def _vector_index(done: dict) -> dict | None:
    """The vector index record of a ``maintain()`` result (None: none built)."""
    return next(iter(done.get("vector_index", {}).values()), None)


def _index_fields(built: dict | None) -> dict:
    if built is None:
        return {"index": "none (exact scan)", "index_s": None}
    return {"index": f"IVF_SQ, {built['partitions']} partitions", "index_s": built["build_seconds"]}


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
            done = sink.maintain(force=True)  # past VECTOR_INDEX_MIN_ROWS: builds the vector index
    extra = make_docs(n_turns + MAINT_DOCS, pool, n_turns, MAINT_DOCS)
    with Timer() as up:
        sink.upsert(PERSONA, extra)
    with Timer() as m1:
        sink.maintain(force=True)
    stats = sink.stats(PERSONA)
    register_corpus(config, n_turns, sink.publisher)
    sink.close()
    if store == "s3":
        size_bytes, objects = _bucket_bytes(s3, uri)
    else:
        size_bytes, objects = _dir_bytes(config.lancedb_dir), _dir_objects(config.lancedb_dir)
    info = {"store": store, "size": size, "turns": n_turns, "chunks": stats["chunks"], "build_s": total.seconds,
            "final_maintain_s": m0.seconds, **_index_fields(_vector_index(done)), "upsert_1000_s": up.seconds,
            "maintain_after_1000_s": m1.seconds, "bytes": size_bytes, "objects": objects,
            "uri": uri or str(config.lancedb_dir), "built": "here", "layout": LAYOUT}
    log(f"  built {size} on {store}: {stats['chunks']:,} chunks, {fmt_s(total.seconds)}, {size_bytes / 1e6:.0f} MB, "
        f"vector index: {info['index']}")
    return {"info": info, "config": config}


def corpus_build(size: str, n_turns: int, real, pool: Sequence[str], pool_vecs, emb: PoolEmbedder) -> dict:
    """Above 100k: the ``ann`` benchmark's cached corpus of the same documents (built if missing,
    ~2.5 GB at 1M, then shared by both benchmarks), copied; then the product's ``maintain()``
    builds its vector index, as a daemon's maintenance does past the threshold."""
    from bench import ann
    from exporters.lancedb import LanceSink
    from exporters.lancedb.location import IndexLocation

    corpus = ann.build_corpus(ANN_SIZES[size], n_turns, real, pool, pool_vecs)
    root = ROOT / f"{size}-local"
    if root.exists():
        shutil.rmtree(root)
    log(f"copying the {size} corpus from {corpus['root']}")
    with Timer() as cp:
        # the same layout as build()'s: <root>/index (index.dir, state DB, lancedb/), <root>/no-ledger.db
        shutil.copytree(corpus["root"], root, ignore=shutil.ignore_patterns("built.json"))
    index_dir = root / "index"
    config = _config(index_dir)
    sink = LanceSink(IndexLocation.from_config(config), emb, writer_dir=index_dir, role="bench")
    try:
        log(f"  maintenance: the vector index of {size}")
        with Timer() as m0:
            done = sink.maintain()
        built = _vector_index(done)
        if built is None:
            raise RuntimeError(f"maintain() built no vector index on {size}: {done}")
        with Timer() as up:
            sink.upsert(PERSONA, make_docs(n_turns + MAINT_DOCS, pool, n_turns, MAINT_DOCS))
        with Timer() as m1:
            sink.maintain(force=True)
        stats = sink.stats(PERSONA)
    finally:
        sink.close()
    info = {"store": "local", "size": size, "turns": n_turns, "chunks": stats["chunks"], "build_s": None,
            "final_maintain_s": m0.seconds, **_index_fields(built), "upsert_1000_s": up.seconds,
            "maintain_after_1000_s": m1.seconds, "bytes": _dir_bytes(config.lancedb_dir),
            "objects": _dir_objects(config.lancedb_dir), "uri": str(config.lancedb_dir),
            "built": f"ann corpus ({fmt_s(corpus['build_seconds'])}{', cached' if corpus.get('cached') else ''}; "
                     f"copied in {fmt_s(cp.seconds)})", "layout": LAYOUT}
    log(f"  {size}: {stats['chunks']:,} chunks, vector index {info['index']} in {fmt_s(built['build_seconds'])}")
    return {"info": info, "config": config}


def build_local_cached(size: str, n_turns: int, real, pool: Sequence[str], pool_vecs, emb: PoolEmbedder) -> dict:
    """The local build of ``size``, reused when a complete one of this layout is cached."""
    done = ROOT / f"{size}-local" / "built.json"
    with file_lock(ROOT / f".lock-{size}"):
        if done.exists():
            info = json.loads(done.read_text())
            if info.get("layout") == LAYOUT:
                info["built"] = "cached: " + str(info.get("built"))
                return {"info": info, "config": _config(ROOT / f"{size}-local" / "index")}
            log(f"cached {size} build of another layout ({info.get('layout', 'v1')}): rebuilding")
            done.unlink()
        out = (corpus_build(size, n_turns, real, pool, pool_vecs, emb) if size in ANN_SIZES
               else build("local", size, n_turns, emb, pool))
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
    log(f"uploading {size} ({_dir_bytes(src) / 1e6:,.0f} MB) to {uri}")
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
    active = json.loads((src / "active.json").read_text())  # with its vector index record
    db, lease, pointer, publisher = open_remote_writer(IndexLocation.from_config(config), role="bench",
                                                       writer_dir=index_dir)
    pointer.save(active)
    register_corpus(config, local["info"]["turns"], publisher)
    lease.release()
    size_bytes, objects = _bucket_bytes(s3, uri)
    log(f"  uploaded in {fmt_s(t.seconds)}: {objects:,} objects")
    info = dict(local["info"], store="s3", built=f"uploaded from the local build in {fmt_s(t.seconds)}",
                bytes=size_bytes, objects=objects, uri=uri, build_s=None, final_maintain_s=None, index_s=None,
                upsert_1000_s=None, maintain_after_1000_s=None)
    return {"info": info, "config": config}


def maintain_s3(entry: dict, emb: PoolEmbedder, pool: Sequence[str], s3) -> None:
    """On the uploaded S3 table: steady-state maintenance (1,000 more documents, then optimize;
    the bucket's bytes after it, as the local row's), then the vector index re-trained there
    (what maintenance does when the table has grown: every vector read from the store, the new
    index written to it)."""
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
        entry["info"]["bytes"], entry["info"]["objects"] = _bucket_bytes(s3, entry["info"]["uri"])
        log(f"  s3 maintenance after {MAINT_DOCS:,} docs: upsert {fmt_s(up.seconds)}, maintain {fmt_s(m.seconds)}; "
            f"re-training the vector index on S3")
        built = sink._build_vector_index(sink.active_table(PERSONA), PERSONA, "bench: re-train on S3")
    finally:
        sink.close()
    entry["info"].update(upsert_1000_s=up.seconds, maintain_after_1000_s=m.seconds,
                         index_s=built["build_seconds"], index=f"IVF_SQ, {built['partitions']} partitions (re-trained here)")
    log(f"  s3 vector index re-trained in {fmt_s(built['build_seconds'])}")


def _counts(s3, entry: dict) -> dict:
    from bench.s3_ranges import request_counts

    return request_counts(s3.client(), entry["info"]["uri"].removeprefix("s3://").split("/")[0])


def latency(entry: dict, real, questions: Sequence[str], n: int, s3=None) -> dict:
    """Hybrid, persona scope: first query, then p50/p95 over ``n``; on S3 (``s3`` given) also the
    object requests the queries made (counted by the patched server)."""
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
        before = _counts(s3, entry) if s3 is not None else {}
        times = []
        for r in reqs[1:]:
            t0 = time.perf_counter()
            searcher.search(r)
            times.append((time.perf_counter() - t0) * 1000)
        after = _counts(s3, entry) if s3 is not None else {}
    finally:
        searcher.close()
    out = {"first_ms": first_ms, "p50": percentile(times, 50), "p95": percentile(times, 95), "n": len(times),
           "load": loadavg()}
    if before and after:  # requests per query (the searcher's scope-state refresh included)
        out["requests_per_query"] = {k: (after.get(k, 0) - before.get(k, 0)) / len(times) for k in after}
    log(f"  {entry['info']['size']} {entry['info']['store']}: first {first_ms:.0f} ms, p50 {out['p50']:.1f}, "
        f"p95 {out['p95']:.1f} ms ({len(times)} queries, load {out['load']})"
        + (f", {_requests(out)} per query" if "requests_per_query" in out else ""))
    return out


def _requests(lat: dict) -> str:
    rq = lat.get("requests_per_query")
    if not rq:
        return "–"
    n = sum(v for k, v in rq.items() if k != "get_bytes")
    return f"{n:,.0f} ({rq.get('get_bytes', 0) / 1e6:,.1f} MB)"


def server_check(s3, size_mb: int = 32, reads: int = 15) -> dict:
    """The S3 server's cost of one small ranged read (4 KB of a ``size_mb`` MB object), median
    over ``reads``: a request's overhead there, whatever the object's size."""
    import os as _os

    c = s3.client()
    bucket = s3.bucket().removeprefix("s3://").split("/")[0]
    c.put_object(Bucket=bucket, Key="check", Body=_os.urandom(size_mb << 20))
    times = []
    for i in range(reads + 1):
        start = (i * 7919 * 4096) % ((size_mb << 20) - 4096)
        t0 = time.perf_counter()
        body = c.get_object(Bucket=bucket, Key="check", Range=f"bytes={start}-{start + 4095}")["Body"].read()
        times.append((time.perf_counter() - t0) * 1000)
        assert len(body) == 4096
    c.delete_object(Bucket=bucket, Key="check")
    c.delete_bucket(Bucket=bucket)
    out = {"object_mb": size_mb, "ranged_get_4kb_ms": percentile(times[1:], 50), "reads": reads}
    log(f"S3 server: a 4 KB ranged GET of a {size_mb} MB object takes {out['ranged_get_4kb_ms']:.1f} ms (median)")
    return out


def _s(v) -> str:
    return "–" if v is None else fmt_s(v)


def _row(r: dict) -> list:
    i = r["info"]
    if "lat" not in r:  # not measured on this store
        return [i["size"], i["store"], "", "", r["skipped"], "", "", "", "", "", "", ""]
    lat = r["lat"]
    cached = ", cached" if str(i.get("built", "")).startswith("cached") else ""
    build = (f"{fmt_s(i['build_s'])} (final maintain {fmt_s(i['final_maintain_s'])}{cached})" if i.get("build_s") is not None
             else i["built"] + (f"; maintain {fmt_s(i['final_maintain_s'])}" if i.get("final_maintain_s") else ""))
    return [i["size"], i["store"], f"{i['chunks']:,}", i.get("index", "?"),
            f"{lat['p50']:.0f} / {lat['p95']:.0f} ms ({lat['n']})", f"{lat['first_ms']:,.0f} ms", _requests(lat), build,
            _s(i.get("index_s")), f"{_s(i['upsert_1000_s'])} / {_s(i['maintain_after_1000_s'])}",
            f"{i['bytes'] / 1e6:,.0f} MB ({i['objects']:,})", lat["load"]]


def report(rows: list[dict], timing: dict, server: dict | None = None, plain: bool = False) -> str:
    table = md_table(
        ["size", "store", "chunks", "vector index", "hybrid persona scope p50 / p95 (queries)", "first query",
         "S3 requests / query (GET bytes)", "build", "vector index build", "1,000 more docs: upsert / maintain", "size (objects)",
         "load average after the queries"],
        [_row(r) for r in rows], align=["l", "l", "r", "l", "r", "r", "r", "r", "r", "r", "r", "r"])
    check = (f" A 4 KB ranged GET of a {server['object_mb']} MB object costs {server['ranged_get_4kb_ms']:.1f} ms there "
             f"(median of {server['reads']}): the server's per-request overhead." if server else "")
    return f"""## Object storage (index on S3 beside the local disk)

{__doc__.split(chr(10) + chr(10), 1)[1].split("    python -m")[0].strip()}

{table}

Queries: per row after one first query, in-process, real query embedding included. Build: the
upserts of 1,000 documents with their final `maintain(force=True)` (which builds the vector index
past `VECTOR_INDEX_MIN_ROWS` rows); at 1M the ann corpus, whose index `maintain()` builds; on S3 at 1M the upload,
and the vector index column is then its re-train on S3. The S3 server runs on this machine (moto,
in memory, its own process, over HTTP on 127.0.0.1, ranged reads at the cost of the range):
the difference to `local` is Lance's object-store path (HTTP requests, no page cache, per-request
overhead of the server), not a cloud network.{check} moto answers requests in Python threads
sharing one GIL, so a query's requests are served one after the other there: requests per query
times that overhead is the part of an S3 row's latency that is the test server's (a cloud S3
serves concurrent GETs concurrently, each at tens of ms). "S3 requests / query": object requests
the server answered per query (GET/HEAD; the searcher's scope-state refresh included) and the
bytes of the GETs.{" Server: moto unpatched (every ranged GET reads the whole object)." if plain else ""}

Run time: {", ".join(f"{k} {fmt_s(v)}" for k, v in timing.items())}.
"""


def _data(rows: list[dict], server: dict | None, plain: bool = False) -> dict:
    return {"server": dict(server or {}, kind="moto" if plain else "moto + bench/s3_ranges.py"), "rows": [{"info": r["info"], "lat": r["lat"]} for r in rows if "lat" in r],
            "not_measured": [r["info"] | {"why": r["skipped"]} for r in rows if "lat" not in r]}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.objectstore", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="10k only, 30 queries")
    ap.add_argument("--sizes", default=None, help="comma-separated subset of 10k,100k,1m (default all three)")
    ap.add_argument("--queries", type=int, default=None, help="queries per row (default 100; --quick 30)")
    ap.add_argument("--s3-queries", type=int, default=None,
                    help="queries per mode of the S3 reader without the cache (default: 20, at most --queries)")
    ap.add_argument("--s3-max", default="100k", choices=sorted(SIZES, key=SIZES.get),
                    help="largest size also measured on S3 (default 100k; 1m uploads the local 1M build)")
    ap.add_argument("--s3-server", choices=("ranges", "moto"), default="ranges",
                    help="ranges (default): moto with ranged reads at the cost of the range (bench/s3_ranges.py); "
                    "moto: unpatched, for comparison (every ranged GET reads the whole object)")
    args = ap.parse_args(argv)
    sizes = (args.sizes or ("10k" if args.quick else "10k,100k,1m")).split(",")
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        ap.error(f"unknown size(s) {', '.join(unknown)}: choose from {', '.join(SIZES)}")
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
    # Its own process (its threads must not share this process's GIL), ranged reads at range cost.
    plain = args.s3_server == "moto"
    s3 = start_s3(own_process=True, server_module="moto.server" if plain else "bench.s3_ranges")
    rows: list[dict] = []
    server = None
    reader_rows: dict[str, dict] = {}
    local_p50: dict[str, float] = {}
    try:
        server = server_check(s3)
        for size in sizes:
            n = SIZES[size]
            with Timer() as t:
                local = build_local_cached(size, n, real, pool, pool_vecs, emb)
            timing[f"{size} local build"] = t.seconds
            local["lat"] = latency(local, real, questions, nq)
            rows.append(local)
            if n > SIZES[args.s3_max]:
                rows.append({"info": {"size": size, "store": "s3"}, "skipped": f"not measured (--s3-max {args.s3_max})"})
                continue
            with Timer() as t:
                remote = build("s3", size, n, emb, pool, s3) if n <= 100_000 else upload(local, s3, size)
            timing[f"{size} s3 {'build' if n <= 100_000 else 'upload'}"] = t.seconds
            with Timer() as t:
                found = readers.readers(remote, real, questions, nq, args.s3_queries or min(nq, 20), s3, ROOT)
            timing[f"{size} s3 readers"] = t.seconds
            remote["lat"] = found["direct"]["hybrid"] | {"requests_per_query": {
                "GET": found["direct"]["hybrid"]["requests"], "get_bytes": found["direct"]["hybrid"]["get_bytes"]}}
            reader_rows[size] = found
            local_p50[size] = local["lat"]["p50"]
            if n > 100_000:
                with Timer() as t:
                    maintain_s3(remote, emb, pool, s3)
                timing[f"{size} s3 maintenance and index re-train"] = t.seconds
            write_outputs(NAME, report(rows + [remote], timing, server, plain) + "\n" + readers.report(reader_rows, local_p50),
                          _data(rows + [remote], server, plain) | {"readers": reader_rows})
            with Timer() as t:
                try:  # the readers' figures are written already: a store failure here must not lose them
                    found["maintenance"] = readers.maintenance_steps(remote, emb, pool, s3, n + 2 * MAINT_DOCS)
                except Exception as exc:
                    log(f"  maintenance by step failed: {type(exc).__name__}: {str(exc)[:300]}")
                    found["maintenance_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            timing[f"{size} s3 maintenance by step"] = t.seconds
            rows.append(remote)
            write_outputs(NAME, report(rows, timing, server, plain) + "\n" + readers.report(reader_rows, local_p50),
                          _data(rows, server, plain) | {"readers": reader_rows})
    finally:
        s3.stop()
    timing["total"] = time.perf_counter() - started
    path = write_outputs(NAME, report(rows, timing, server, plain) + "\n" + readers.report(reader_rows, local_p50),
                         _data(rows, server, plain) | {"readers": reader_rows})
    log(f"wrote {path} ({fmt_s(timing['total'])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
