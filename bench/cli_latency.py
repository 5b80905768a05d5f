"""The CLI as an agent runtime calls it: ``ledger-indexer search`` as a whole process while
the daemon runs, against a ``qmd search`` process over the same export, interleaved in one
run (A B A B …); then the CLI with no daemon (the in-process fallback) for contrast.

    python -m bench.cli_latency [--runs N] [--turns N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.common import REPO, loadavg, log, md_table, percentile, write_outputs

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from tests.daemon_process import Daemon, big_ledger, free_port, write_config  # noqa: E402
from tests.qmd_tool import QmdCli, missing_reason  # noqa: E402

NAME = "cli_latency"
QUERIES = ("canary rollout budget", "jwt expiry token", "postgres migration schema", "redis cache latency",
           "kafka queue retry")


def cli_argv(cfg: Path, query: str) -> list[str]:
    exe = REPO / ".venv" / "bin" / "ledger-indexer"
    head = [str(exe)] if exe.exists() else [sys.executable, "-m", "indexer.cli"]
    return [*head, "--config", str(cfg), "search", query, "--persona", "atlas", "--json", "-n", "10"]


def timed(argv: Sequence[str], env: dict | None = None) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(list(argv), capture_output=True, text=True, env=env, timeout=300)
    wall = (time.perf_counter() - t0) * 1000
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({proc.returncode}): {proc.stderr[-1500:]}")
    return wall


def summary(values: Sequence[float]) -> dict:
    return {"p50": statistics.median(values), "p95": percentile(values, 95), "min": min(values), "n": len(values)}


def run(runs: int, turns: int) -> dict:
    root = Path(tempfile.mkdtemp(prefix="cli-latency-"))
    ledger = root / "agents.db"
    big_ledger(ledger, turns)
    port = free_port()
    cfg = write_config(root, ledger, port, token=None)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_INDEXER_")}
    d = Daemon(cfg, port)
    try:
        d.wait_ready(timeout=600)
        d.wait_caught_up(["atlas"], timeout=600)
        qmd = QmdCli(root / "qmd-home")
        qmd.collection_add(root / "index" / "qmd" / "atlas")
        qmd.update()
        ours, theirs, ratios = [], [], []
        for i in range(runs + 1):  # the first pair warms the page cache
            q = QUERIES[i % len(QUERIES)]
            pair = [("cli", cli_argv(cfg, q), env), ("qmd", qmd.command("search", q, "--json", "-n", "10"), None)]
            if i % 2:
                pair.reverse()
            walls = {name: timed(argv, e) for name, argv, e in pair}
            if i:
                ours.append(walls["cli"])
                theirs.append(walls["qmd"])
                ratios.append(walls["cli"] / walls["qmd"])
        took = d.memory_search({"query": QUERIES[0], "persona": "atlas", "max_results": 10})["took_ms"]
    finally:
        d.stop()
    fallback = [timed(cli_argv(cfg, QUERIES[i % len(QUERIES)]), env) for i in range(max(3, runs // 5))]
    return {"runs": runs, "turns": turns, "cli_daemon_ms": summary(ours), "qmd_ms": summary(theirs),
            "ratio_cli_over_qmd": {"p50": statistics.median(ratios), "min": min(ratios), "max": max(ratios)},
            "cli_no_daemon_ms": summary(fallback), "daemon_took_ms": took, "loadavg": loadavg()}


def report(r: dict) -> str:
    rows = [
        ["`ledger-indexer search` (daemon running)", f"{r['cli_daemon_ms']['p50']:.0f}",
         f"{r['cli_daemon_ms']['p95']:.0f}", f"{r['cli_daemon_ms']['min']:.0f}", r["cli_daemon_ms"]["n"]],
        ["`qmd search` (same export, BM25)", f"{r['qmd_ms']['p50']:.0f}", f"{r['qmd_ms']['p95']:.0f}",
         f"{r['qmd_ms']['min']:.0f}", r["qmd_ms"]["n"]],
        ["`ledger-indexer search` (no daemon: in-process)", f"{r['cli_no_daemon_ms']['p50']:.0f}",
         f"{r['cli_no_daemon_ms']['p95']:.0f}", f"{r['cli_no_daemon_ms']['min']:.0f}", r["cli_no_daemon_ms"]["n"]],
    ]
    ratio = r["ratio_cli_over_qmd"]
    return (f"## CLI search as a whole process (issue 12)\n\n"
            f"{r['turns']} turns, persona `atlas`, 10 results, whole-process wall time; the two first rows "
            f"interleaved in one run (A B A B …, order alternating). Load average at the end: {r['loadavg']}.\n\n"
            + md_table(["command", "p50 ms", "p95 ms", "min ms", "runs"], rows, ["l", "r", "r", "r", "r"])
            + f"\n\nPair by pair, CLI / `qmd search`: median **{ratio['p50']:.2f}** "
              f"(min {ratio['min']:.2f}, max {ratio['max']:.2f}). The daemon's own `took_ms` for one such query: "
              f"{r['daemon_took_ms']:.0f} ms.\n")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.cli_latency", description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--turns", type=int, default=300)
    ap.add_argument("--quick", action="store_true", help="5 runs, 60 turns (not for the record)")
    args = ap.parse_args(argv)
    reason = missing_reason()
    if reason:
        raise SystemExit(f"QMD is missing ({reason}): run `make qmd`")
    runs, turns = (5, 60) if args.quick else (args.runs, args.turns)
    log(f"cli_latency: {runs} runs, {turns} turns")
    result = run(runs, turns)
    path = write_outputs(NAME, report(result), result)
    log(f"wrote {path}")
    print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
