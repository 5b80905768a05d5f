"""LoCoMo recall, both packaged models and both document formats side by side in one run (issue 36).

For each model (``--models``; default MiniLM, then e5) and each document format (``--formats``:
``doc-v2``, the previous release's turns without context, opened as an earlier release cached it,
see :func:`bench.locomo.open_built`; and this code's, with the ``Previous:`` context line, built or
brought up to date here through the real pipeline), then in this one process: the vector stage alone, the keyword stage alone and hybrid with the
shipped ranking over every question; hybrid with the weights chosen by leave-one-conversation-
out cross-validation over :data:`GRID` (the headline: each conversation measured with the
weights chosen on the nine others); per-category recall@10 of each; hybrid latency at LoCoMo's
size. The grid, the questions and the code are the same for every model.

The context variant was chosen on LoCoMo conversations 0, 2 and 4 (bench/recall_context.py):
the recall pooled over the other seven conversations' folds is reported beside the headline.

    python -m bench.recall_compare [--models A,B] [--formats doc-v2,doc-v3] [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench.common import LOCOMO_PATH, OUT, fmt_s, git_commit, loadavg, log, md_table, median, write_outputs
from bench.locomo import (
    CATEGORIES,
    DRAGON,
    QueryMemo,
    aggregate,
    grid_points,
    index_key,
    leave_one_out,
    limit_questions,
    lines_of,
    open_built,
    questions_of,
    recalls,
    retrieve_all,
    run_searcher,
)

NAME = "recall_compare"
DEFAULT_MODELS = ("sentence-transformers/all-MiniLM-L6-v2", "intfloat/multilingual-e5-small-q4")
#: The same grid for every model: the shipped point (VECTOR_WEIGHT 0.3, SESSION 1.0) and around it, with a
#: heavier vector weight for a stronger vector stage (small: a point costs ~45 s on the shared machine).
GRID = {"VECTOR_WEIGHT": (0.3, 0.5), "SESSION_WEIGHT": (0.6, 1.0, 1.5)}
QUICK_GRID = {"VECTOR_WEIGHT": (0.3, 0.5)}
#: The LoCoMo conversations (indices) the context variant was chosen on (bench/recall_context.py).
TUNING = (0, 2, 4)


def per_category(agg: dict) -> dict[str, float]:
    return {CATEGORIES[c]: agg[c][10] for c in sorted(CATEGORIES) if agg[c]["n"]}


def revectored(src: Path, embedder) -> Path:
    """A copy of the doc-v3 index ``src`` whose vectors are re-embedded from each chunk's text
    with this code's ``embedding_text`` (the context line left out), its vector index trained
    again: the index a ``lines-v3`` sync writes, without a second 30-minute sync of LoCoMo (the
    chunk texts are the same; every vector is an embedding-cache hit). Made once."""
    import lancedb
    import numpy as np
    import pyarrow as pa

    from exporters.lancedb import vector_maint
    from exporters.lancedb.schema import _clean
    from indexer.core.chunking import CHUNKING_VERSION, embedding_text

    dst = src.with_name(f"{src.name}-{CHUNKING_VERSION}")
    if (dst / ".revectored").exists():
        return dst
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    db = lancedb.connect(str(dst / "index" / "lancedb"))
    [entry] = json.loads((dst / "index" / "lancedb" / "active.json").read_text())["personas"].values()
    tbl = db.open_table(entry["table"])
    rows = tbl.to_arrow()
    vecs = np.asarray(embedder.embed([_clean(embedding_text(t)) for t in rows.column("text").to_pylist()]),
                      dtype=np.float32)
    dim = vecs.shape[1]
    col = rows.schema.get_field_index("vector")
    rows = rows.set_column(col, rows.schema.field("vector"),
                           pa.FixedSizeListArray.from_arrays(pa.array(vecs.reshape(-1), type=pa.float32()), dim))
    tbl.merge_insert("id").when_matched_update_all().execute(rows)
    vector_maint.build(tbl, "locomo", "revectored")
    tbl.optimize()
    (dst / ".revectored").write_text(str(len(vecs)))
    log(f"revectored {len(vecs)} chunks into {dst}")
    return dst


def measure(model: str, samples: list, qs: list, grid: dict, document_format: str) -> dict:
    from indexer.embedding.cache import CachedEmbedder
    from indexer.search.searcher import Searcher

    if document_format == "doc-v2":
        built = open_built(samples, model, document_format)
    else:  # doc-v3 as a lines-v2 sync built it (context line embedded), and as lines-v3 writes it
        v3 = open_built(samples, model, "doc-v3", OUT / "locomo-index" / index_key(samples, model, "doc-v3"))
        built = v3 if document_format == "doc-v3-embedded" else open_built(
            samples, model, "doc-v3", revectored(v3.root, CachedEmbedder(v3.embedder.inner,
                                                                         OUT / "locomo-index" / "embed_cache.sqlite")))
    emb = QueryMemo(built.embedder)
    searcher = Searcher(built.config, embedder=emb)
    out: dict = {"model": built.embedder.fingerprint, "sync_seconds": built.build_info.get("first_embedding_build",
                                                                                           {}).get("seconds")}
    try:
        runs = {}
        for mode in ("vector", "keyword", "hybrid"):
            runs[mode] = run_searcher(searcher, qs, mode, mode)
            log(f"{model} {mode}: {fmt_s(runs[mode].seconds)}")
        found_all = retrieve_all(searcher, [(q.question, q.home) for q in qs])
        points = grid_points(found_all, qs, [dict(zip(grid, combo)) for combo in itertools.product(*grid.values())])
        cv = leave_one_out(points, [q.sample_id for q in qs])
    finally:
        searcher.close()
    aggs = {m: aggregate([(q.category, recalls(d, q.gold)) for q, d in zip(qs, r.per_question)])
            for m, r in runs.items()}
    # per-category of the cross-validated hybrid: each question scored with its fold's weights
    fold_values = {f["held_out"]: json.dumps(f["values"], sort_keys=True) for f in cv["folds"]}
    by_values = {json.dumps(p["values"], sort_keys=True): p["per_q"] for p in cv["points"]}
    cv_per_q = [by_values[fold_values[q.sample_id]][i] for i, q in enumerate(qs)]
    untuned = {s["sample_id"] for i, s in enumerate(samples) if i not in TUNING}
    held = [r for q, r in zip(qs, cv_per_q) if q.sample_id in untuned]
    cats: dict[int, list[float]] = {}
    for q, r in zip(qs, cv_per_q):
        cats.setdefault(q.category, []).append(r)
    out.update({
        "r10": {m: a["overall"][10] for m, a in aggs.items()},
        "r5": {m: a["overall"][5] for m, a in aggs.items()},
        "r25": {m: a["overall"][25] for m, a in aggs.items()},
        "categories": {m: per_category(a) for m, a in aggs.items()},
        "cv_r10": cv["loco_r10"], "cv_untuned_r10": 100 * sum(held) / max(1, len(held)), "cv_untuned_n": len(held),
        "cv_in_sample": cv["in_sample"], "cv_majority": cv["majority"],
        "cv_folds": [{k: f[k] for k in ("held_out", "values", "test_r10")} for f in cv["folds"]],
        "cv_categories": {CATEGORIES[c]: 100 * sum(v) / len(v) for c, v in sorted(cats.items())},
        "hybrid_ms_p50": median(runs["hybrid"].took_ms), "vector_ms_p50": median(runs["vector"].took_ms),
        "empty": {m: r.empty for m, r in runs.items()}, "foreign": {m: r.foreign for m, r in runs.items()},
        "grid_points": [{"values": p["values"], "r10": p["r10"]} for p in cv["points"]],
    })
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.recall_compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    ap.add_argument("--formats", default="doc-v2,doc-v3-embedded,doc-v3",
                    help="doc-v2 (today), doc-v3-embedded (context line embedded too), doc-v3 (shipped)")
    ap.add_argument("--quick", action="store_true", help="120 questions, a small grid")
    args = ap.parse_args(argv)
    started, load0 = time.perf_counter(), loadavg()
    data = json.loads(LOCOMO_PATH.read_text(encoding="utf-8"))
    samples = data  # the cached index holds every conversation; --quick asks fewer questions
    per_sample = [questions_of(s, {ln.dia_id for ln in lines_of(s)})[0] for s in samples]
    qs = limit_questions(per_sample, 120 if args.quick else None)
    grid = QUICK_GRID if args.quick else GRID
    runs = [(m, f) for m in args.models.split(",") if m for f in args.formats.split(",") if f]
    res = {f"{m} {f}": measure(m, samples, qs, grid, f) for m, f in runs}
    keys = list(res)

    def col(key: str) -> str:
        m, f = key.split(" ")
        what = {"doc-v2": "today", "doc-v3-embedded": "context, embedded too", "doc-v3": "context, keyword only"}
        return f"`{m.split('/')[-1]}` {f} ({what.get(f, f)})"

    head = ["", *[col(k) for k in keys]]
    rows = [["hybrid R@10, leave-one-conversation-out (headline)", *[f"**{res[k]['cv_r10']:.1f}**" for k in keys]],
            [f"hybrid R@10, LOCO, the {res[keys[0]]['cv_untuned_n']} questions of conversations the context was "
             "not chosen on", *[f"{res[k]['cv_untuned_r10']:.1f}" for k in keys]],
            ["hybrid R@10, shipped weights (in-sample)", *[f"{res[k]['r10']['hybrid']:.1f}" for k in keys]],
            ["vector stage alone R@10", *[f"{res[k]['r10']['vector']:.1f}" for k in keys]],
            ["keyword stage alone R@10", *[f"{res[k]['r10']['keyword']:.1f}" for k in keys]],
            ["hybrid R@5 / R@25 (shipped)", *[f"{res[k]['r5']['hybrid']:.1f} / {res[k]['r25']['hybrid']:.1f}"
                                             for k in keys]],
            ["vector R@5 / R@25", *[f"{res[k]['r5']['vector']:.1f} / {res[k]['r25']['vector']:.1f}" for k in keys]],
            ["hybrid query p50 (ms, 5,882 turns, in-process)", *[f"{res[k]['hybrid_ms_p50']:.1f}" for k in keys]],
            ["weights most folds chose", *[f"{res[k]['cv_majority']}" for k in keys]],
            ["empty answers (hybrid)", *[f"{res[k]['empty']['hybrid']}" for k in keys]]]
    cat_rows = []
    for cat in CATEGORIES.values():
        cat_rows.append([cat, *[f"{res[k]['categories']['vector'].get(cat, float('nan')):.1f} / "
                                f"{res[k]['categories']['keyword'].get(cat, float('nan')):.1f} / "
                                f"{res[k]['cv_categories'].get(cat, float('nan')):.1f}" for k in keys]])
    md = "\n".join([
        "# LoCoMo recall: packaged models, turns with and without context, side by side (issue 36)\n",
        f"`python -m bench.recall_compare --models {args.models} --formats {args.formats}"
        f"{' --quick' if args.quick else ''}` at commit {git_commit()}; "
        f"{len(qs)} questions of {len(samples)} conversations (categories 1–4); load average {load0} at the start, "
        f"{loadavg()} at the end; {fmt_s(time.perf_counter() - started)}. Real pipeline (LanceDB, redaction, "
        f"`memory_search` with scope `project`); doc-v2 indexes as the previous release built them. "
        f"DRAGON (LoCoMo paper) R@10: {DRAGON[10]}.\n",
        md_table(head, rows),
        "\nPer category, R@10: vector alone / keyword alone / hybrid cross-validated\n",
        md_table(["category", *head[1:]], cat_rows),
        "\nGrid (the same for every column): " + ", ".join(f"{k} {v}" for k, v in grid.items()),
    ])
    write_outputs(NAME, md, {"results": res, "grid": grid, "questions": len(qs), "load_start": load0,
                             "load_end": loadavg()})
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
