"""Reader machines on object storage, with and without the reader cache; the writer's maintenance
by step. Part of ``python -m bench.objectstore`` (see there for the corpus and the S3 server).

Per size, beside the local row of the same run:

- ``s3 direct``: a reader with ``[index] cache_disk_mb = 0`` (every query reads the store: the
  figures of the issue-14 table);
- ``s3 cached``: a reader started cold with the reader cache (``exporters/lancedb/mirror.py``):
  the time from its start to ``warm`` (every live table copied, rank columns loaded), what it
  fetched, then its warm queries.

"requests / query": object requests the S3 server answered during the queries divided by the
queries (GET/HEAD/LIST; the reader's background version checks once per ``refresh_seconds``
included), with the GET bytes. Per stage: the same per search mode (vector only, keyword only,
hybrid). Maintenance by step on S3: after 1,000 more documents, compaction (``compact_files``),
then the index update (``optimize``: folds the new rows into the FTS/scalar/vector indexes),
then the removal of old versions, each timed with the requests it made.
"""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from bench.common import Timer, fmt_s, loadavg, log, md_table, percentile

MODES = ("vector", "keyword", "hybrid")


def reader_config(entry: dict, *, cache_mb: int, cache_dir: Path | None = None):
    """The S3 entry's config for a reader with (``cache_mb`` > 0) or without the reader cache."""
    from indexer.runtime.config import load_config

    c = entry["config"]
    return load_config(None, env={}, overrides={
        "ledger": {"path": str(c.ledger.path)},
        "index": {"dir": str(c.index.dir), "sinks": ["lancedb"], "uri": c.index.uri,
                  "storage_options": dict(c.index.storage_options), "cache_disk_mb": cache_mb,
                  "cache_dir": str(cache_dir or "")},
    })


def _requests(s3, uri: str) -> dict:
    from bench.s3_ranges import request_counts

    return request_counts(s3.client(), uri.removeprefix("s3://").split("/")[0])


def _delta(after: dict, before: dict, n: int) -> dict:
    reqs = sum(after.get(k, 0) - before.get(k, 0) for k in after if k != "get_bytes")
    return {"requests": reqs / n, "get_bytes": (after.get("get_bytes", 0) - before.get("get_bytes", 0)) / n}


def _queries(entry: dict, questions: Sequence[str], n: int, mode: str):
    from bench.latency import PERSONA, TURNS_PER_SESSION, session_labels
    from indexer.search.searcher import SearchRequest

    labels = session_labels(-(-entry["info"]["turns"] // TURNS_PER_SESSION))
    rng = random.Random(7)
    return [SearchRequest(query=questions[i % len(questions)], persona=PERSONA, session=rng.choice(labels),
                          scope="persona", max_results=6, mode=mode) for i in range(n + 1)]


def timed(searcher, entry: dict, questions: Sequence[str], n: int, s3, mode: str = "hybrid") -> dict:
    """One first query, then ``n`` timed ones: p50/p95 and the object requests per query."""
    reqs = _queries(entry, questions, n, mode)
    t0 = time.perf_counter()
    first = searcher.search(reqs[0])
    first_ms = (time.perf_counter() - t0) * 1000
    assert first.results or mode == "keyword", "no results: the corpus or the scope state is wrong"
    before = _requests(s3, entry["info"]["uri"])
    times = []
    for r in reqs[1:]:
        t0 = time.perf_counter()
        searcher.search(r)
        times.append((time.perf_counter() - t0) * 1000)
    out = {"first_ms": first_ms, "p50": percentile(times, 50), "p95": percentile(times, 95), "n": n,
           **_delta(_requests(s3, entry["info"]["uri"]), before, n), "load": loadavg()}
    return out


def readers(entry: dict, real, questions: Sequence[str], n: int, n_direct: int, s3, root: Path) -> dict:
    """The two readers of one S3 entry: direct (per stage, ``n_direct`` queries each) and cached
    (cold start to warm, then per stage, ``n`` queries each)."""
    from indexer.search.searcher import Searcher

    size = entry["info"]["size"]
    out: dict = {}
    searcher = Searcher(reader_config(entry, cache_mb=0), embedder=real)
    try:
        out["direct"] = {m: timed(searcher, entry, questions, n_direct, s3, m) for m in MODES}
    finally:
        searcher.close()
    log(f"  {size} s3 direct: hybrid p50 {out['direct']['hybrid']['p50']:.0f} ms, "
        f"{out['direct']['hybrid']['requests']:.0f} requests/query")
    cache_dir = root / f"{size}-reader-cache"
    shutil.rmtree(cache_dir, ignore_errors=True)
    real.embed_query("warm up the model")
    before = _requests(s3, entry["info"]["uri"])
    with Timer() as cold:
        searcher = Searcher(reader_config(entry, cache_mb=64 << 10, cache_dir=cache_dir), embedder=real)
        cache = searcher.retriever.cache
        assert cache is not None, "the reader cache is off"
        if not cache.wait_warm(3600):
            raise RuntimeError(f"the reader cache did not warm: {cache.status()}")
    fetched = _delta(_requests(s3, entry["info"]["uri"]), before, 1)
    try:
        status = cache.status()
        out["cold"] = {"seconds": cold.seconds, "warm_seconds": status["warm_seconds"], "disk_bytes": status["disk_bytes"],
                       "requests": fetched["requests"], "get_bytes": fetched["get_bytes"],
                       "memory_bytes": searcher.retriever.memory_bytes()}
        log(f"  {size} s3 cached: cold start to warm {fmt_s(cold.seconds)} ({status['disk_bytes'] / 1e6:,.0f} MB, "
            f"{fetched['requests']:,.0f} requests)")
        out["cached"] = {m: timed(searcher, entry, questions, n, s3, m) for m in MODES}
        out["cold"]["memory_after_bytes"] = searcher.retriever.memory_bytes()
    finally:
        searcher.close()
    log(f"  {size} s3 cached: hybrid p50 {out['cached']['hybrid']['p50']:.1f} ms, "
        f"{out['cached']['hybrid']['requests']:.1f} requests/query")
    return out


def maintenance_steps(entry: dict, emb, pool: Sequence[str], s3, turns_from: int) -> dict:
    """On the S3 table: 1,000 more documents, then compaction, index update and version removal
    timed one by one, each with its object requests."""
    from bench.latency import PERSONA, make_docs
    from exporters.lancedb import LanceSink
    from exporters.lancedb.location import IndexLocation

    config = entry["config"]
    uri = entry["info"]["uri"]
    sink = LanceSink(IndexLocation.from_config(config), emb, writer_dir=config.index.dir, role="bench")
    steps: dict = {}
    try:
        sink.upsert(PERSONA, make_docs(turns_from + 1000, pool, turns_from, 1000))
        tbl = sink.active_table(PERSONA)

        def rest() -> None:  # maintain() with the table already optimized: its own checks, small tables, orphans
            sink._since_optimize[tbl.name] = 0
            sink.maintain()

        # lancedb (without pylance) does compaction, index update and version removal in one call:
        # first with every version kept, then again for the removal alone
        for name, call in (("optimize, versions kept (compaction + index update)",
                            lambda: tbl.optimize(cleanup_older_than=timedelta(days=3650))),
                           ("optimize again (old versions removed)",
                            lambda: tbl.optimize(cleanup_older_than=sink.cleanup_older_than)),
                           ("pointer and scope tables", sink._maintain_small_tables),
                           ("the rest of maintain() (checks, orphans)", rest)):
            before = _requests(s3, uri)
            with Timer() as t:
                call()
            steps[name] = {"seconds": t.seconds, **_delta(_requests(s3, uri), before, 1)}
            log(f"  maintenance step {name}: {fmt_s(t.seconds)}, {steps[name]['requests']:,.0f} requests")
    finally:
        sink.close()
    return steps


def report(found: dict, local_p50: dict) -> str:
    """Markdown: readers side by side with local, per stage, cold start, maintenance by step."""
    rows, stage_rows, maint_rows = [], [], []
    for size, r in found.items():
        lp = local_p50.get(size)
        for kind in ("direct", "cached"):
            if kind not in r:
                continue
            h = r[kind]["hybrid"]
            cold = (f"{fmt_s(r['cold']['seconds'])} ({r['cold']['disk_bytes'] / 1e6:,.0f} MB, "
                    f"{r['cold']['requests']:,.0f} requests)" if kind == "cached" else "–")
            rows.append([size, f"s3 {kind}", f"{h['p50']:.0f} / {h['p95']:.0f} ms ({h['n']})",
                         f"{h['p50'] / lp:.2f}x" if lp else "?", f"{h['requests']:,.1f} ({h['get_bytes'] / 1e3:,.0f} KB)",
                         cold, h["load"]])
            for m in MODES:
                s = r[kind][m]
                stage_rows.append([size, f"s3 {kind}", m, f"{s['p50']:.0f} ms", f"{s['requests']:,.1f}",
                                   f"{s['get_bytes'] / 1e3:,.1f}"])
        for step, s in r.get("maintenance", {}).items():
            maint_rows.append([size, step, fmt_s(s["seconds"]), f"{s['requests']:,.0f}",
                               f"{s['get_bytes'] / 1e6:,.1f}"])
    parts = ["### Reader machines: the reader cache\n", __doc__.split("\n\n", 1)[1].strip(), "",
             md_table(["size", "reader", "hybrid persona scope p50 / p95 (queries)", "p50 / local p50",
                       "requests / query (GET bytes)", "cold start to warm (fetched, requests)", "load average"],
                      rows, align=["l", "l", "r", "r", "r", "r", "r"]),
             "", "Per stage (search mode), persona scope:", "",
             md_table(["size", "reader", "mode", "p50", "requests / query", "GET KB / query"], stage_rows)]
    if maint_rows:
        parts += ["", "Maintenance on S3 after 1,000 more documents, by step:", "",
                  md_table(["size", "step", "time", "requests", "GET MB"], maint_rows)]
    return "\n".join(parts) + "\n"
