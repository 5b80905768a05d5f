"""Shared helpers for the benchmarks: paths, timing, statistics, markdown."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

# LanceDB's Rust logger warns on every FTS query that selects columns without `_score`
# (indexer/search/searcher.py `_fts`); keep benchmark logs readable. Must be set before lancedb loads.
os.environ.setdefault("LANCEDB_LOG", "error")

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out"
# The project's root has ../shared (benchmark data is CC BY-NC: read it there, never copy it into the repo).
SHARED = REPO.parent / "shared"
LOCOMO_PATH = SHARED / "benchmarks" / "locomo10.json"


def out_dir() -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    return OUT


from indexer.embedding.model_files import sha256_file  # noqa: E402,F401  (one implementation)


def sha256_json(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100), like numpy's default."""
    if not values:
        return float("nan")
    xs = sorted(values)
    if len(xs) == 1:
        return float(xs[0])
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo))


def median(values: Iterable[float]) -> float:
    vals = list(values)
    return float(statistics.median(vals)) if vals else float("nan")


def md_table(header: Sequence[str], rows: Iterable[Sequence[object]], align: Sequence[str] | None = None) -> str:
    """A GitHub markdown table; ``align`` per column: 'l' or 'r' (default: first left, rest right)."""
    header = [str(h) for h in header]
    align = list(align) if align else ["l"] + ["r"] * (len(header) - 1)
    sep = [":---" if a == "l" else "---:" for a in align]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
    for row in rows:
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(lines)


def fmt_s(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min"


class Timer:
    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self.start


def git_commit() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return f"{sha}{' (+ uncommitted changes)' if dirty else ''}" if sha else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def machine() -> dict:
    try:
        load = os.getloadavg()
    except OSError:
        load = (float("nan"),) * 3
    mem_gb = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": cpu, "mem_gb": mem_gb, "loadavg": [round(x, 2) for x in load],
            "python": platform.python_version()}


def redaction_available() -> str | None:
    """None when the real redactor imports, else the reason.

    Checked in a child process: a failed import would leave a namespace package
    in this process's ``sys.modules`` and hide a package that appears later.
    """
    import sys

    proc = subprocess.run([sys.executable, "-c", "from redaction import REDACTION_VERSION, Redactor"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    if proc.returncode == 0:
        return None
    lines = proc.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit code {proc.returncode}"


def wait_for_redaction(timeout_s: float, log=print) -> None:
    """The benchmarks must use the real pipeline (Indexer's default redactor)."""
    deadline = time.monotonic() + timeout_s
    reason = redaction_available()
    while reason is not None:
        if time.monotonic() >= deadline:
            raise SystemExit(f"the redaction package is not importable ({reason}); the benchmark needs the real "
                             f"pipeline. Retry later, or pass --allow-no-redaction for a development run")
        log(f"waiting for the redaction package ({reason}) ...")
        time.sleep(30)
        reason = redaction_available()


def jsonable(value):
    """Dict keys as strings (mixed int/str keys cannot be sorted by json.dumps)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def run_report(markdown: str) -> dict:
    """What bench/RESULTS.md shows of a run (``python -m bench.run_all`` records it): the command as
    typed, the commit, the date, the load average at the end, and the section's tables."""
    import sys

    from bench.records import parse_tables

    args = " ".join(sys.argv[1:])
    command = f"python -m bench.{Path(sys.argv[0]).stem}" + (f" {args}" if args else "")
    quick = os.environ.get("BENCH_QUICK") == "1" or "--quick" in sys.argv[1:]
    return {"command": command, "commit": git_commit(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load": loadavg(), "quick": quick,
            "tables": [{"caption": caption, "markdown": table.markdown()}
                       for caption, table in parse_tables(markdown)]}


def write_outputs(name: str, markdown: str, data: dict) -> Path:
    """``bench/out/<name>.md`` (the run's section) and ``<name>.json`` (its numbers, plus ``_report``:
    see :func:`run_report`)."""
    d = out_dir()
    (d / f"{name}.md").write_text(markdown.rstrip() + "\n", encoding="utf-8")
    payload = {**jsonable(data), "_report": run_report(markdown)}
    (d / f"{name}.json").write_text(json.dumps(payload, indent=1, sort_keys=True, default=str) + "\n",
                                    encoding="utf-8")
    return d / f"{name}.md"


class file_lock:
    """An exclusive ``flock`` on ``path`` (created if needed): benchmark runs started by several
    people at once must not build the same cached index at the same time."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def __enter__(self) -> file_lock:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for {self.path} (another benchmark run holds it)")
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc) -> None:
        import fcntl

        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)


def loadavg() -> str:
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)
