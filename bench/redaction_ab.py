"""Redaction throughput of this code against an earlier commit, side by side in one run (issue 34).

    .venv/bin/python -m bench.redaction_ab [--baseline REV] [--also REV] [--rounds 2] [--passes 5]

The baseline's ``redaction/`` package is extracted with ``git archive`` into
``bench/out/redaction-ab/<rev>/``; each variant runs in its own fresh process
(``python -c``, the variant's folder first on ``sys.path``), in the order
A B B A repeated ``--rounds`` times (A C B B C A with ``--also``: a third commit, such as
the code before a speed-up, in the same run), over the same three text sets, one
``redact`` call per message as the indexer makes them:

- **chat**: the shared ``clean_chat.jsonl`` lines, ordinary chat with no secret;
- **prose**: ``tests/data/redaction_eval/clean_dev.jsonl``, real developer prose;
- **secrets**: ``tests/data/redaction_eval/chat.jsonl``, chat turns stating credentials.

Figures: MB/s of thread CPU time (less disturbed by other load on a shared
machine than wall time), best of ``--passes`` passes per process (more for a set
that takes under a second in all: chat, where a burst of load would span every pass); the ratio
this / baseline per set from the medians over the processes. Writes
``bench/out/redaction_ab.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import sys
import tarfile
from pathlib import Path

from bench.common import OUT, REPO, SHARED, loadavg, log

NAME = "redaction_ab"
BASELINE = "0176b99"  # explicit-version commit: redaction 1.4.3, before issue 34's detectors
SETS = {
    "chat": SHARED / "redaction" / "clean_chat.jsonl",
    "prose": REPO / "tests" / "data" / "redaction_eval" / "clean_dev.jsonl",
    "secrets": REPO / "tests" / "data" / "redaction_eval" / "chat.jsonl",
}

CHILD = r"""
import json, sys, time
src, passes = sys.argv[1], int(sys.argv[2])
sys.path.insert(0, src)
import redaction
assert redaction.__file__.startswith(src), (redaction.__file__, src)
from redaction import redact
sets = json.loads(sys.stdin.read())
out = {"version": redaction.REDACTION_VERSION}
for name, texts in sets.items():
    size = sum(len(t.encode("utf-8")) for t in texts)
    for t in texts[:20]:
        redact(t)  # warm the caches
    best = None
    done = spent = 0
    while done < passes or spent < 1.0:  # a short set gets more passes: a burst of load spans a few
        c0 = time.thread_time()
        for t in texts:
            redact(t)
        took = time.thread_time() - c0
        best = took if best is None else min(best, took)
        done, spent = done + 1, spent + took
    out[name] = size / 1e6 / best
print(json.dumps(out))
"""


def extract(rev: str) -> Path:
    """The ``redaction`` package at ``rev`` in its own folder (cached)."""
    target = OUT / "redaction-ab" / rev
    if (target / "redaction" / "__init__.py").is_file():
        return target
    target.mkdir(parents=True, exist_ok=True)
    data = subprocess.run(["git", "archive", "--format=tar", rev, "redaction"], cwd=REPO, check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(target, filter="data")
    return target


def texts() -> dict[str, list[str]]:
    out = {}
    for name, path in SETS.items():
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        out[name] = [r["text"] for r in rows]
    return out


def run_one(src: Path, payload: str, passes: int) -> dict:
    r = subprocess.run([sys.executable, "-c", CHILD, str(src), str(passes)], input=payload, text=True,
                       capture_output=True, check=True)
    return json.loads(r.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.redaction_ab", description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", default=BASELINE, help="the commit to compare with")
    ap.add_argument("--also", default=None, help="a third commit measured in the same run (e.g. the code before a "
                                                  "speed-up): A C B B C A")
    ap.add_argument("--rounds", type=int, default=2, help="A B B A rounds")
    ap.add_argument("--passes", type=int, default=5, help="timed passes per process (best kept)")
    args = ap.parse_args(argv)
    variants = {"baseline": extract(args.baseline), **({"also": extract(args.also)} if args.also else {}), "this": REPO}
    order = list(variants)
    payload = json.dumps(texts())
    load_before = loadavg()  # the machine is shared: the load on both sides of the run goes in the table
    runs: dict[str, list[dict]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name in order + order[::-1]:
            runs[name].append(run_one(variants[name], payload, args.passes))
            log(f"{name}: " + ", ".join(f"{k} {v:.2f}" for k, v in runs[name][-1].items() if k != "version"))
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout
    result = {"baseline": args.baseline, "also": args.also, "this": head.strip(), "loadavg_before": load_before,
              "loadavg": loadavg(), "sets": {}}
    label = {"baseline": f"baseline {args.baseline}", "also": f"{args.also}", "this": "this"}
    rows = []
    for name in SETS:
        base = statistics.median(r[name] for r in runs["baseline"])
        cells, entry = [], {}
        for v in order:
            got = [r[name] for r in runs[v]]
            entry[v] = got
            cells.append(f"{min(got):.2f}–{max(got):.2f}")
        slow = {v: base / statistics.median(entry[v]) for v in order if v != "baseline"}
        entry["slowdown"] = slow["this"]
        if args.also:
            entry["slowdown_also"] = slow["also"]
        result["sets"][name] = entry
        rows.append(f"| {name} | " + " | ".join(cells) + " | " + " | ".join(f"{slow[v]:.2f}×" for v in slow) + " |")
    also = (f" --also {args.also}" if args.also else "") + (f" --passes {args.passes}" if args.passes != 5 else "")
    at = {"baseline": args.baseline, "also": args.also, "this": result["this"]}
    versions = ", ".join(f"{runs[v][0]['version']} at {at[v]}" for v in order)
    pattern = "ABC"[:len(order)]
    md = "\n".join([
        f"## Redaction throughput, side by side ({NAME})", "",
        f"`python -m bench.redaction_ab --baseline {args.baseline}{also} --rounds {args.rounds}`: rulesets {versions} "
        f"(the first is the baseline), {args.rounds * 2} processes each, {' '.join(pattern + pattern[::-1])}; "
        f"MB/s of thread CPU time, best of {args.passes} passes a process; load average {load_before} before, "
        f"{result['loadavg']} after.", "",
        "| set | " + " | ".join(f"{label[v]} MB/s" for v in order) + " | "
        + " | ".join(f"{label[v]} slowdown (median / median)" for v in order if v != "baseline") + " |",
        "| :--- |" + " ---: |" * (2 * len(order) - 1),
        *rows, ""])
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{NAME}.md").write_text(md, encoding="utf-8")
    (OUT / f"{NAME}.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
