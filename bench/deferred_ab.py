"""The deferred ``__init__`` of lancedb's REST client package, side by side with a plain import (issue 37).

A fresh process per run opens the latency benchmark's index as a searcher does (``Searcher`` with
the real query model) and answers 3 hybrid searches, then reports VmRSS and the wall time of the
imports. *plain* imports ``lance_namespace_urllib3_client`` first (so
``defer_package_init`` finds it imported and does nothing); *deferred* is the shipped order.
Variants take turns (A B B A …); medians of ``--runs``.

    python -m bench.deferred_ab [--size 10k] [--runs 4]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections.abc import Sequence

from bench.common import OUT, REPO, loadavg, log, md_table

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
if sys.argv[2] == "plain":
    import lance_namespace_urllib3_client
import exporters.lancedb
from indexer.search.searcher import Searcher, SearchRequest
imports = time.perf_counter() - t0
from bench.latency import corpus_config
from pathlib import Path
config = corpus_config(Path(sys.argv[1]))
s = Searcher(config)
for q in ("what did she paint", "a trip to the mountains", "adoption agencies"):
    s.search(SearchRequest(query=q, persona="bench", scope="persona", max_results=6))
rss = [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS:")][0] / 1024
loaded = "ApiClient" in vars(sys.modules["lance_namespace_urllib3_client"])
print(json.dumps({"rss_mb": rss, "imports_s": imports, "client_api_loaded": loaded}))
"""


def child(root: str, variant: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, root, variant], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"child failed:\n{proc.stderr[-3000:]}")
    return json.loads([line for line in proc.stdout.splitlines() if line.startswith('{"rss_mb"')][-1])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.deferred_ab", description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="10k")
    ap.add_argument("--runs", type=int, default=4)
    args = ap.parse_args(argv)
    roots = sorted((OUT / "latency-index").glob(f"{args.size}-*"))
    if not roots:
        raise SystemExit(f"no {args.size} corpus: run `python -m bench.latency --sizes {args.size}` first")
    root = str(roots[-1])
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    load_before = loadavg()
    names = ["deferred", "plain"]
    results: dict[str, list[dict]] = {n: [] for n in names}
    for r in range(args.runs):
        for name in names if r % 2 == 0 else names[::-1]:
            got = child(root, name)
            results[name].append(got)
            log(f"  {name} #{r}: RSS {got['rss_mb']:.0f} MB, imports {got['imports_s']:.2f} s, "
                f"client API loaded: {got['client_api_loaded']}")
    med = {n: {k: statistics.median(float(x[k]) for x in rs) for k in ("rss_mb", "imports_s")}
           for n, rs in results.items()}
    d, p = med["deferred"], med["plain"]
    md = "\n".join([
        "### lancedb's REST client `__init__` deferred vs imported", "",
        f"`python -m bench.deferred_ab --size {args.size} --runs {args.runs}` on {commit}; a fresh searcher process "
        f"per run (open the {args.size} index, real query model, 3 hybrid searches), ABBA, medians. Load average "
        f"{load_before} → {loadavg()}.", "",
        md_table(["variant", "RSS MB", "imports s", "client API loaded"],
                 [[n, f"{m['rss_mb']:.1f}", f"{m['imports_s']:.2f}", str(results[n][0]["client_api_loaded"])]
                  for n, m in med.items()]), "",
        f"Deferred saves {p['rss_mb'] - d['rss_mb']:.1f} MB ({(p['rss_mb'] - d['rss_mb']) / p['rss_mb']:.1%} of the "
        f"process) and {p['imports_s'] - d['imports_s']:+.2f} s of imports."])
    (OUT / "deferred_ab.json").write_text(json.dumps({"results": results, "medians": med}, indent=1))
    (OUT / "deferred_ab.md").write_text(md + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
