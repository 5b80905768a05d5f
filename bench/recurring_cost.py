"""What masking recurring secrets costs a sync, and what it removes: with and without the session memory.

A secret a rule recognises in one turn ("the db password is X") is masked where X recurs bare in
the session's other turns (``indexer/sync/recurring.py``). This runs the same passes with the
memory (as shipped) and without it (the same redactor, one document at a time), taking turns
(A B B A …), on one ledger:

- **backfill**: the first ``sync_once`` of the whole ledger into a fresh index dir;
- **tail, warm**: one new turn in a 2,000-turn session, the indexer kept from the pass before;
- **tail after a restart**: the same with a fresh indexer: the memory reads the session's whole
  history once (what the first pass after a daemon restart pays per session it touches).

Ledger: 20 sessions of 100 turns and one of 2,000 (4,000 turns; a user and an assistant message
of ~30 words each); in 1 turn of 50 the user names a password by context and 3 turns later the
assistant repeats it bare. Sink: the QMD exporter's files (the real exporter; the memory changes
which documents are written, not how they are embedded, so no model runs here). Also counted:
stored documents that still hold a planted value.

    python -m bench.recurring_cost [--quick] [--runs N]
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from bench.common import OUT, fmt_s, loadavg, log, md_table, write_outputs

NAME = "recurring_cost"
WORDS = ("deploy cache token schema migration retry budget latency shard index vector kafka redis postgres jwt "
         "expiry rollout canary alert queue worker harbour crane ledger").split()
PLANT_EVERY = 50
REPEAT_AFTER = 3


def sentence(rng: random.Random, n: int = 30) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def write_ledger(path: Path, sessions: int, turns: int, long_turns: int) -> list[str]:
    """The ledger; returns the planted values."""
    from ledger.writer import LedgerWriter

    rng = random.Random(7)
    planted: list[str] = []
    with LedgerWriter(path, start_ms=1_763_000_000_000, seed=7) as w:
        plan = [(f"s{i:02d}", turns) for i in range(sessions)] + [("long", long_turns)]
        for label, count in plan:
            due: dict[int, str] = {}
            for i in range(count):
                user, assistant = sentence(rng), sentence(rng)
                if i % PLANT_EVERY == PLANT_EVERY // 2:
                    value = f"Pw{rng.randrange(10**9):09d}-{rng.choice(WORDS)}"
                    planted.append(value)
                    user = f"{user}. the db password is {value}"
                    due[i + REPEAT_AFTER] = value
                if i in due:
                    assistant = f"{assistant}. connected with {due.pop(i)} just now"
                w.turn(label, persona="bench", user=user, assistant=assistant)
    return planted


def make_indexer(ledger: Path, index_dir: Path, memory: bool):
    from indexer.runtime.config import load_config
    from indexer.sync.context import Indexer, build_sinks, make_redactor

    config = load_config(None, env={}, overrides={"ledger": {"path": str(ledger)},
                                                  "index": {"dir": str(index_dir), "sinks": ["qmd"]}})
    index_dir.mkdir(parents=True, exist_ok=True)
    if memory:
        return Indexer(config, sinks=build_sinks(config))
    from indexer.state.db import StateDB

    state = StateDB(config.state_db_path)
    redactor, version = make_redactor(config, key=state.key)
    return Indexer(config, sinks=build_sinks(config), state=state, redact=lambda text: redactor.redact(text).text,
                   redaction_version=version)


def timed_pass(ix) -> tuple[float, float]:
    from indexer.sync.engine import sync_once

    c0, t0 = time.process_time(), time.perf_counter()
    sync_once(ix)
    return (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000


def leaks(index_dir: Path, planted: Sequence[str]) -> int:
    """Stored documents holding a planted value."""
    count = 0
    for path in index_dir.rglob("*.md"):
        text = path.read_text(encoding="utf-8")
        count += any(v in text for v in planted)
    return count


def run(runs: int, sessions: int, turns: int, long_turns: int) -> dict:
    from ledger.writer import LedgerWriter

    root = OUT / "recurring-work"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    ledger = root / "ledger" / "agents.db"
    ledger.parent.mkdir()
    planted = write_ledger(ledger, sessions, turns, long_turns)
    samples: dict[str, dict[str, list[float]]] = {}
    left: dict[str, int] = {}
    load_before = loadavg()
    rng = random.Random(11)
    for r in range(runs):
        for variant in (("memory", "plain") if r % 2 == 0 else ("plain", "memory")):
            memory = variant == "memory"
            index_dir = root / f"index-{variant}-{r}"
            ix = make_indexer(ledger, index_dir, memory)
            try:
                backfill = timed_pass(ix)
                with LedgerWriter(ledger, seed=100 + r) as w:
                    w.turn("long", persona="bench", user=sentence(rng), assistant=sentence(rng))
                warm = timed_pass(ix)
            finally:
                ix.close()
            ix = make_indexer(ledger, index_dir, memory)  # a restart
            try:
                with LedgerWriter(ledger, seed=200 + r) as w:
                    w.turn("long", persona="bench", user=sentence(rng), assistant=sentence(rng))
                restart = timed_pass(ix)
            finally:
                ix.close()
            for step, (wall, cpu) in (("backfill", backfill), ("tail, warm", warm), ("tail after a restart", restart)):
                s = samples.setdefault(f"{step}|{variant}", {"wall": [], "cpu": []})
                s["wall"].append(wall)
                s["cpu"].append(cpu)
            left[variant] = leaks(index_dir, planted)
            log(f"  run {r} {variant}: backfill {backfill[0]:.0f} ms, warm tail {warm[0]:.1f} ms, "
                f"tail after restart {restart[0]:.1f} ms; documents holding a planted value: {left[variant]}")
            shutil.rmtree(index_dir, ignore_errors=True)
    shutil.rmtree(root, ignore_errors=True)
    med = {k: {"wall": statistics.median(v["wall"]), "cpu": statistics.median(v["cpu"]), "n": len(v["wall"])}
           for k, v in samples.items()}
    return {"runs": runs, "turns": sessions * turns + long_turns, "sessions": sessions + 1, "long": long_turns,
            "planted": len(planted), "medians": med, "left": left, "load_before": load_before,
            "load_after": loadavg()}


def report(ctx: dict) -> str:
    r = ctx["result"]
    med = r["medians"]
    rows = []
    for step in ("backfill", "tail, warm", "tail after a restart"):
        m, p = med[f"{step}|memory"], med[f"{step}|plain"]
        rows.append([step, f"{m['wall']:.1f} / {m['cpu']:.1f}", f"{p['wall']:.1f} / {p['cpu']:.1f}",
                     f"{m['wall'] / p['wall']:.2f} / {m['cpu'] / p['cpu']:.2f}"])
    lines = ["## Recurring secrets: the cost of the session memory", "",
             (f"{r['turns']:,} turns in {r['sessions']} sessions (one of {r['long']:,} turns); {r['planted']} "
              f"passwords named by context, each repeated bare {REPEAT_AFTER} turns later. The same passes with the "
              "memory (as shipped) and without it (the same redactor, one document at a time), taking turns, "
              f"{r['runs']} runs each; medians, ms (wall / this process's CPU). QMD exporter files as the sink, "
              "no model (see `bench/recurring_cost.py`)."), "",
             md_table(["pass", "with the memory", "without", "ratio (wall / CPU)"], rows), "",
             (f"Stored documents still holding a planted value after the backfill: **{r['left']['memory']}** with "
              f"the memory, {r['left']['plain']} without (each bare repeat is its own document)."), "",
             f"Load average {r['load_before']} before, {r['load_after']} after.", "",
             "### Time", "", md_table(["step", "time"], [[k, fmt_s(v)] for k, v in ctx["timing"].items()])]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.recurring_cost", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a smaller ledger, 2 runs")
    ap.add_argument("--runs", type=int, default=None, help="runs per variant (default 4)")
    args = ap.parse_args(argv)
    runs = args.runs or (2 if args.quick else 4)
    started = time.perf_counter()
    sizes = (5, 40, 400) if args.quick else (20, 100, 2000)
    result = run(runs, *sizes)
    ctx = {"result": result, "timing": {"total": time.perf_counter() - started}}
    write_outputs(NAME, report(ctx), ctx)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
