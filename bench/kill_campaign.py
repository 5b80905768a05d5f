"""Kill -9 campaign: the daemon killed at random points of a backfill, many times.

    .venv/bin/python -m bench.kill_campaign [--kills N] [--turns N] [--seed S] [--quick]

A real WAL ledger of ``--turns`` turns; a writer process appends more turns
(and forks) the whole time; the daemon runs with both sinks (LanceDB and the
QMD export) and is killed with SIGKILL ``--kills`` times. Each kill point is
drawn from the seed: either *mid-write* (the daemon's debug log shows a sink
write started and not done; the kill is asserted to land there) or *random
time* after start (start-up, model load, between writes, a commit...). After
the last kill the daemon runs to completion once and the index is compared
with an independent oracle computed from the ledger by plain SQL
(``tests.test_sync.expected_paths``, not the project's sync code):

- lost: expected documents missing from LanceDB or from the QMD export;
- duplicated: chunk ids present twice in LanceDB;
- stale: documents in a store that the ledger does not imply, and QMD
  ``.tmp`` files left behind.

Writes ``bench/out/kill_campaign.md`` and ``bench/out/kill_campaign.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.common import OUT, REPO, fmt_s, log, md_table, out_dir

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from tests.daemon_process import (  # noqa: E402  (one daemon harness for tests and bench)
    Daemon,
    assert_killed_mid_write,
    big_ledger,
    free_port,
    lance_rows,
    write_config,
)
from tests.test_sync import expected_paths  # noqa: E402  (the independent oracle)

PERSONA = "atlas"


@dataclass
class Kill:
    mode: str            # "mid-write" or "random-time"
    after_writes: int    # mid-write: writes of this run let finish first
    delay_s: float       # random-time: seconds after start
    seconds_alive: float = 0.0
    evidence: str = ""   # what the log shows at the moment of the kill


@dataclass
class CampaignResult:
    kills: list[Kill] = field(default_factory=list)
    expected: int = 0
    lost_lancedb: int = 0
    lost_qmd: int = 0
    duplicated_chunks: int = 0
    stale_lancedb: int = 0
    stale_qmd: int = 0
    tmp_files: int = 0
    seconds: float = 0.0

    @property
    def lost(self) -> int:
        return self.lost_lancedb + self.lost_qmd

    @property
    def stale(self) -> int:
        return self.stale_lancedb + self.stale_qmd + self.tmp_files


def _plan(rng: random.Random, kills: int) -> list[Kill]:
    plan = []
    for i in range(kills):
        if i % 3 == 2:  # a third at arbitrary moments, the rest inside a write
            plan.append(Kill("random-time", 0, round(rng.uniform(0.5, 8.0), 2)))
        else:
            plan.append(Kill("mid-write", rng.randint(0, 2), 0.0))
    return plan


def _last_sink_event(d: Daemon) -> str:
    seq = [e["event"] for e in d.events() if e.get("event", "").startswith("sink.write_")]
    return seq[-1] if seq else "none"


def run_campaign(work: Path, *, kills: int, turns: int, seed: int, append_turns: int) -> CampaignResult:
    started = time.monotonic()
    ledger = work / "agents.db"
    big_ledger(ledger, turns, seed=seed)
    port = free_port()
    cfg = write_config(work, ledger, port, interval=1)
    writer = subprocess.Popen([sys.executable, "-m", "ledger.writer", "append", str(ledger), "--turns",
                               str(append_turns), "--sessions", "6", "--delay", "0.2", "--fork-every", "25"],
                              cwd=REPO, stdout=subprocess.DEVNULL)
    result = CampaignResult(kills=_plan(random.Random(seed), kills))
    try:
        for n, kill in enumerate(result.kills, 1):
            # Writes of 32 documents (the default is 128): ~47 write boundaries over the backfill, so
            # 20 kills, most of them inside a write, still find writes to land in.
            d = Daemon(cfg, port, log_level="debug", env={"LEDGER_INDEXER_SYNC_DOCS_PER_WRITE": "32"})
            t0 = time.monotonic()
            if kill.mode == "mid-write":
                d.wait_for_write_in_progress(after=kill.after_writes, timeout=300)
            else:
                time.sleep(kill.delay_s)
            d.stop(signal.SIGKILL)
            kill.seconds_alive = round(time.monotonic() - t0, 2)
            kill.evidence = _last_sink_event(d)
            if kill.mode == "mid-write":
                assert_killed_mid_write(d.events())
            log(f"kill {n}/{len(result.kills)}: {kill.mode} after {kill.seconds_alive} s, "
                f"last sink event {kill.evidence}")
    finally:
        writer.wait(timeout=600)
    d = Daemon(cfg, port)
    try:
        d.wait_ready(timeout=600)
        d.wait_caught_up(timeout=900)
    finally:
        assert d.stop() == 0, d.logs()
    want = expected_paths(ledger, PERSONA)
    rows = lance_rows(work / "index", PERSONA)
    ids = [r["id"] for r in rows]
    lance_paths = {r["path"] for r in rows}
    from exporters.qmd import QmdExporter

    export = work / "index" / "qmd"
    qmd_paths = QmdExporter(export).paths(PERSONA)
    result.expected = len(want)
    result.lost_lancedb = len(want - lance_paths)
    result.lost_qmd = len(want - qmd_paths)
    result.duplicated_chunks = len(ids) - len(set(ids))
    result.stale_lancedb = len(lance_paths - want)
    result.stale_qmd = len(qmd_paths - want)
    result.tmp_files = sum(1 for p in export.rglob("*.tmp"))
    result.seconds = time.monotonic() - started
    return result


def report(r: CampaignResult, args: argparse.Namespace) -> str:
    modes = {m: sum(1 for k in r.kills if k.mode == m) for m in ("mid-write", "random-time")}
    proven = sum(1 for k in r.kills if k.mode == "mid-write" and k.evidence == "sink.write_started")
    rows = [(i + 1, k.mode, k.seconds_alive, k.evidence) for i, k in enumerate(r.kills)]
    return "\n".join([
        "## kill_campaign",
        "",
        f"`python -m bench.kill_campaign --kills {args.kills} --turns {args.turns} --seed {args.seed}`: "
        f"a {args.turns}-turn WAL ledger, a writer process appending {args.append_turns} more turns (with forks) "
        "throughout, the daemon with both sinks (LanceDB + QMD export) killed with SIGKILL at seeded random "
        "points, then run to completion once and compared with an oracle computed from the ledger by plain SQL.",
        "",
        md_table(["measure", "value"], [
            ("kills", f"{len(r.kills)} ({modes['mid-write']} inside a sink write, proven by the log: {proven}; "
                      f"{modes['random-time']} at random times)"),
            ("expected documents", r.expected),
            ("lost (LanceDB / QMD)", f"{r.lost_lancedb} / {r.lost_qmd}"),
            ("duplicated chunk ids (LanceDB)", r.duplicated_chunks),
            ("stale documents (LanceDB / QMD), .tmp files left", f"{r.stale_lancedb} / {r.stale_qmd}, "
                                                               f"{r.tmp_files}"),
            ("campaign time", fmt_s(r.seconds)),
        ]),
        "",
        "<details><summary>kill points</summary>",
        "",
        md_table(["#", "mode", "seconds after start", "last sink event in the log"], rows),
        "",
        "</details>",
    ])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.kill_campaign", description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--turns", type=int, default=1500)
    ap.add_argument("--append-turns", type=int, default=300)
    ap.add_argument("--seed", type=int, default=20261122)
    ap.add_argument("--quick", action="store_true", help="5 kills on a smaller ledger (smoke level)")
    args = ap.parse_args(argv)
    if args.quick:
        args.kills, args.turns, args.append_turns = 5, 400, 80
    with tempfile.TemporaryDirectory(prefix="kill-campaign-") as tmp:
        r = run_campaign(Path(tmp), kills=args.kills, turns=args.turns, seed=args.seed,
                         append_turns=args.append_turns)
    out_dir()
    (OUT / "kill_campaign.md").write_text(report(r, args) + "\n", encoding="utf-8")
    data = {**asdict(r), "lost": r.lost, "stale": r.stale, "n_kills": len(r.kills)}
    (OUT / "kill_campaign.json").write_text(json.dumps(data, indent=1), encoding="utf-8")
    log(f"kill campaign: {len(r.kills)} kills, lost {r.lost}, duplicated {r.duplicated_chunks}, stale {r.stale}")
    return 0 if r.lost == r.duplicated_chunks == r.stale == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
