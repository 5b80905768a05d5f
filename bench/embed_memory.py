"""Embedding memory and speed by setting (issue 12): the shipped ``FastEmbedder``, one fresh process per run.

Each run loads the packaged model (all-MiniLM-L6-v2 int8) with one set of
``[embedding]`` settings and embeds the same chunk-sized texts (``--texts``,
LoCoMo lines joined to 30–250 tokens, as chunks are) in one ``embed`` call:
resident memory when loaded, the peak while embedding (VmRSS sampled every
20 ms, and VmHWM), resident memory after the call, and texts per wall and per
CPU second. A fresh process per run because glibc's settings are per process.
Variants take turns (A B C D D C B A …); medians of ``--runs``.

- **before**: the release before issue 12: arena kept (``release_memory =
  false``), batches of 32 by count (``max_batch_tokens = 0``), spinning threads;
- **arena kept**: the token bound and no spinning, but the arena kept
  (``release_memory = false``): what the arena alone keeps;
- **after**: the defaults (arena shrunk after every run, 2048 tokens a batch,
  no spinning, fixed mmap threshold, ``malloc_trim`` after the call);
- **no arena**: the defaults with ``cpu_mem_arena = false``.

    python -m bench.embed_memory [--quick] [--runs 3] [--texts 300]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence

from bench.common import REPO, Timer, fmt_s, loadavg, log, md_table, write_outputs

NAME = "embed_memory"
VARIANTS = {
    "before": {"cpu_mem_arena": True, "release_memory": False, "max_batch_tokens": 0, "allow_spinning": True},
    "arena_kept": {"cpu_mem_arena": True, "release_memory": False, "max_batch_tokens": 2048, "allow_spinning": False},
    "after": {},
    "no_arena": {"cpu_mem_arena": False},
}
LABELS = {"before": "before (arena kept, 32 by count, spinning)", "arena_kept": "arena kept (2048 tokens, no spinning)",
          "after": "**after (defaults)**", "no_arena": "after, `cpu_mem_arena = false`"}

CHILD = r"""
import json, sys, threading, time
settings, texts = json.loads(sys.argv[1]), json.loads(sys.stdin.read())
def status():
    out = {}
    for line in open("/proc/self/status"):
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) / 1024
    return out
from indexer.embedding.embedder import FastEmbedder
e = FastEmbedder(**settings)
loaded = status()["VmRSS"]
peak, stop = [0.0], threading.Event()
def sample():
    while not stop.is_set():
        peak[0] = max(peak[0], status()["VmRSS"])
        time.sleep(0.02)
thread = threading.Thread(target=sample, daemon=True)
thread.start()
w0, c0 = time.perf_counter(), time.process_time()
e.embed(texts)
wall, cpu = time.perf_counter() - w0, time.process_time() - c0
stop.set(); thread.join()
end = status()
print(json.dumps({"loaded_mb": loaded, "peak_mb": max(peak[0], end["VmHWM"]), "after_mb": end["VmRSS"],
                  "texts_per_s": len(texts) / wall, "texts_per_cpu_s": len(texts) / cpu, "batches": e.calls,
                  "largest_batch_tokens": e.largest_batch_tokens}))
"""


def chunk_texts(n: int, seed: int = 12) -> list[str]:
    """Texts of 30–250 tokens (whitespace words ≈ 1.3 tokens): LoCoMo lines joined."""
    from bench.latency import locomo_lines

    lines = locomo_lines()
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = rng.randint(25, 190)
        parts: list[str] = []
        while sum(len(p.split()) for p in parts) < words:
            parts.append(rng.choice(lines))
        out.append(" ".join(" ".join(parts).split()[:words]))
    return out


def run_child(settings: dict, texts: list[str]) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(settings)], input=json.dumps(texts), cwd=REPO,
                          capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"embedding child failed ({settings}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def report(ctx: dict) -> str:
    lines = ["## Embedding memory and speed by setting (issue 12)", "",
             (f"The shipped `FastEmbedder`, one fresh process per run: load the packaged model, embed "
              f"{ctx['texts']} chunk-sized texts (30–250 tokens) in one `embed` call. *peak* = the most resident "
              "memory while embedding (VmRSS every 20 ms, and VmHWM); *after* = resident after the call; speed "
              f"per wall and per CPU second of the process. Medians of {ctx['runs']} runs; the variants take turns "
              "run by run. The machine is a shared, noisy 2-core VM: compare within this table (CPU seconds are "
              "less disturbed than wall time)."), ""]
    rows = []
    for name, m in ctx["summary"].items():
        rows.append([LABELS[name], f"{m['loaded_mb']:.0f}", f"{m['peak_mb']:.0f}", f"**{m['after_mb']:.0f}**",
                     f"{m['after_mb'] - m['loaded_mb']:+.0f}", f"{m['largest_batch_tokens']:,}", m["batches"],
                     f"{m['texts_per_s']:.1f}", f"{m['texts_per_cpu_s']:.1f}"])
    lines.append(md_table(["variant", "loaded MB", "peak MB", "after MB", "kept MB (after − loaded)",
                           "largest batch (tokens)", "batches", "texts/s", "texts/CPU s"], rows))
    s = ctx["summary"]
    if {"after", "arena_kept", "before", "no_arena"} <= set(s):
        lines += ["", (f"The arena kept for good: {s['arena_kept']['after_mb'] - s['after']['after_mb']:.0f} MB at "
                       f"2048 tokens a batch, {s['before']['after_mb'] - s['after']['after_mb']:.0f} MB with batches "
                       "of 32 by count (the release before); shrunk after every run, it keeps nothing and runs "
                       f"{s['after']['texts_per_cpu_s'] / s['no_arena']['texts_per_cpu_s']:.2f}× the texts per CPU "
                       "second of no arena.")]
    lines += ["", f"Load average {ctx['load_before']} before, {ctx['load_after']} after.", "",
              "### Time", "", md_table(["step", "time"], [[k, fmt_s(v)] for k, v in ctx["timing"].items()])]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.embed_memory", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 run of 60 texts")
    ap.add_argument("--runs", type=int, default=None, help="runs per variant (default 3)")
    ap.add_argument("--texts", type=int, default=None, help="texts per run (default 300)")
    args = ap.parse_args(argv)
    runs = args.runs or (1 if args.quick else 3)
    n = args.texts or (60 if args.quick else 300)
    started = time.perf_counter()
    texts = chunk_texts(n)
    ctx: dict = {"runs": runs, "texts": n, "load_before": loadavg(), "results": {k: [] for k in VARIANTS},
                 "timing": {}}
    names = list(VARIANTS)
    with Timer() as t:
        for r in range(runs):
            for name in (names if r % 2 == 0 else names[::-1]):
                got = run_child(VARIANTS[name], texts)
                ctx["results"][name].append(got)
                log(f"  {name} #{r}: loaded {got['loaded_mb']:.0f} MB, peak {got['peak_mb']:.0f}, after "
                    f"{got['after_mb']:.0f}; {got['texts_per_s']:.1f} texts/s, {got['texts_per_cpu_s']:.1f} per CPU s")
    ctx["timing"]["runs"] = t.seconds
    ctx["summary"] = {name: {key: statistics.median(r[key] for r in results) for key in results[0]}
                      for name, results in ctx["results"].items()}
    for m in ctx["summary"].values():
        m["batches"], m["largest_batch_tokens"] = int(m["batches"]), int(m["largest_batch_tokens"])
    ctx["load_after"] = loadavg()
    ctx["timing"]["total"] = time.perf_counter() - started
    path = write_outputs(NAME, report(ctx), ctx)
    log(f"wrote {path} ({fmt_s(ctx['timing']['total'])})")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
