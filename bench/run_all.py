"""Run every benchmark, each in its own process, and assemble ``bench/out/RESULTS.generated.md``.

``make bench`` runs ``python -m bench.run_all``. Benchmarks, in order (a module
that does not exist yet is skipped with a note):

- ``redaction`` — ``bench.bench_redaction``
- ``locomo``    — ``bench.locomo``
- ``latency``   — ``bench.latency``
- ``ann``       — ``bench.ann``
- ``daemon``    — ``bench.daemon_bench``
- ``kill_campaign`` — ``bench.kill_campaign``
- ``cli_latency`` — ``bench.cli_latency``
- ``mcp_latency`` — ``bench.mcp_latency``
- ``noop_pass`` — ``bench.noop_pass``
- ``recurring_cost`` — ``bench.recurring_cost``
- ``objectstore`` — ``bench.objectstore``
- ``embed_memory`` — ``bench.embed_memory``
- ``fold_cost`` — ``bench.fold_cost``

Each writes its markdown section to ``bench/out/<name>.md`` (run_all also
accepts ``bench/out/<module name>.md``). With ``--only`` (or
``--assemble-only``) the benchmarks not run now contribute the section an
earlier run left in ``bench/out``, marked "reused", so the document stays whole. ``--quick`` is passed on to modules
whose source mentions ``--quick``, and ``BENCH_QUICK=1`` is set for all.

    python -m bench.run_all [--quick] [--only NAME[,NAME]] [--assemble-only]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from bench.common import OUT, REPO, fmt_s, git_commit, log, machine, out_dir
from bench.summary import summary


@dataclass(frozen=True)
class Bench:
    name: str
    module: str


BENCHES = (
    Bench("redaction", "bench.bench_redaction"),
    Bench("locomo", "bench.locomo"),
    Bench("latency", "bench.latency"),
    Bench("ann", "bench.ann"),
    Bench("daemon", "bench.daemon_bench"),
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


def header(results: dict[str, dict], quick: bool, only: str | None = None) -> str:
    m = machine()
    model = "sentence-transformers/all-MiniLM-L6-v2 (int8 ONNX, packaged, fastembed)"
    try:
        from indexer.embedding import model_files

        model = f"{model_files.MODEL_NAME} (int8 ONNX, packaged, fastembed; fingerprint `{model_files.FINGERPRINT}`)"
    except Exception:
        pass
    lines = [
        "# ledger-indexer benchmark results (generated)",
        "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M %Z')}",
        f"- git commit: {git_commit()}",
        f"- machine: {m['nproc']} cores ({m['cpu']}), {m['mem_gb']} GB RAM, load average at the end "
        f"{' / '.join(str(x) for x in m['loadavg'])} (shared, noisy VM), Python {m['python']}",
        f"- embedding model: {model}",
        f"- mode: {'quick (partial, not for the record)' if quick else 'full'}"
        + ("; nothing run now: assembled from the sections in bench/out" if only == "-" else
           f"; this run: only {only}, the other sections are reused from earlier runs" if only else ""),
        "",
        "| benchmark | status | time | section written |",
        "| :--- | :--- | ---: | :--- |",
    ]
    for name, r in results.items():
        path = r.get("path")
        written = time.strftime("%Y-%m-%d %H:%M", time.localtime(path.stat().st_mtime)) if path else "–"
        lines.append(f"| {name} | {r['status']} | {fmt_s(r['seconds']) if r['seconds'] else '–'} | {written} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.run_all", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="short runs of every benchmark (smoke level)")
    ap.add_argument("--only", default=None, help="comma-separated benchmark names: "
                    + ", ".join(b.name for b in BENCHES))
    ap.add_argument("--assemble-only", action="store_true",
                    help="run nothing: assemble RESULTS.generated.md from the sections already in bench/out")
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
    for bench in BENCHES:
        if bench in selected and not args.assemble_only:
            results[bench.name] = run_one(bench, args.quick)
            continue
        # Not run now: keep the document complete with the section an earlier run wrote, if any.
        path = section_path(bench)
        if path is not None:
            results[bench.name] = {"status": "reused (earlier run)", "seconds": 0.0, "path": path}
        elif module_source(bench.module) is None:
            results[bench.name] = {"status": "missing", "seconds": 0.0}
        else:
            results[bench.name] = {"status": "not run", "seconds": 0.0}
    sections = []
    for bench in BENCHES:
        r = results[bench.name]
        if r["status"] == "missing":
            sections.append(f"## {bench.name}\n\nSkipped: `{bench.module}` does not exist yet.")
        elif r.get("path"):
            sections.append(r["path"].read_text(encoding="utf-8").strip())
        else:
            sections.append(f"## {bench.name}\n\n{r['status']}: no section written (see the console log).")
    doc = (header(results, args.quick, "-" if args.assemble_only else args.only) + "\n\n" + summary() + "\n\n"
           + "\n\n".join(sections) + "\n")
    target = OUT / "RESULTS.generated.md"
    target.write_text(doc, encoding="utf-8")
    log(f"wrote {target}")
    failed = [n for n, r in results.items()
              if r["status"] not in ("ok", "missing", "not run") and not r["status"].startswith("reused")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
