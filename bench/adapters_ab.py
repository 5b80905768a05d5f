"""Each search-path speed-up that reaches into a library's internals, side by side with its fallback.

On the latency benchmark's corpus (``bench.latency``: built or reused), one process, one
``Searcher`` per variant, the variants taking turns round by round (A B C … … C B A), each round
``--queries`` hybrid searches per scope on one thread, then the same number on 4 threads at once:

- ``shipped``: every speed-up on (io_uring reads where the kernel allows, the async handle awaited
  on the thread's own loop);
- ``plain lancedb``: ``lance_private.USE_PRIVATE = False`` (lancedb's synchronous API);
- ``threads``: ``[index] local_reads = "threads"`` (lance's thread pool, no io_uring).

Every variant but ``threads`` runs on one ``Searcher`` (module switches): their answers must be
identical to ``shipped``'s. ``threads`` is a second searcher: on an index with an IVF vector index,
two searchers may order near-equal persona-scope hits differently (two ``shipped`` searchers do too).

At the end, one ``malloc_trim`` (what the sync worker's idle trim does) and the memory it released.

    python -m bench.adapters_ab [--size 10k|100k] [--queries 40] [--rounds 4] [--variants a,b]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from bench.common import OUT, loadavg, log, md_table, percentile
from bench.latency import (
    SIZES,
    build_corpus,
    locomo_lines,
    locomo_questions,
    pool_texts,
    real_embedder,
    requests_for,
    session_labels,
)

SCOPES = ("session", "project", "persona")
THREADS = 4


@contextmanager
def _variant(name: str):
    """Switch one speed-up off for the searches of ``name`` (module switches; restored after)."""
    from exporters.lancedb import lance_private

    saved = lance_private.USE_PRIVATE
    if name == "plain lancedb":
        lance_private.USE_PRIVATE = False
    try:
        yield
    finally:
        lance_private.USE_PRIVATE = saved


def _searcher(info: dict, real, variant: str):
    from indexer.search.searcher import Searcher

    config = info["config"]
    if variant == "threads":
        config = config.model_copy(update={"index": config.index.model_copy(update={"local_reads": "threads"})})
    s = Searcher(config, embedder=real)
    s.warm_up()
    return s


def _round(searcher, variant: str, reqs: dict, pool: ThreadPoolExecutor) -> dict:
    """One round of ``variant``: each scope's requests on one thread (scopes taking turns), then all
    of them on ``THREADS`` threads at once (queries a second)."""
    times: dict[str, list[float]] = {s: [] for s in SCOPES}
    with _variant(variant):
        n = len(reqs["session"])
        for i in range(n):
            for j in range(len(SCOPES)):
                scope = SCOPES[(i + j) % len(SCOPES)]
                t0 = time.perf_counter()
                searcher.search(reqs[scope][i])
                times[scope].append((time.perf_counter() - t0) * 1000)
        flat = [r for i in range(n) for r in (reqs[s][i] for s in SCOPES)]
        c0, t0 = time.process_time(), time.perf_counter()
        list(pool.map(searcher.search, flat))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"times": times, "qps": len(flat) / wall, "cpu_ms": 1000 * cpu / len(flat)}


def _answers(searcher, reqs: dict) -> list:
    return [[(r.path, round(r.score, 6)) for r in searcher.search(q).results] for s in SCOPES for q in reqs[s][:5]]


def run(size: str, n: int, rounds: int, variants: Sequence[str]) -> dict:
    real = real_embedder(OUT / "latency-index")
    pool_lines = pool_texts(locomo_lines())
    info = build_corpus(size, SIZES[size], real, pool_lines, real.embed(pool_lines))
    questions = locomo_questions()
    random.Random(5).shuffle(questions)
    labels = session_labels(info["sessions"])
    # one searcher for the variants that switch a module (the same caches and index handles: answers
    # must be identical); "threads" opens its own (another reader of the same files)
    shared = _searcher(info, real, "shipped")
    searchers = {v: _searcher(info, real, v) if v == "threads" else shared for v in variants}
    out: dict = {"size": size, "chunks": info["chunks"], "queries": n, "rounds": rounds, "load_before": loadavg(),
                 "commit": _commit(), "reads": {v: s.index_reads for v, s in searchers.items()}, "runs": []}
    same: dict[str, bool] = {}
    with ThreadPoolExecutor(THREADS, thread_name_prefix="bench") as pool:
        warm = {s: requests_for(s, labels, questions, 8, 90 + k) for k, s in enumerate(SCOPES)}
        for v in variants:  # warm-up, and the answers of every variant must be the same
            with _variant(v):
                got = _answers(searchers[v], warm)
                same[v] = got == _answers(searchers[variants[0]], warm) if v != variants[0] else True
                _round(searchers[v], v, warm, pool)
        order = [v for r in range(rounds) for v in (variants if r % 2 == 0 else list(reversed(variants)))]
        for k, v in enumerate(order):
            reqs = {s: requests_for(s, labels, questions, n, 10 * k + j) for j, s in enumerate(SCOPES)}
            res = _round(searchers[v], v, reqs, pool)
            out["runs"].append({"variant": v, **res})
            log(f"  {v}: p50 " + " / ".join(f"{statistics.median(res['times'][s]):.1f}" for s in SCOPES)
                + f" ms, {THREADS} threads {res['qps']:.0f} q/s, CPU {res['cpu_ms']:.1f} ms/query")
    from indexer.embedding import native_memory

    rss = native_memory.rss_bytes()
    trimmed = native_memory.trim()  # what the worker's idle trim gives back after these searches
    out["idle_trim"] = {"rss_mb": rss / 2**20, "released_mb": trimmed[0] / 2**20 if trimmed else 0.0,
                        "ms": trimmed[1] * 1000 if trimmed else 0.0}
    for s in {id(x): x for x in searchers.values()}.values():
        s.close()
    out["same_answers"] = same
    out["load_after"] = loadavg()
    out["summary"] = {v: _summary([r for r in out["runs"] if r["variant"] == v]) for v in variants}
    return out


def _summary(runs: list[dict]) -> dict:
    return {**{s: percentile([t for r in runs for t in r["times"][s]], 50) for s in SCOPES},
            "qps": statistics.median(r["qps"] for r in runs), "cpu_ms": statistics.median(r["cpu_ms"] for r in runs)}


def _commit() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()


def report(res: dict) -> str:
    base = res["summary"][next(iter(res["summary"]))]
    rows = []
    for v, m in res["summary"].items():
        def rel(key: str, lower_better: bool = True, m: dict = m) -> str:
            gain = (m[key] / base[key] - 1) if lower_better else (base[key] / m[key] - 1)
            return f"{m[key]:.1f}" if m is base else f"{m[key]:.1f} ({gain:+.0%})"
        rows.append([v, res["reads"][v], rel("session"), rel("project"), rel("persona"), rel("qps", False),
                     rel("cpu_ms"), "yes" if res["same_answers"][v] else "**no**"])
    return "\n".join([
        f"### Speed-ups on library internals vs their fallbacks ({res['size']}, {res['chunks']:,} chunks)", "",
        f"`python -m bench.adapters_ab --size {res['size']} --queries {res['queries']} --rounds {res['rounds']}` on "
        f"{res['commit']}; hybrid search, real query model; variants take turns (ABC…CBA), {res['rounds']} rounds of "
        f"{res['queries']} queries per scope. Load average {res['load_before']} → {res['load_after']}. In brackets: "
        f"how much slower than `{next(iter(res['summary']))}` (a positive figure is the speed-up's gain).", "",
        md_table(["variant", "reads", "session p50 ms", "project p50 ms", "persona p50 ms", f"{THREADS} threads q/s",
                  "CPU ms/query", "same answers"], rows), "",
        f"`malloc_trim` after these searches (the worker's idle trim): {res['idle_trim']['released_mb']:.1f} MB of "
        f"{res['idle_trim']['rss_mb']:.0f} MB resident released, in {res['idle_trim']['ms']:.1f} ms."])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.adapters_ab", description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="10k", choices=sorted(SIZES))
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--variants", default="shipped,plain lancedb,threads")
    args = ap.parse_args(argv)
    res = run(args.size, args.queries, args.rounds, [v.strip() for v in args.variants.split(",")])
    md = report(res)
    stem = OUT / f"adapters_ab-{args.size}"
    stem.with_suffix(".json").write_text(json.dumps(res, indent=1, default=str))
    stem.with_suffix(".md").write_text(md + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
