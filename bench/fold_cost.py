"""What folding new rows in at the end of a pass costs a tail pass, and what it buys the first
queries after a backfill (issue 33): this code against the code before it.

Since 3bfafcd, ``LanceSink.after_batch()`` (run once at the end of every sync pass that wrote)
reads the index metadata of each table written (``exporters/lancedb/coverage.py``) and, when more
than 5 % of its rows (and at least 256) are outside an index, runs ``optimize`` (folds them into
the full-text, scalar and vector indexes) and builds or re-trains the vector index when due.
Before it, ``after_batch`` did nothing: only the daemon's scheduled ``maintain()`` and the sink's
own optimize every 50 commits folded rows in.

Variants (nothing else changed in that commit, so the same code reproduces the code before it
exactly; chosen over a ``git archive`` of 3bfafcd^ as bench/noop_pass.py does): **before** = the
sink's ``after_batch`` replaced by a no-op; **after** = this code.

Corpus: a WAL ledger written by :class:`ledger.writer.LedgerWriter` (one persona, 100 turns per
session, each turn a user and an assistant message, two real dialogue lines drawn at random from
LoCoMo, read from ``../shared``), indexed by ``sync_once`` into a LanceDB sink with the real model
(packaged MiniLM behind its vector cache, as the daemon loads it) and the real redactor, then
``maintain(force=True)`` (the daemon's first maintenance: every index built, vector included).
Cached in ``bench/out/fold-index/<turns>-<key>/`` with the vector cache of every corpus text.

Measured:

1. **Tail passes**: on copies of that maintained index, ``--passes`` passes of k new turns each
   (k = 1, 5, 50; the turns appended to the ledger copy just before each pass, new sessions of
   100 turns as in the corpus; their texts are embedded by the model, not found in the cache).
   Both variants run in one process, each on its own copy of the index and ledger, the same turns
   appended to both; they take turns pass by pass (A B, B A, ...), so the load of this shared
   machine falls on both alike; ``--runs`` fresh processes. Per pass: wall time, the calling
   thread's CPU time and the process's (embedding and Lance's work run on native threads the
   thread's figure misses); whether the sink optimized (this code's fold rule, or the optimize
   every 50 commits both variants have) and the time inside ``after_batch``; the rows outside
   ``text_idx`` / ``vector_idx`` at the end. 50 passes at k = 1 and 5 are one cycle of the
   every-50-commits optimize; 7 at k = 50 are one cycle of this code's fold (at 6,000 rows).
2. **First queries after a backfill**: a fresh index of the whole ledger (the backfill pass; vectors
   from the cache, so the pass is redaction, chunking and writes), then, in the same process (a
   daemon answering its first queries), ``--queries`` hybrid persona-scope searches through
   :class:`indexer.search.searcher.Searcher` (LoCoMo questions; 5 warm-up queries first), then
   ``maintain(force=True)`` (the daemon's first maintenance) and the same searches again; p50/p90,
   and the coverage of ``text_idx`` and ``vector_idx`` at each point. One fresh process per variant and
   run, in turns (A B B A ...).

    python -m bench.fold_cost [--quick] [--turns 6000] [--runs 2] [--passes 1:50,5:50,50:7] [--queries 60]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench.common import (
    LOCOMO_PATH,
    OUT,
    REPO,
    Timer,
    file_lock,
    fmt_s,
    git_commit,
    loadavg,
    log,
    md_table,
    percentile,
    sha256_file,
    sha256_json,
    write_outputs,
)

NAME = "fold_cost"
CORPUS_VERSION = "fold-corpus-v1"
PERSONA = "bench"
TURNS_PER_SESSION = 100
VARIANTS = ("before", "after")
WORK = OUT / "fold-work"
WARMUP_QUERIES = 5
MAX_RESULTS = 6
START_MS = 1_700_000_000_000
SYNTH_WORDS = ("deploy cache token schema migration retry budget latency shard index vector kafka redis postgres "
               "jwt expiry rollout canary alert queue worker harbour crane blue garden violin recipe").split()


# -- text -------------------------------------------------------------------------------------------


def corpus_lines() -> list[str]:
    """Real dialogue lines (LoCoMo) when the data is present, else synthetic sentences."""
    if LOCOMO_PATH.exists():
        from bench.latency import locomo_lines

        return locomo_lines()
    rng = random.Random(5)
    return [" ".join(rng.choice(SYNTH_WORDS) for _ in range(18)) for _ in range(4000)]


def queries() -> list[str]:
    if LOCOMO_PATH.exists():
        from bench.latency import locomo_questions

        return locomo_questions()
    rng = random.Random(6)
    return [" ".join(rng.sample(SYNTH_WORDS, 4)) + "?" for _ in range(500)]


def turn_texts(i: int, lines: Sequence[str]) -> tuple[str, str]:
    """Turn ``i``'s user and assistant messages (deterministic: the same in every variant)."""
    rng = random.Random(i * 7919 + 17)
    return lines[rng.randrange(len(lines))], lines[rng.randrange(len(lines))]


def session_of(i: int) -> str:
    return f"fold-s{i // TURNS_PER_SESSION:05d}"


def append_turns(writer, start: int, count: int, lines: Sequence[str]) -> None:
    for i in range(start, start + count):
        user, assistant = turn_texts(i, lines)
        writer.turn(session_of(i), persona=PERSONA, user=user, assistant=assistant, ts=START_MS + i * 60_000)


# -- the indexer ------------------------------------------------------------------------------------


def config_for(ledger: Path, index_dir: Path):
    from indexer.runtime.config import load_config

    return load_config(None, env={}, overrides={"ledger": {"path": str(ledger)},
                                                "index": {"dir": str(index_dir), "sinks": ["lancedb"]}})


def open_ix(ledger: Path, index_dir: Path, variant: str):
    """An Indexer as the daemon and the CLI open one (real model behind its vector cache in the
    index folder, real redactor); ``before``: the sink's ``after_batch`` is the no-op it was."""
    from indexer.sync.context import open_indexer

    cfg = config_for(ledger, index_dir)
    ix = open_indexer(cfg)
    sink = lance_sink(ix)
    calls = {"seconds": 0.0, "n": 0}
    inner = (lambda: None) if variant == "before" else sink.after_batch

    def timed_after_batch() -> None:
        t0 = time.perf_counter()
        try:
            inner()
        finally:
            calls["seconds"] += time.perf_counter() - t0
            calls["n"] += 1

    sink.after_batch = timed_after_batch  # an instance attribute: engine.py calls sink.after_batch()
    return cfg, ix, sink, calls


def lance_sink(ix):
    return next(s for s in ix.sinks if getattr(s, "name", "") == "lancedb")


def index_coverage(sink) -> dict:
    """Rows, and (indexed, unindexed) rows of ``text_idx``, ``vector_idx`` (None when it does not exist)
    and the scalar index leaving the most out; the table's fragments."""
    tbl = sink.active_table(PERSONA)
    out: dict = {"rows": int(tbl.count_rows()), "text_idx": None, "vector_idx": None, "scalar_worst": None}
    worst = -1
    for ix in tbl.list_indices():
        st = tbl.index_stats(ix.name)
        pair = [int(st.num_indexed_rows), int(st.num_unindexed_rows)]
        if ix.name in ("text_idx", "vector_idx"):
            out[ix.name] = pair
        elif pair[1] > worst:
            worst, out["scalar_worst"] = pair[1], pair + [ix.name]
    try:
        out["fragments"] = int(tbl.stats()["fragment_stats"]["num_fragments"])
    except Exception:
        out["fragments"] = None
    return out


def vector_built_ms(sink) -> int | None:
    meta = sink.index_meta(PERSONA) or {}
    return (meta.get("vector_index") or {}).get("built_ms")


def quiet_logs() -> None:
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    logging.getLogger().setLevel(logging.WARNING)


def sqlite_copy(src: Path, dest: Path) -> None:
    """A consistent copy of a WAL database (the SQLite backup API: what is still in ``-wal`` too)."""
    import sqlite3

    dest.parent.mkdir(parents=True, exist_ok=True)
    a, b = sqlite3.connect(src), sqlite3.connect(dest)
    try:
        a.backup(b)
    finally:
        b.close()
        a.close()
    con = sqlite3.connect(dest)
    con.execute("PRAGMA journal_mode=WAL")
    con.close()


# -- corpus -----------------------------------------------------------------------------------------


def corpus(turns: int) -> dict:
    """The ledger, the maintained index and the vector cache of ``turns`` turns (built once, reused)."""
    from indexer.core.build import DOCUMENT_FORMAT_VERSION
    from indexer.core.chunking import CHUNKING_VERSION
    from indexer.embedding import model_files

    key = sha256_json({"v": CORPUS_VERSION, "n": turns, "tps": TURNS_PER_SESSION, "format": DOCUMENT_FORMAT_VERSION,
                       "chunking": CHUNKING_VERSION, "model": model_files.FINGERPRINT,
                       "data": sha256_file(LOCOMO_PATH) if LOCOMO_PATH.exists() else "synthetic"})[:12]
    root = OUT / "fold-index" / f"{turns}-{key}"
    with file_lock(OUT / "fold-index" / f".lock-{turns}"):
        done = root / "built.json"
        if done.exists():
            info = json.loads(done.read_text())
            identity = current_identity(root)
            if identity == info.get("identity"):
                info.update(root=str(root), cached=True)
                return info
            log(f"the cached index {root.name} was built with another build identity (redaction?): rebuilding")
        if root.exists():
            shutil.rmtree(root)
        (root / "ledger").mkdir(parents=True)
        ledger = root / "ledger" / "agents.db"
        lines = corpus_lines()
        from ledger.writer import LedgerWriter

        with Timer() as t_ledger:
            with LedgerWriter(ledger, start_ms=START_MS, seed=turns) as w:
                w.execute("PRAGMA synchronous=OFF")  # a benchmark corpus: no fsync per turn
                append_turns(w, 0, turns, lines)
        log(f"ledger of {turns:,} turns written in {fmt_s(t_ledger.seconds)}; indexing it (real model)")
        quiet_logs()
        from indexer.sync.engine import sync_once

        cfg, ix, sink, _calls = open_ix(ledger, root / "index", "before")  # the daemon's path: backfill,
        try:                                                            # then its first maintenance
            with Timer() as t_sync:
                summary = sync_once(ix)
            with Timer() as t_maintain:
                sink.maintain(force=True)
            cov = index_coverage(sink)
            identity = ix.build_identity.as_dict()
            documents = ix.state.document_count(PERSONA)
        finally:
            ix.close()
        sqlite_copy(root / "index" / "embed_cache.sqlite", root / "embed_cache.sqlite")
        info = {"turns": turns, "sessions": -(-turns // TURNS_PER_SESSION), "documents": documents,
                "rows": cov["rows"], "written": summary.documents_written, "coverage": cov,
                "ledger_s": round(t_ledger.seconds, 1), "index_s": round(t_sync.seconds, 1),
                "maintain_s": round(t_maintain.seconds, 1), "identity": identity,
                "lines": "LoCoMo" if LOCOMO_PATH.exists() else "synthetic",
                "when": time.strftime("%Y-%m-%d %H:%M:%S")}
        done.write_text(json.dumps(info, indent=1))
        log(f"indexed {documents:,} documents ({cov['rows']:,} rows) in {fmt_s(t_sync.seconds)}, "
            f"maintenance {fmt_s(t_maintain.seconds)}")
        info.update(root=str(root), cached=False)
        return info


def current_identity(root: Path) -> dict:
    """The build identity this code gives the corpus's index (a cached index of another one would be
    rebuilt by its first pass, not tailed)."""
    from indexer.sync.context import open_indexer

    probe = WORK / f"probe-{os.getpid()}"
    shutil.rmtree(probe, ignore_errors=True)
    probe.mkdir(parents=True)
    try:
        ix = open_indexer(config_for(root / "ledger" / "agents.db", probe))
        try:
            return ix.build_identity.as_dict()
        finally:
            ix.close()
    finally:
        shutil.rmtree(probe, ignore_errors=True)


# -- children (one fresh process per variant and run) ------------------------------------------------


def child_tail(spec: dict) -> dict:
    """Tail sequences, one per k: both variants in this process, each on its own copy of the ledger and
    of the maintained index, the same k turns appended to both before each pair of passes; the pair's
    order alternates (A B, B A, ...: the load of this shared machine falls on both alike)."""
    quiet_logs()
    from indexer.sync.engine import sync_once
    from ledger.writer import LedgerWriter

    root = Path(spec["root"])
    lines = corpus_lines()
    out: dict = {"run": spec["run"], "load_before": loadavg(), "seq": {}}
    for k, passes in spec["passes"]:
        sides: dict[str, dict] = {}
        try:
            for v in VARIANTS:
                work = Path(spec["work"]) / f"k{k}-{v}"
                shutil.rmtree(work, ignore_errors=True)
                sqlite_copy(root / "ledger" / "agents.db", work / "ledger" / "agents.db")
                shutil.copytree(root / "index", work / "index")
                _cfg, ix, sink, calls = open_ix(work / "ledger" / "agents.db", work / "index", v)
                sides[v] = {"work": work, "ix": ix, "sink": sink, "calls": calls, "records": []}
                # warm-up without a write: ledger reader, state DB, the table, the model's session
                s = sync_once(ix)
                assert s.personas[PERSONA].mode == "tail" and s.documents_written == 0, s.as_dict()
                sink.embedder.embed_query("warm up")
                sides[v]["coverage_start"] = index_coverage(sink)
                sides[v]["writer"] = LedgerWriter(work / "ledger" / "agents.db", seed=spec["turns"],
                                                  start_ms=START_MS + spec["turns"] * 60_000)
            next_turn = spec["turns"]
            for p in range(passes):
                for v in VARIANTS:
                    append_turns(sides[v]["writer"], next_turn, k, lines)
                next_turn += k
                for v in (VARIANTS if (p + spec["run"]) % 2 == 0 else VARIANTS[::-1]):
                    side = sides[v]
                    ix, sink, calls = side["ix"], side["sink"], side["calls"]
                    opt0, commits0, vec0 = sink.optimizations, sink.commits, vector_built_ms(sink)
                    ab0 = calls["seconds"]
                    w0, c0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
                    s = sync_once(ix)
                    c1, p1, w1 = time.thread_time(), time.process_time(), time.perf_counter()
                    ps = s.personas[PERSONA]
                    assert ps.mode == "tail" and ps.documents_written == k, (k, s.as_dict())
                    side["records"].append({"wall_ms": (w1 - w0) * 1000, "cpu_ms": (c1 - c0) * 1000,
                                             "proc_cpu_ms": (p1 - p0) * 1000,
                                             "after_batch_ms": (calls["seconds"] - ab0) * 1000,
                                             "folded": sink.optimizations > opt0, "commits": sink.commits - commits0,
                                             "vector_built": vector_built_ms(sink) != vec0})
            out["seq"][str(k)] = {"k": k, **{v: {"passes": sides[v]["records"],
                                                   "coverage_start": sides[v]["coverage_start"],
                                                   "coverage_end": index_coverage(sides[v]["sink"])}
                                              for v in VARIANTS}}
        finally:
            for side in sides.values():
                if "writer" in side:
                    side["writer"].close()
                side["ix"].close()
                shutil.rmtree(side["work"], ignore_errors=True)
    out["load_after"] = loadavg()
    return out


def search_phase(searcher, reqs) -> dict:
    for r in reqs[:WARMUP_QUERIES]:
        searcher.search(r)
    times, counts = [], []
    for r in reqs[WARMUP_QUERIES:]:
        t0 = time.perf_counter()
        resp = searcher.search(r)
        times.append((time.perf_counter() - t0) * 1000)
        counts.append(len(resp.results))
    return {"ms": times, "p50": percentile(times, 50), "p90": percentile(times, 90),
            "results_mean": sum(counts) / max(1, len(counts))}


def child_backfill(spec: dict) -> dict:
    """A backfill of the whole ledger into a fresh index, queries, the first maintenance, queries."""
    quiet_logs()
    from indexer.search.searcher import Searcher, SearchRequest
    from indexer.sync.engine import sync_once

    root, variant = Path(spec["root"]), spec["variant"]
    work = Path(spec["work"]) / "backfill"
    shutil.rmtree(work, ignore_errors=True)
    (work / "index").mkdir(parents=True)
    sqlite_copy(root / "embed_cache.sqlite", work / "index" / "embed_cache.sqlite")  # vectors: no model time
    cfg, ix, sink, calls = open_ix(root / "ledger" / "agents.db", work / "index", variant)
    out: dict = {"variant": variant, "run": spec["run"], "load_before": loadavg()}
    try:
        sink.embedder.embed_query("warm up")
        w0, p0 = time.perf_counter(), time.process_time()
        s = sync_once(ix)
        out["backfill_s"] = time.perf_counter() - w0
        out["backfill_cpu_s"] = time.process_time() - p0
        out["after_batch_s"] = calls["seconds"]
        assert s.personas[PERSONA].mode == "backfill" and s.documents_written == spec["documents"], s.as_dict()
        out["cache_misses"] = getattr(sink.embedder, "misses", None)
        out["coverage_backfill"] = index_coverage(sink)
        rng = random.Random(spec["seed"])
        qs = queries()
        n = spec["queries"] + WARMUP_QUERIES
        picked = [qs[(i * 37 + spec["seed"]) % len(qs)] for i in range(n)]
        sessions = [session_of(i) for i in range(0, spec["turns"], TURNS_PER_SESSION)]
        reqs = [SearchRequest(query=q, persona=PERSONA, session=rng.choice(sessions), scope="persona",
                              max_results=MAX_RESULTS, mode="hybrid") for q in picked]
        searcher = Searcher(cfg, embedder=sink.embedder)  # one process: the daemon's searcher shares its model
        try:
            searcher.warm_up()
            out["q_backfill"] = search_phase(searcher, reqs)
            t0 = time.perf_counter()
            out["maintain_done"] = {k: v for k, v in sink.maintain(force=True).items() if k != "dropped"}
            out["maintain_s"] = time.perf_counter() - t0
            out["coverage_maintained"] = index_coverage(sink)
            out["q_maintained"] = search_phase(searcher, reqs)
        finally:
            searcher.close()
    finally:
        ix.close()
        shutil.rmtree(work, ignore_errors=True)
    out["load_after"] = loadavg()
    return out


def run_child(kind: str, spec: dict) -> dict:
    spec_path = WORK / f"spec-{os.getpid()}-{kind}-{spec['variant']}-{spec['run']}.json"
    spec_path.write_text(json.dumps(spec))
    try:
        proc = subprocess.run([sys.executable, "-m", "bench.fold_cost", "--child", kind, str(spec_path)], cwd=REPO,
                              capture_output=True, text=True, timeout=3600, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    finally:
        spec_path.unlink(missing_ok=True)
        shutil.rmtree(spec["work"], ignore_errors=True)  # the child removes its copies; this, their folder
    if proc.returncode != 0:
        raise SystemExit(f"a {kind} child ({spec['variant']}, run {spec['run']}) failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def order(runs: int) -> list[tuple[int, str]]:
    """A B B A A B ...: each variant first in every other run."""
    out = []
    for r in range(runs):
        for v in (VARIANTS if r % 2 == 0 else VARIANTS[::-1]):
            out.append((r, v))
    return out


# -- statistics -------------------------------------------------------------------------------------


def tail_stats(results: list[dict], ks: Sequence[int]) -> dict:
    """Per k and variant: the passes of every run pooled; per k: after / before of each pair of passes."""
    out: dict = {}
    for k in ks:
        out[str(k)] = {}
        seqs = [res["seq"][str(k)] for res in results]
        for v in VARIANTS:
            recs = [r for seq in seqs for r in seq[v]["passes"]]
            ends = [seq[v]["coverage_end"] for seq in seqs]
            folds = [r for r in recs if r["folded"]]
            plain = [r for r in recs if not r["folded"]]

            def col(rs, key):
                return [r[key] for r in rs]

            out[str(k)][v] = {
                "n": len(recs), "runs": len(seqs),
                "wall_p50": percentile(col(recs, "wall_ms"), 50), "wall_p90": percentile(col(recs, "wall_ms"), 90),
                "cpu_p50": percentile(col(recs, "cpu_ms"), 50), "cpu_p90": percentile(col(recs, "cpu_ms"), 90),
                "proc_cpu_p50": percentile(col(recs, "proc_cpu_ms"), 50),
                "proc_cpu_p90": percentile(col(recs, "proc_cpu_ms"), 90),
                "wall_mean": statistics.fmean(col(recs, "wall_ms")) if recs else float("nan"),
                "proc_cpu_mean": statistics.fmean(col(recs, "proc_cpu_ms")) if recs else float("nan"),
                "plain_wall_p50": percentile(col(plain, "wall_ms"), 50),
                "plain_after_batch_p50": percentile(col(plain, "after_batch_ms"), 50),
                "after_batch_mean": statistics.fmean(col(recs, "after_batch_ms")) if recs else float("nan"),
                "folds": len(folds), "folds_per_run": len(folds) / max(1, len(seqs)),
                "fold_wall_p50": percentile(col(folds, "wall_ms"), 50),
                "fold_wall_max": max(col(folds, "wall_ms")) if folds else float("nan"),
                "fold_proc_cpu_p50": percentile(col(folds, "proc_cpu_ms"), 50),
                "fold_after_batch_p50": percentile(col(folds, "after_batch_ms"), 50),
                "fold_passes": [i for seq in seqs for i, r in enumerate(seq[v]["passes"], 1) if r["folded"]],
                "vector_builds": sum(1 for r in recs if r["vector_built"]),
                "run_wall_p50": [percentile(col(seq[v]["passes"], "wall_ms"), 50) for seq in seqs],
                "end_text_unindexed": [e["text_idx"][1] if e["text_idx"] else None for e in ends],
                "end_vector_unindexed": [e["vector_idx"][1] if e["vector_idx"] else None for e in ends],
                "end_rows": [e["rows"] for e in ends],
            }
        pairs = [(b, a) for seq in seqs for b, a in zip(seq["before"]["passes"], seq["after"]["passes"])]
        out[str(k)]["paired"] = {
            "n": len(pairs),
            "wall_ratio_p50": percentile([a["wall_ms"] / b["wall_ms"] for b, a in pairs], 50),
            "proc_cpu_ratio_p50": percentile([a["proc_cpu_ms"] / b["proc_cpu_ms"] for b, a in pairs], 50),
            "cpu_ratio_p50": percentile([a["cpu_ms"] / b["cpu_ms"] for b, a in pairs], 50),
            "wall_diff_p50": percentile([a["wall_ms"] - b["wall_ms"] for b, a in pairs], 50),
        }
    return out


def backfill_stats(results: list[dict]) -> dict:
    out: dict = {}
    for v in VARIANTS:
        rs = [r for r in results if r["variant"] == v]
        if not rs:
            continue
        qb = [t for r in rs for t in r["q_backfill"]["ms"]]
        qm = [t for r in rs for t in r["q_maintained"]["ms"]]
        out[v] = {"runs": len(rs), "n": len(qb),
                  "backfill_s": statistics.median(r["backfill_s"] for r in rs),
                  "after_batch_s": statistics.median(r["after_batch_s"] for r in rs),
                  "maintain_s": statistics.median(r["maintain_s"] for r in rs),
                  "qb_p50": percentile(qb, 50), "qb_p90": percentile(qb, 90),
                  "qm_p50": percentile(qm, 50), "qm_p90": percentile(qm, 90),
                  "qb_run_p50": [r["q_backfill"]["p50"] for r in rs],
                  "qm_run_p50": [r["q_maintained"]["p50"] for r in rs],
                  "coverage_backfill": rs[-1]["coverage_backfill"],
                  "coverage_maintained": rs[-1]["coverage_maintained"]}
    return out


# -- report -----------------------------------------------------------------------------------------


def _pair(p) -> str:
    return "none" if not p else f"{p[0]:,} / {p[1]:,}"


def _ms(x: float) -> str:
    return "–" if x != x else (f"{x:.0f}" if x >= 100 else f"{x:.1f}")


def _ratio(a: float, b: float) -> str:
    return "–" if not (a == a and b == b) or b == 0 else f"{a / b:.2f}×"


def report(ctx: dict) -> str:
    c = ctx["corpus"]
    t = ctx["tail"]
    lines = ["## Folding new rows in at the end of a pass (issue 33)", "",
             (f"Corpus: {c['turns']:,} turns ({c['lines']} dialogue lines, 100 turns per session, one persona) in a "
              f"WAL ledger, indexed by `sync_once` into the LanceDB sink with the real model and redactor "
              f"({c['documents']:,} documents, {c['rows']:,} rows), then `maintain(force=True)`. "
              "*before* = `LanceSink.after_batch` replaced by a no-op on the sink (the code before 3bfafcd, where "
              "it did nothing; nothing else changed, so the same process reproduces it exactly); *after* = this "
              "code."), "",
             "### Tail passes", "",
             (f"From the maintained index, {', '.join(f'{n} passes of k = {k}' for k, n in ctx['passes'])} new "
              "turns each (appended to the ledger just before the pass; new texts, embedded by the model). Both "
              "variants in one process, each on its own copy of the index and ledger, the same turns appended to "
              "both; they take turns pass by pass (A B, B A, …), in "
              f"{ctx['runs']} fresh processes. Wall and CPU time per pass in ms (process CPU: all threads, the "
              "model's and Lance's included; thread CPU: the thread calling `sync_once`); *paired* = median over "
              "the pairs of passes of after / before; *mean* = the amortized cost, fold passes included."), ""]
    rows = []
    for k, _n in ctx["passes"]:
        b, a, pr = t[str(k)]["before"], t[str(k)]["after"], t[str(k)]["paired"]
        rows.append([f"{k}", f"{pr['n']}",
                     f"{_ms(b['wall_p50'])} / {_ms(b['wall_p90'])}", f"{_ms(a['wall_p50'])} / {_ms(a['wall_p90'])}",
                     f"**{pr['wall_ratio_p50']:.2f}×**",
                     f"{_ms(b['proc_cpu_p50'])} / {_ms(a['proc_cpu_p50'])} ({pr['proc_cpu_ratio_p50']:.2f}×)",
                     f"{_ms(b['cpu_p50'])} / {_ms(a['cpu_p50'])} ({pr['cpu_ratio_p50']:.2f}×)",
                     f"{_ms(b['wall_mean'])} / {_ms(a['wall_mean'])} ({_ratio(a['wall_mean'], b['wall_mean'])})"])
    lines.append(md_table(["k turns", "pairs of passes", "before wall p50 / p90", "after wall p50 / p90",
                           "after / before wall (paired)", "process CPU p50 before / after (paired)",
                           "thread CPU p50 before / after (paired)", "mean wall before / after"], rows))
    lines += ["", ("Folds (passes in which the sink optimized: this code's rule, or the optimize every 50 commits "
                   "both variants have), the time spent in `after_batch`, and what readers search flat at the end "
                   "of each run (rows outside `text_idx` / `vector_idx`):"), ""]
    rows = []
    for k, _n in ctx["passes"]:
        for v in VARIANTS:
            s = t[str(k)][v]
            rows.append([f"{k}", v, f"{s['folds_per_run']:.1f}", ", ".join(map(str, s["fold_passes"])) or "–",
                         f"{_ms(s['fold_wall_p50'])} / {_ms(s['fold_wall_max'])}" if s["folds"] else "–",
                         _ms(s["fold_after_batch_p50"]) if s["folds"] else "–",
                         f"{s['plain_after_batch_p50']:.2f}", f"{s['after_batch_mean']:.1f}",
                         f"{s['vector_builds']}",
                         " ; ".join(f"{x if x is not None else 'none'} / {y if y is not None else 'none'}"
                                    for x, y in zip(s["end_text_unindexed"], s["end_vector_unindexed"])),
                         " ; ".join(f"{r:,}" for r in s["end_rows"]),
                         ", ".join(_ms(x) for x in s["run_wall_p50"])])
    lines.append(md_table(["k", "variant", "folds per run", "passes that folded (each run)",
                           "fold pass wall p50 / max ms", "of it in after_batch ms",
                           "after_batch ms, other passes (p50)", "after_batch ms per pass, mean (amortized)",
                           "vector index builds", "unindexed text / vector at the end (each run)",
                           "rows at the end", "wall p50 of each run ms"], rows))
    b = ctx.get("backfill") or {}
    if b:
        lines += ["", "### First queries after a backfill", "",
                  (f"A backfill of the {c['turns']:,}-turn ledger into a fresh index (vectors from the cache: the "
                   "pass is redaction, chunking and writes), then in the same process "
                   f"{ctx['queries']} hybrid persona-scope searches (`Searcher`, LoCoMo questions, max_results "
                   f"{MAX_RESULTS}, after {WARMUP_QUERIES} warm-up queries), then `maintain(force=True)` (the "
                   "daemon's first maintenance), then the same searches again. Coverage: indexed / unindexed rows."),
                  ""]
        rows = []
        for v in VARIANTS:
            s = b.get(v)
            if not s:
                continue
            cb, cm = s["coverage_backfill"], s["coverage_maintained"]
            rows.append([v, f"{s['backfill_s']:.1f} ({s['after_batch_s']:.1f})",
                         _pair(cb["text_idx"]), _pair(cb["vector_idx"]),
                         f"**{_ms(s['qb_p50'])}** / {_ms(s['qb_p90'])}",
                         f"{s['maintain_s']:.1f}", _pair(cm["text_idx"]), _pair(cm["vector_idx"]),
                         f"**{_ms(s['qm_p50'])}** / {_ms(s['qm_p90'])}",
                         f"{_ratio(s['qb_p50'], s['qm_p50'])}"])
        lines.append(md_table(["variant", "backfill pass s (of it: fold at its end)", "after backfill: text_idx",
                               "vector_idx", "queries p50 / p90 ms", "first maintenance s", "after it: text_idx",
                               "vector_idx", "queries p50 / p90 ms", "after backfill / after maintenance (p50)"],
                              rows))
        lines += ["", "Per run, query p50 after the backfill → after maintenance (ms): "
                  + "; ".join(f"{v}: " + ", ".join(f"{x:.0f} → {y:.0f}" for x, y in zip(b[v]["qb_run_p50"],
                                                                                         b[v]["qm_run_p50"]))
                              for v in VARIANTS if v in b)]
    lines += ["", f"Commit {ctx.get('commit', '?')}; load average {ctx['load_before']} before, {ctx['load_after']} "
              "after (shared 2-core VM).", "",
              "### Time", "", md_table(["step", "time"], [[k, fmt_s(v)] for k, v in ctx["timing"].items()])]
    return "\n".join(lines)


# -- main -------------------------------------------------------------------------------------------


def parse_passes(text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split(","):
        k, _, n = part.strip().partition(":")
        out.append((int(k), int(n)))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.fold_cost", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1,000 turns, one run per variant, short sequences")
    ap.add_argument("--turns", type=int, default=None, help="turns in the ledger (default 6000; 20000 optional)")
    ap.add_argument("--runs", type=int, default=None, help="fresh processes per variant (default 2: A B B A)")
    ap.add_argument("--passes", default=None, help="k:passes per tail sequence (default 1:50,5:50,50:7)")
    ap.add_argument("--queries", type=int, default=None, help="searches per phase (default 60)")
    ap.add_argument("--no-backfill", action="store_true", help="tail passes only")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        kind, spec_path = args.child
        spec = json.loads(Path(spec_path).read_text())
        result = child_tail(spec) if kind == "tail" else child_backfill(spec)
        print(json.dumps(result))
        return 0
    turns = args.turns or (1_000 if args.quick else 6_000)
    runs = args.runs or (1 if args.quick else 2)
    passes = parse_passes(args.passes or ("1:8,5:8,50:8" if args.quick else "1:50,5:50,50:7"))
    n_queries = args.queries or (20 if args.quick else 60)
    started = time.perf_counter()
    timing: dict[str, float] = {}
    WORK.mkdir(parents=True, exist_ok=True)
    ctx: dict = {"turns": turns, "runs": runs, "passes": passes, "queries": n_queries, "timing": timing,
                 "load_before": loadavg(), "quick": args.quick, "commit": git_commit()}
    with Timer() as t:
        info = corpus(turns)
    timing[f"corpus ({'cached' if info['cached'] else 'built'})"] = t.seconds
    ctx["corpus"] = {k: v for k, v in info.items() if k not in ("root", "identity")}
    base = {"root": info["root"], "turns": turns, "documents": info["documents"]}
    tails: list[dict] = []
    with Timer() as t:
        for r in range(runs):
            work = WORK / f"{os.getpid()}-tail-{r}"
            with Timer() as tc:
                tails.append(run_child("tail", {**base, "variant": "both", "run": r, "passes": passes,
                                                "work": str(work)}))
            s = tails[-1]["seq"]
            log(f"tail run {r}: " + "; ".join(
                f"k={k} p50 " + " / ".join(
                    f"{percentile([p['wall_ms'] for p in s[str(k)][v]['passes']], 50):.0f} ms "
                    f"({sum(p['folded'] for p in s[str(k)][v]['passes'])} folds)" for v in VARIANTS)
                for k, _n in passes) + f" (before / after; {fmt_s(tc.seconds)})")
    timing["tail passes"] = t.seconds
    ctx["tail_runs"] = tails
    ctx["tail"] = tail_stats(tails, [k for k, _n in passes])
    if not args.no_backfill:
        backs: list[dict] = []
        with Timer() as t:
            for r, v in order(runs):
                work = WORK / f"{os.getpid()}-{v}-{r}"
                with Timer() as tc:
                    backs.append(run_child("backfill", {**base, "variant": v, "run": r, "queries": n_queries,
                                                        "seed": 1000 + r, "work": str(work)}))
                b = backs[-1]
                log(f"backfill {v} run {r}: pass {b['backfill_s']:.1f} s (after_batch {b['after_batch_s']:.1f} s), "
                    f"queries p50 {b['q_backfill']['p50']:.0f} ms → after maintenance ({b['maintain_s']:.1f} s) "
                    f"{b['q_maintained']['p50']:.0f} ms ({fmt_s(tc.seconds)})")
        timing["backfills and queries"] = t.seconds
        ctx["backfill_runs"] = backs
        ctx["backfill"] = backfill_stats(backs)
    ctx["load_after"] = loadavg()
    timing["total"] = time.perf_counter() - started
    path = write_outputs(NAME, report(ctx), ctx)
    log(f"wrote {path} ({fmt_s(timing['total'])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
