"""A sync pass with nothing new, at 1k / 10k / 50k turns (issue 12): this code against the code before it.

Corpus per size: a WAL ledger written by :class:`ledger.writer.LedgerWriter`
(one persona, 100 turns per session, each turn a user and an assistant message
of 30 words), indexed once by ``sync_once`` into a LanceDB sink with the fake
embedder (``tests/fake_embedder.py``: nothing is embedded by a no-op pass, so
the model does not matter; the sink is the real ``LanceSink``). Cached in
``bench/out/noop-index/<size>-<key>/``.

Measured: ``sync_once`` on that index with no ledger change, in a fresh
process per run (3 warm-up passes, then ``--passes`` timed passes: wall time
and the thread's CPU time, which other load on this shared machine disturbs
less). Variants, in turns (A B C C B A ...), each on its own copy of the index:

- **before**: the code at ``--baseline`` (default: the commit before issue 12's
  changes), extracted with ``git archive`` into ``bench/out/noop-baseline/``
  and run on an index that code builds itself from the same ledger (an index
  of this code's document format and redaction version would be rebuilt by
  it, not passed over), so it runs exactly as it did;
- **after**: this code, the ledger files unchanged since the last full check
  (the usual idle pass: the safety-net interval pass, a memory-file event);
- **after, checks in full**: this code with the per-pass ledger checks forced
  to run (``ix.quiet.forget()`` before each pass): what a pass costs when the
  ledger files changed without a new history row for this persona (another
  persona's turn, a status change, a pending turn completing).

    python -m bench.noop_pass [--quick] [--sizes 1k,10k,50k] [--runs 5] [--passes 30] [--baseline REV]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.common import OUT, REPO, Timer, file_lock, fmt_s, loadavg, log, md_table, sha256_json, write_outputs

NAME = "noop_pass"
CORPUS_VERSION = "noop-corpus-v1"
PERSONA = "bench"
TURNS_PER_SESSION = 100
WORDS = ("deploy cache token schema migration retry budget latency shard index vector kafka redis postgres jwt "
         "expiry rollout canary alert queue worker").split()
SIZES = {"1k": 1_000, "10k": 10_000, "50k": 50_000}
BASELINE = "a0537d1"  # ledger-indexer before issue 12 (no-op pass and memory work)
TARGET_MS = 10.0
WORK = OUT / "noop-work"

# The child: the same code for both versions of the package (it uses only names both have).
CHILD = r"""
import json, os, sys, time, logging
src, index_dir, ledger, passes, full = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1"
sys.path.insert(0, src)
os.environ.setdefault("LANCEDB_LOG", "error")
import structlog
structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
from tests.fake_embedder import FakeEmbedder
from indexer.runtime.config import load_config
from indexer.sync.context import open_indexer, build_sinks
from indexer.sync.engine import sync_once
import indexer
assert indexer.__file__.startswith(src), (indexer.__file__, src)
cfg = load_config(None, env={}, overrides={"ledger": {"path": ledger}, "index": {"dir": index_dir, "sinks": ["lancedb"]}})
ix = open_indexer(cfg, sinks=build_sinks(cfg, embedder=FakeEmbedder()))
wall, cpu = [], []
for i in range(3 + passes):
    if full:
        ix.quiet.forget()
    w0, c0 = time.perf_counter(), time.thread_time()
    s = sync_once(ix)
    c1, w1 = time.thread_time(), time.perf_counter()
    p = s.personas["bench"]
    assert p.mode == "tail" and p.documents_written == 0 and p.documents_deleted == 0, p
    if i >= 3:
        wall.append((w1 - w0) * 1000)
        cpu.append((c1 - c0) * 1000)
ix.close()
print(json.dumps({"wall_ms": wall, "cpu_ms": cpu}))
"""

# A child that builds an index with the code at ``src`` (the first pass over the ledger, then the
# sink's maintenance, as :func:`corpus` does for this code).
BUILD_CHILD = CHILD.split("wall, cpu = [], []")[0] + r"""
s = sync_once(ix)
assert s.personas["bench"].documents_written > 0, s
for sink in ix.sinks:
    sink.maintain(force=True)
ix.close()
print(json.dumps({"written": s.personas["bench"].documents_written}))
"""


# -- corpus -----------------------------------------------------------------------------------------


def write_ledger(path: Path, n_turns: int) -> None:
    from ledger.writer import LedgerWriter

    rng = random.Random(n_turns)
    sessions = max(1, n_turns // TURNS_PER_SESSION)
    with LedgerWriter(path, start_ms=1_700_000_000_000, seed=n_turns) as w:
        w.execute("PRAGMA synchronous=OFF")  # a benchmark corpus: no fsync per turn
        for i in range(n_turns):
            text = " ".join(rng.choice(WORDS) for _ in range(30))
            w.turn(f"noop-s{i % sessions:04d}", persona=PERSONA, user=f"question {i}: {text}",
                   assistant=f"answer {i}: {text[::-1]}")


def corpus(size: str) -> dict:
    """The ledger and its index for ``size`` (built once, then reused)."""
    from indexer.core.build import DOCUMENT_FORMAT_VERSION
    from indexer.core.chunking import CHUNKING_VERSION
    from redaction import REDACTION_VERSION

    n = SIZES[size]
    # What the index is built with belongs in the key: a cached index of another document format or
    # ruleset would make the first "no-op" pass a rebuild.
    key = sha256_json({"v": CORPUS_VERSION, "n": n, "tps": TURNS_PER_SESSION, "doc": DOCUMENT_FORMAT_VERSION,
                       "chunking": CHUNKING_VERSION, "redaction": REDACTION_VERSION})[:12]
    root = OUT / "noop-index" / f"{size}-{key}"
    with file_lock(OUT / "noop-index" / f".lock-{size}"):
        done = root / "built.json"
        if done.exists():
            info = json.loads(done.read_text())
            info.update(root=str(root), cached=True)
            return info
        if root.exists():
            shutil.rmtree(root)
        (root / "ledger").mkdir(parents=True)
        ledger = root / "ledger" / "agents.db"
        with Timer() as t_ledger:
            write_ledger(ledger, n)
        log(f"{size}: ledger of {n:,} turns written in {fmt_s(t_ledger.seconds)}; indexing it (fake embedder)")
        from indexer.runtime.config import load_config
        from indexer.sync.context import build_sinks, open_indexer
        from indexer.sync.engine import sync_once
        from tests.fake_embedder import FakeEmbedder

        cfg = load_config(None, env={}, overrides={"ledger": {"path": str(ledger)},
                                                    "index": {"dir": str(root / "index"), "sinks": ["lancedb"]}})
        ix = open_indexer(cfg, sinks=build_sinks(cfg, embedder=FakeEmbedder()))
        try:
            with Timer() as t_sync:
                summary = sync_once(ix)
            documents = ix.state.document_count(PERSONA)
            for sink in ix.sinks:
                sink.maintain(force=True)
        finally:
            ix.close()
        info = {"size": size, "turns": n, "sessions": max(1, n // TURNS_PER_SESSION), "documents": documents,
                "written": summary.documents_written, "ledger_s": round(t_ledger.seconds, 1),
                "index_s": round(t_sync.seconds, 1), "when": time.strftime("%Y-%m-%d %H:%M:%S")}
        done.write_text(json.dumps(info, indent=1))
        log(f"{size}: indexed {documents:,} documents in {fmt_s(t_sync.seconds)}")
        info.update(root=str(root), cached=False)
        return info


# -- the code before --------------------------------------------------------------------------------


def baseline_source(rev: str) -> Path:
    """The package at ``rev``, extracted (``git archive``: the repository and its worktrees are untouched)."""
    sha = subprocess.run(["git", "rev-parse", "--short=12", rev], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout.strip()
    dest = OUT / "noop-baseline" / sha
    if (dest / ".complete").exists():
        return dest
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    data = subprocess.run(["git", "archive", "--format=tar", sha, "indexer", "ledger", "redaction", "exporters",
                           "tests/fake_embedder.py"], cwd=REPO, capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(data.stdout)) as tar:
        tar.extractall(dest, filter="data")
    (dest / ".complete").write_text(sha + "\n")
    return dest


def index_copy(info: dict, variant: str) -> Path:
    """A private copy of the corpus's index for one variant (a pass may write meta rows)."""
    dest = WORK / f"{info['size']}-{variant}"
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(Path(info["root"]) / "index", dest)
    return dest


def index_built_by(src: Path, info: dict, variant: str, ledger: Path) -> Path:
    """An index of the corpus's ledger built by the code at ``src`` (the code before)."""
    dest = WORK / f"{info['size']}-{variant}"
    if dest.exists():
        shutil.rmtree(dest)
    with Timer() as t:
        got = run_child(src, dest, ledger, 0, False, script=BUILD_CHILD)
    log(f"  {info['size']} {variant}: its own index built ({got['written']:,} documents, {fmt_s(t.seconds)})")
    return dest


def wait_settled(ledger: Path) -> None:
    """The ledger files must look quiet (see indexer.sync.quiet): wait out a fresh corpus."""
    from indexer.sync.quiet import SETTLE_S

    newest = max(os.stat(p).st_mtime for p in (ledger, Path(f"{ledger}-wal")) if p.exists())
    pause = newest + SETTLE_S + 0.5 - time.time()
    if pause > 0:
        time.sleep(pause)


def run_child(src: Path, index_dir: Path, ledger: Path, passes: int, full: bool, *, script: str = CHILD) -> dict:
    proc = subprocess.run([sys.executable, "-c", script, str(src), str(index_dir), str(ledger), str(passes),
                           "1" if full else "0"], cwd=WORK, capture_output=True, text=True, timeout=1800,
                          env=dict(os.environ, PYTHONPATH=""))
    if proc.returncode != 0:
        raise SystemExit(f"a no-op child failed ({src}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(info: dict, before_src: Path | None, runs: int, passes: int) -> dict:
    ledger = Path(info["root"]) / "ledger" / "agents.db"
    wait_settled(ledger)
    variants = {"after": (REPO, False), "after_full": (REPO, True)}
    if before_src is not None:
        variants = {"before": (before_src, False), **variants}
    dirs = {name: index_built_by(src, info, name, ledger) if name == "before" else index_copy(info, name)
            for name, (src, _f) in variants.items()}
    wait_settled(ledger)
    names = list(variants)
    samples: dict[str, dict[str, list[float]]] = {n: {"wall_ms": [], "cpu_ms": [], "run_wall": []} for n in names}
    load_before = loadavg()
    for r in range(runs):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            src, full = variants[name]
            got = run_child(src, dirs[name], ledger, passes, full)
            samples[name]["wall_ms"] += got["wall_ms"]
            samples[name]["cpu_ms"] += got["cpu_ms"]
            samples[name]["run_wall"].append(statistics.median(got["wall_ms"]))
    out = {"load_before": load_before, "load_after": loadavg(), "runs": runs, "passes": passes}
    for name in names:
        s = samples[name]
        out[name] = {"wall_p50": statistics.median(s["wall_ms"]), "cpu_p50": statistics.median(s["cpu_ms"]),
                     "wall_p95": sorted(s["wall_ms"])[int(0.95 * (len(s["wall_ms"]) - 1))],
                     "run_medians": s["run_wall"], "n": len(s["wall_ms"])}
        log(f"  {info['size']} {name}: wall p50 {out[name]['wall_p50']:.2f} ms, CPU p50 {out[name]['cpu_p50']:.2f} ms")
    for name in names:
        shutil.rmtree(dirs[name], ignore_errors=True)
    return out


# -- report -----------------------------------------------------------------------------------------


def report(ctx: dict) -> str:
    base = ctx.get("baseline")
    lines = ["## No-op sync pass (issue 12)", "",
             ("`sync_once` with nothing new in the ledger, one persona, 100 turns per session; the index built by "
              "`sync_once` into the real LanceDB sink with the fake embedder (a no-op pass embeds nothing). "
              f"Each figure: median over {ctx['runs']} fresh processes × {ctx['passes']} passes (after 3 warm-up "
              "passes); the variants take turns process by process (A B C C B A …), each on its own copy of the "
              "index. CPU = the thread's CPU time (less disturbed by other load on this shared, noisy 2-core VM "
              "than wall time). "
              + (f"*before* = the code at `{base}` (extracted with `git archive`, on an index it built "
                 "itself from the same ledger). " if base else "")
              + "*after* = this code, ledger files unchanged since the last full check (the usual idle pass); "
              "*after, checks in full* = this code with the per-pass ledger checks (session registry, pending "
              "turns, bad-turn fingerprints) forced, as when the ledger files changed without a new history row "
              "for the persona."), ""]
    rows = []
    for size in ctx["sizes"]:
        m = ctx["results"][size]
        info = ctx["corpus"][size]
        row = [size, f"{info['turns']:,}", f"{info['sessions']:,}", f"{info['documents']:,}"]
        b = m.get("before")
        row += [f"{b['wall_p50']:.1f} / {b['cpu_p50']:.1f}" if b else "–"]
        a, f = m["after"], m["after_full"]
        row += [f"**{a['wall_p50']:.1f}** / {a['cpu_p50']:.1f}", f"{f['wall_p50']:.1f} / {f['cpu_p50']:.1f}"]
        row += [f"{b['wall_p50'] / a['wall_p50']:.1f}×" if b else "–"]
        row += ["yes" if a["wall_p50"] <= TARGET_MS else "**no**"]
        rows.append(row)
    lines.append(md_table(["size", "turns", "sessions", "documents", "before ms (wall / CPU)",
                           "after ms (wall / CPU)", "after, checks in full ms (wall / CPU)", "before / after (wall)",
                           f"≤ {TARGET_MS:.0f} ms"], rows))
    lines += ["", ("What a no-op pass no longer does: scan every document row of the persona in the state DB "
                   "(the memory-file check's `paths(persona, source)`: schema 3 adds the index on "
                   "`files(persona, source)`, and one on `bad_rows(persona, checked_at, …)` for the bad-turn "
                   "rotation); read and redact every memory file (re-read only when its stat changed); read every "
                   "ledger session for the registry refresh, rebuild pending turns and compare bad-turn "
                   "fingerprints while the ledger files (inode, size, mtime of `agents.db` and `-wal`) are as they "
                   "were when those checks last ran (`indexer/sync/quiet.py`; files modified in the last 2 s are "
                   "never trusted, and every check runs in full at least every 5 min); read the cursor row's "
                   "fingerprint twice. New history rows never depend on that: head and cursor are compared by a "
                   "query every pass."), ""]
    p95 = [[size, f"{ctx['results'][size].get('before', {}).get('wall_p95', float('nan')):.1f}",
            f"{ctx['results'][size]['after']['wall_p95']:.1f}",
            ", ".join(f"{x:.1f}" for x in ctx["results"][size]["after"]["run_medians"])]
           for size in ctx["sizes"]]
    lines += [md_table(["size", "before p95 ms (wall)", "after p95 ms (wall)", "after: median of each process (wall ms)"],
                       p95), ""]
    lines += [f"Load average {ctx['load_before']} before, {ctx['load_after']} after.", "",
              "### Time", "", md_table(["step", "time"], [[k, fmt_s(v)] for k, v in ctx["timing"].items()])]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.noop_pass", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1k and 10k only, 2 runs of 10 passes")
    ap.add_argument("--sizes", default=None, help="comma-separated subset of 1k,10k,50k")
    ap.add_argument("--runs", type=int, default=None, help="fresh processes per variant (default 5)")
    ap.add_argument("--passes", type=int, default=None, help="timed passes per process (default 30)")
    ap.add_argument("--baseline", default=BASELINE, help="git revision of the code before (empty: no before)")
    args = ap.parse_args(argv)
    sizes = [s.strip() for s in (args.sizes or ("1k,10k" if args.quick else "1k,10k,50k")).split(",") if s.strip()]
    unknown = set(sizes) - set(SIZES)
    if unknown:
        ap.error(f"unknown size(s): {', '.join(sorted(unknown))}")
    runs = args.runs or (2 if args.quick else 5)
    passes = args.passes or (10 if args.quick else 30)
    started = time.perf_counter()
    timing: dict[str, float] = {}
    WORK.mkdir(parents=True, exist_ok=True)
    before_src = baseline_source(args.baseline) if args.baseline else None
    ctx: dict = {"sizes": sizes, "runs": runs, "passes": passes, "baseline": args.baseline or None,
                 "corpus": {}, "results": {}, "timing": timing, "load_before": loadavg(), "quick": args.quick}
    for size in sizes:
        with Timer() as t:
            info = corpus(size)
        timing[f"{size} corpus ({'cached' if info['cached'] else 'built'})"] = t.seconds
        ctx["corpus"][size] = {k: v for k, v in info.items() if k != "root"}
        with Timer() as t:
            ctx["results"][size] = measure(info, before_src, runs, passes)
        timing[f"{size} passes"] = t.seconds
    ctx["load_after"] = loadavg()
    timing["total"] = time.perf_counter() - started
    path = write_outputs(NAME, report(ctx), ctx)
    log(f"wrote {path} ({fmt_s(timing['total'])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
