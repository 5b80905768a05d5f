"""``malloc_trim`` after each ``embed`` call, side by side with no trim (issue 37).

The child of :mod:`bench.embed_memory` (a fresh process per run: load the packaged model, embed
``--texts`` chunk-sized texts in one call, RSS sampled), with the shipped settings; *no trim*
replaces ``native_memory.trim`` by a no-op first (everything else — the fixed mmap threshold,
two arenas, Arrow on the system allocator, the ONNX arena shrunk after each run — unchanged).
Variants take turns (A B B A …); medians of ``--runs``.

    python -m bench.trim_ab [--runs 4] [--texts 300]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence

from bench.common import OUT, REPO, loadavg, log, md_table
from bench.embed_memory import CHILD, chunk_texts

NO_TRIM = "from indexer.embedding import native_memory\nnative_memory.trim = lambda: None\n"
VARIANTS = {"trim (shipped)": "", "no trim": NO_TRIM}


def child(prefix: str, texts: list[str]) -> dict:
    proc = subprocess.run([sys.executable, "-c", prefix + CHILD, "{}"], input=json.dumps(texts), cwd=REPO,
                          capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"embedding child failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.trim_ab", description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--texts", type=int, default=300)
    args = ap.parse_args(argv)
    texts = chunk_texts(args.texts)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    load_before = loadavg()
    results: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    names = list(VARIANTS)
    for r in range(args.runs):
        for name in names if r % 2 == 0 else names[::-1]:
            got = child(VARIANTS[name], texts)
            results[name].append(got)
            log(f"  {name} #{r}: loaded {got['loaded_mb']:.0f} MB, peak {got['peak_mb']:.0f}, after "
                f"{got['after_mb']:.0f}; {got['texts_per_s']:.1f} texts/s")
    med = {n: {k: statistics.median(x[k] for x in rs) for k in rs[0]} for n, rs in results.items()}
    base = med["trim (shipped)"]
    rows = [[n, f"{m['loaded_mb']:.0f}", f"{m['peak_mb']:.0f}", f"{m['after_mb']:.0f}",
             f"{m['after_mb'] - m['loaded_mb']:+.0f}", f"{m['texts_per_s']:.1f}", f"{m['texts_per_cpu_s']:.1f}"]
            for n, m in med.items()]
    md = "\n".join([
        "### `malloc_trim` after `embed` vs none", "",
        f"`python -m bench.trim_ab --runs {args.runs} --texts {args.texts}` on {commit}; one fresh process per run "
        f"(packaged MiniLM, {args.texts} chunk-sized texts in one `embed` call), variants in turns (ABBA), medians. "
        f"Load average {load_before} → {loadavg()}.", "",
        md_table(["variant", "loaded MB", "peak MB", "after MB", "kept MB (after − loaded)", "texts/s",
                  "texts/CPU s"], rows), "",
        f"No trim keeps {med['no trim']['after_mb'] - base['after_mb']:+.1f} MB resident after the call "
        f"({(med['no trim']['after_mb'] - base['after_mb']) / base['after_mb']:+.1%} of the process's RSS)."])
    (OUT / "trim_ab.json").write_text(json.dumps({"results": results, "medians": med}, indent=1))
    (OUT / "trim_ab.md").write_text(md + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
