"""Run every benchmark, each in its own process, record each run and render ``bench/RESULTS.md``.

``make bench`` runs ``python -m bench.run_all``. Benchmarks, in order (a module
that does not exist yet is skipped with a note): see ``BENCHES``.

Each benchmark writes ``bench/out/<name>.md`` (its section) and ``bench/out/<name>.json`` (its
numbers and a ``_report``: command, commit, date, load average, tables; ``bench.common.write_outputs``).
After a run, run_all records it as ``bench/results/<name>.md`` (one table, the Summary rows;
``bench/records.py``) and renders RESULTS.md from every record, so a benchmark not run now keeps
its latest recorded figures. ``--render-only`` runs nothing: it records whatever ``bench/out/*.json``
is newer than its record, then renders. Quick runs are never recorded. ``--quick`` is passed on to
modules whose source mentions ``--quick``, and ``BENCH_QUICK=1`` is set for all.

    python -m bench.run_all [--quick] [--only NAME[,NAME]] [--render-only]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import records
from bench.common import OUT, REPO, fmt_s, log, out_dir
from bench.summary import rows_for


@dataclass(frozen=True)
class Bench:
    name: str
    module: str
    table: str = ""  # the caption (heading above it) of the section table its record keeps; "": the first


BENCHES = (
    Bench("redaction", "bench.bench_redaction"),
    Bench("locomo", "bench.locomo", table="Overall"),
    Bench("latency", "bench.latency", table="In-process"),
    Bench("ann", "bench.ann"),
    Bench("daemon", "bench.daemon_bench", table="Freshness"),
    Bench("kill_campaign", "bench.kill_campaign"),
    Bench("cli_latency", "bench.cli_latency"),
    Bench("mcp_latency", "bench.mcp_latency"),
    Bench("noop_pass", "bench.noop_pass"),
    Bench("recurring_cost", "bench.recurring_cost"),
    Bench("objectstore", "bench.objectstore"),
    Bench("embed_memory", "bench.embed_memory"),
    Bench("fold_cost", "bench.fold_cost"),
)


def module_source(module: str) -> str | None:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not os.path.exists(spec.origin):
        return None
    with open(spec.origin, encoding="utf-8") as f:
        return f.read()


def section_path(bench: Bench):
    for candidate in (OUT / f"{bench.name}.md", OUT / f"{bench.module.rsplit('.', 1)[-1]}.md"):
        if candidate.exists():
            return candidate
    return None


def run_one(bench: Bench, quick: bool) -> dict:
    source = module_source(bench.module)
    if source is None:
        return {"status": "missing", "seconds": 0.0}
    argv = [sys.executable, "-m", bench.module]
    if quick and "--quick" in source:
        argv.append("--quick")
    env = dict(os.environ, BENCH_QUICK="1" if quick else "0", PYTHONUNBUFFERED="1")
    # A stale section from an earlier run must not pass for this run's output.
    before = {p: p.stat().st_mtime for p in (OUT / f"{bench.name}.md", OUT / f"{bench.module.rsplit('.', 1)[-1]}.md")
              if p.exists()}
    log(f"== {bench.name}: {' '.join(argv[1:])}")
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, env=env)
    seconds = time.perf_counter() - started
    path = section_path(bench)
    fresh = path is not None and (path not in before or path.stat().st_mtime > before[path])
    status = "ok" if proc.returncode == 0 and fresh else ("no output" if proc.returncode == 0 else
                                                           f"failed (exit {proc.returncode})")
    log(f"== {bench.name}: {status} in {fmt_s(seconds)}")
    return {"status": status, "seconds": seconds, "path": path if fresh else None}


#: Sections of RESULTS.md in this order; records of other names (results measured by a benchmark's
#: options or by hand, see bench/README.md) follow by name.
ORDER = ("redaction", "redaction_eval", "redaction_ab", "recurring_cost", "locomo", "recall_models", "recall_context", "latency", "ann",
         "sync_throughput", "noop_pass", "noop_pass_redesign", "fold_cost", "daemon", "daemon_api", "daemon_memory", "embed_memory",
         "kill_campaign", "cli_latency", "mcp_latency", "objectstore", "objectstore_readers",
         "objectstore_maint")


def record_from_out(name: str, table_caption: str = "", out: Path = OUT,
                    results: Path = records.RESULTS_DIR) -> Path | None:
    """Record ``out/<name>.json`` as ``results/<name>.md`` when its run is newer than the record.
    None (and a log line) when there is nothing to record: no JSON, no ``_report`` (written before
    the report existed), a quick run, or no table."""
    src = out / f"{name}.json"
    if not src.exists():
        return None
    try:
        data = json.loads(src.read_text(encoding="utf-8"))
    except ValueError as exc:
        log(f"{src}: not JSON ({exc}); not recorded")
        return None
    report = data.get("_report") if isinstance(data, dict) else None
    if not report:
        log(f"{src}: no _report (written before bench.common.run_report); record it by hand (bench/README.md)")
        return None
    if report.get("quick"):
        log(f"{src}: a quick run; not recorded")
        return None
    tables = records.parse_tables("\n\n".join(t["markdown"] for t in report.get("tables", [])))
    captions = [t["caption"] for t in report.get("tables", [])]
    chosen = next((t for c, (_, t) in zip(captions, tables) if table_caption and c.startswith(table_caption)),
                  tables[0][1] if tables else None)
    if chosen is None:
        log(f"{src}: its section has no table; not recorded")
        return None
    old_path = results / f"{name}.md"
    old = records.parse(old_path) if old_path.exists() else None
    if old is not None and old.date >= report["date"]:
        return None  # the record is this run or a later one
    rows = rows_for(name, data)
    summary = (tuple((*r, report["date"][:10]) for r in rows) if rows is not None
               else (old.summary if old else ()))
    title = old.title if old else name.replace("_", " ").capitalize()
    rec = records.Record(name=name, title=title, command=report["command"], commit=report["commit"],
                         date=report["date"], load=report["load"], table=chosen, summary=summary)
    path = records.write(rec, results)
    log(f"recorded {src} as {path}")
    return path


def render_results(results: Path = records.RESULTS_DIR, target: Path = records.RESULTS_MD) -> Path:
    target.write_text(records.render(records.load_all(results), ORDER), encoding="utf-8")
    return target


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.run_all", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="short runs of every benchmark (smoke level; not recorded)")
    ap.add_argument("--only", default=None, help="comma-separated benchmark names: "
                    + ", ".join(b.name for b in BENCHES))
    ap.add_argument("--render-only", action="store_true",
                    help="run nothing: record the bench/out/*.json newer than their records, render bench/RESULTS.md")
    args = ap.parse_args(argv)
    selected = list(BENCHES)
    if args.only:
        wanted = {w.strip() for w in args.only.split(",") if w.strip()}
        unknown = wanted - {b.name for b in BENCHES}
        if unknown:
            ap.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
        selected = [b for b in BENCHES if b.name in wanted]
    out_dir()
    results: dict[str, dict] = {}
    if not args.render_only:
        for bench in selected:
            results[bench.name] = run_one(bench, args.quick)
    tables = {b.name: b.table for b in BENCHES}
    for src in sorted(OUT.glob("*.json")):
        record_from_out(src.stem, tables.get(src.stem, ""))
    log(f"wrote {render_results()}")
    failed = [n for n, r in results.items() if r["status"] not in ("ok", "missing")]
    for name in failed:
        log(f"{name}: {results[name]['status']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
