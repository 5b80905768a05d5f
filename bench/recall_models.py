"""What each packaged embedding model costs, side by side in one run (issue 36).

For every model of :data:`indexer.embedding.packaged.MODELS`, in a fresh process each
(models alternate A B B A … over ``--runs``; medians): resident memory after loading,
query embedding time (p50 of ``--queries`` LoCoMo questions, wall and CPU), document
throughput (``--texts`` LoCoMo lines in one ``embed`` call, texts per wall and CPU second),
and where the model's cosine similarities fall for LoCoMo questions against their gold turn
and against unrelated turns of other conversations (what ``cosine_floor`` is set from:
indexer/embedding/packaged.py).

Recall is measured by ``bench.locomo --model`` (the real pipeline) and
``bench.recall_compare`` (both models in one table).

    python -m bench.recall_models [--runs 2] [--texts 400] [--queries 100]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
from collections.abc import Sequence

from bench.common import LOCOMO_PATH, REPO, loadavg, log, md_table, write_outputs

NAME = "recall_models"

CHILD = r"""
import json, os, resource, sys, time
import numpy as np
args = json.loads(sys.stdin.read())
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
base = rss()
from indexer.embedding.embedder import FastEmbedder
e = FastEmbedder(args["model"])
loaded = rss()
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
e.embed_query("warm up")
qwall, qcpu = [], []
for q in args["queries"]:
    w0, c0 = time.perf_counter(), cpu()
    e.embed_query(q)
    qwall.append((time.perf_counter() - w0) * 1000); qcpu.append((cpu() - c0) * 1000)
w0, c0 = time.perf_counter(), cpu()
docs = e.embed(args["texts"])
dwall, dcpu = time.perf_counter() - w0, cpu() - c0
gold_q = np.stack([e.embed_query(q) for q in args["pair_queries"]])
gold_d = e.embed(args["pair_gold"])
other_d = e.embed(args["pair_other"])
gold = (gold_q * gold_d).sum(1).tolist()
other = (gold_q * other_d).sum(1).tolist()
print(json.dumps({"loaded_mb": loaded - base, "rss_mb": rss(), "q_wall": qwall, "q_cpu": qcpu,
                  "docs_per_s": len(args["texts"]) / dwall, "docs_per_cpu_s": len(args["texts"]) / dcpu,
                  "gold": gold, "other": other, "fingerprint": e.fingerprint}))
"""


def locomo_material(n_texts: int, n_queries: int, seed: int = 36) -> dict:
    from bench.locomo import lines_of, questions_of, turn_text

    data = json.loads(LOCOMO_PATH.read_text(encoding="utf-8"))
    rng = random.Random(seed)
    lines = [ln for s in data for ln in lines_of(s)]
    texts = [turn_text(ln) for ln in rng.sample(lines, n_texts)]
    by_dia = {(ln.sample_id, ln.dia_id): ln for ln in lines}
    qs = []
    for s in data:
        valid = {ln.dia_id for ln in lines_of(s)}
        qs.extend(questions_of(s, valid)[0])
    picked = rng.sample(qs, n_queries)
    pair_q, pair_gold, pair_other = [], [], []
    for q in picked:
        pair_q.append(q.question)
        pair_gold.append(turn_text(by_dia[(q.sample_id, q.gold[0])]))
        others = [ln for ln in lines if ln.sample_id != q.sample_id]
        pair_other.append(turn_text(rng.choice(others)))
    return {"texts": texts, "queries": [q.question for q in picked], "pair_queries": pair_q,
            "pair_gold": pair_gold, "pair_other": pair_other}


def run_child(model: str, material: dict) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps({"model": model, **material}),
                          capture_output=True, text=True, cwd=REPO, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{model}: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def q(values: Sequence[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(p * len(s)))]


def main(argv: Sequence[str] | None = None) -> int:
    from indexer.embedding import packaged

    ap = argparse.ArgumentParser(prog="python -m bench.recall_models", description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--texts", type=int, default=400)
    ap.add_argument("--queries", type=int, default=100)
    args = ap.parse_args(argv)
    material = locomo_material(args.texts, args.queries)
    models = list(packaged.MODELS)
    order = [m for r in range(args.runs) for m in (models if r % 2 == 0 else models[::-1])]
    results: dict[str, list[dict]] = {m: [] for m in models}
    load_before = loadavg()
    for m in order:
        log(f"{m} ...")
        results[m].append(run_child(m, material))
    rows, raw = [], {}
    for m in models:
        rs = results[m]
        med = lambda key: statistics.median(r[key] for r in rs)  # noqa: E731
        qw = statistics.median(statistics.median(r["q_wall"]) for r in rs)
        qc = statistics.median(statistics.median(r["q_cpu"]) for r in rs)
        gold, other = rs[0]["gold"], rs[0]["other"]
        raw[m] = {"query_ms_p50": qw, "query_cpu_ms_p50": qc, "docs_per_s": med("docs_per_s"),
                  "docs_per_cpu_s": med("docs_per_cpu_s"), "loaded_mb": med("loaded_mb"), "rss_mb": med("rss_mb"),
                  "gold_cos_q": [q(gold, p) for p in (0.1, 0.5, 0.9)],
                  "other_cos_q": [q(other, p) for p in (0.1, 0.5, 0.9)],
                  "cosine_floor": packaged.MODELS[m].cosine_floor, "cosine_ceiling": packaged.MODELS[m].cosine_ceiling, "fingerprint": rs[0]["fingerprint"]}
        r = raw[m]
        rows.append([f"`{m}`", f"{r['query_ms_p50']:.1f}", f"{r['query_cpu_ms_p50']:.1f}", f"{r['docs_per_s']:.1f}",
                     f"{r['docs_per_cpu_s']:.1f}", f"{r['loaded_mb']:.0f}", f"{r['rss_mb']:.0f}",
                     " / ".join(f"{v:.2f}" for v in r["gold_cos_q"]), " / ".join(f"{v:.2f}" for v in r["other_cos_q"]),
                     f"{r['cosine_floor']:.2f} – {r['cosine_ceiling']:.2f}"])
    md = "\n".join([
        "# Packaged embedding models: cost (issue 36)\n",
        f"`python -m bench.recall_models --runs {args.runs} --texts {args.texts} --queries {args.queries}`; "
        f"load average before {load_before}, after {loadavg()}; a fresh process per model and run, medians.\n",
        md_table(["model", "query ms p50", "query CPU ms p50", "docs/s", "docs/CPU-s", "RSS added by loading (MB)",
                  "process RSS after (MB)", "cos question–gold turn p10/50/90", "cos question–unrelated turn p10/50/90",
                  "scale (floor – ceiling)"], rows),
    ])
    write_outputs(NAME, md, {"models": raw, "runs": args.runs, "texts": args.texts, "queries": args.queries})
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
