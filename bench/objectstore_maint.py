"""The writer's maintenance on object storage after 1,000 new documents: by step, and two commits
side by side in one run.

The table: the ``objectstore`` benchmark's local build of a size (``bench/objectstore.py``:
1,000-document upserts through the real sink, its final ``maintain(force=True)`` with the
vector index), uploaded to a bucket of the S3-compatible server (moto with ranged reads at the
cost of the range and request counting, ``bench/s3_ranges.py``, in its own process) once per
arm, so each arm maintains the same table.

- ``--steps``: on a copy of the table, 1,000 more documents, then what ``maintain()`` does,
  step by step with its object requests: ``LanceTable.optimize`` is, in lancedb's Rust, a
  compaction with Lance's default options, the removal of old versions, then the index update;
  the steps are timed here through ``pylance`` (the same Lance calls, one at a time).
- arms (``--before TREE``; the after arm is this checkout): each arm's ``maintain()`` run by a
  worker process importing that tree (``python -P``, ``PYTHONPATH=TREE``), the arms alternated
  round by round on their own bucket (round k: 1,000 more documents, then ``maintain()``),
  with the load average at each.

    python -m bench.objectstore_maint [--size 100k] [--before /work/wt-before] [--rounds 3] [--steps]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # the worker, run as a file by ``python -P`` inside another tree
    sys.path.insert(0, os.environ["BENCH_TREE"])

from bench.common import OUT, REPO, fmt_s, loadavg, log, md_table, write_outputs  # noqa: E402

NAME = "objectstore_maint"
DOCS = 1000


def _embedder():
    from bench.latency import PoolEmbedder, locomo_lines, pool_texts, real_embedder

    real = real_embedder(OUT / "latency-index")
    pool = pool_texts(locomo_lines())
    return PoolEmbedder(real, pool, real.embed(pool)), pool


def _counts(spec: dict) -> dict:
    import boto3

    from bench.s3_ranges import request_counts

    o = spec["options"]
    c = boto3.client("s3", endpoint_url=o["aws_endpoint"], region_name=o["aws_region"],
                     aws_access_key_id=o["aws_access_key_id"], aws_secret_access_key=o["aws_secret_access_key"])
    return request_counts(c, spec["uri"].removeprefix("s3://").split("/")[0])


def _delta(after: dict, before: dict) -> dict:
    return {"requests": sum(after.get(k, 0) - before.get(k, 0) for k in after if k != "get_bytes"),
            "put": after.get("PUT", 0) - before.get("PUT", 0),
            "get_mb": (after.get("get_bytes", 0) - before.get("get_bytes", 0)) / 1e6}


def _layout(tbl) -> dict:
    """Fragments and their rows, index segments: what the next compaction and query see."""
    st = tbl.stats()
    ix = {i.name: int(getattr(i, "num_segments", 1) or 1) for i in tbl.list_indices()}
    return {"rows": int(st["num_rows"]), "fragments": int(st["fragment_stats"]["num_fragments"]),
            "small_fragments": int(st["fragment_stats"]["num_small_fragments"]), "index_segments": ix}


# --------------------------------------------------------------------------- worker (in an arm's tree)


def worker(spec: dict) -> dict:
    """1,000 more documents into the arm's table, then its ``maintain()`` (or ``--steps``)."""
    from bench.latency import PERSONA, make_docs
    from bench.objectstore import _config
    from exporters.lancedb import LanceSink
    from exporters.lancedb.location import IndexLocation

    emb, pool = _embedder()
    config = _config(Path(spec["index_dir"]), spec["uri"], spec["options"])
    sink = LanceSink(IndexLocation.from_config(config), emb, writer_dir=config.index.dir, role="bench")
    out: dict = {"tree": spec["tree"], "load_before": loadavg()}
    try:
        start = spec["turns_from"]
        t0 = time.perf_counter()
        sink.upsert(PERSONA, make_docs(start + DOCS, pool, start, DOCS))
        out["upsert_s"] = time.perf_counter() - t0
        tbl = sink.active_table(PERSONA)
        out["layout_before"] = _layout(tbl)
        if spec.get("steps"):
            out["steps"] = _steps(sink, tbl, spec)
        else:
            c0, t0 = _counts(spec), time.perf_counter()
            out["done"] = sink.maintain()
            out["maintain_s"] = time.perf_counter() - t0
            out.update(_delta(_counts(spec), c0))
        out["layout_after"] = _layout(sink.active_table(PERSONA))
    finally:
        sink.close()
    out["load_after"] = loadavg()
    return out


def _steps(sink, tbl, spec: dict) -> dict:
    """``maintain()`` step by step; lancedb's ``optimize`` split into the Lance calls it makes."""
    import lance

    steps: dict = {}

    def ds():  # the latest version (``tbl.to_lance()`` opens the table's own, older after a step)
        return lance.dataset(tbl.uri, storage_options=spec["options"])

    def timed(name: str, call) -> None:
        c0, t0 = _counts(spec), time.perf_counter()
        got = call()
        steps[name] = {"seconds": time.perf_counter() - t0, **_delta(_counts(spec), c0),
                       "result": str(got)[:300] if got is not None else ""}
        log(f"  step {name}: {fmt_s(steps[name]['seconds'])}, {steps[name]['requests']:,} requests, "
            f"{steps[name]['put']:,} PUT, {steps[name]['get_mb']:.1f} MB GET {steps[name]['result'][:160]}")

    timed("indexes present (_ensure_indexes)", lambda: sink._ensure_indexes(tbl))
    timed("compaction, Lance defaults (compact_files)", lambda: ds().optimize.compact_files())
    timed("old versions removed (cleanup_old_versions)",
          lambda: ds().cleanup_old_versions(older_than=sink.cleanup_older_than))
    fold = spec.get("fold", "all")
    if fold == "all":
        timed("index update (optimize_indices)", lambda: ds().optimize.optimize_indices())
    else:  # one index at a time: merged with the new rows (Lance's default) or a new segment (delta)
        extra = {"num_indices_to_merge": 0} if fold == "delta" else {}
        for ix in ds().describe_indices():
            timed(f"index update {ix.name} ({fold})",
                  lambda n=ix.name: ds().optimize.optimize_indices(index_names=[n], **extra))
    tbl.checkout_latest()
    sink._since_optimize[tbl.name] = 0
    from exporters.lancedb import vector_maint

    entry = sink._active["personas"][spec["persona"]]
    timed("vector index due check", lambda: vector_maint.due(tbl, sink.vector_index_rows, entry.get("vector_index")))
    timed("pointer and scope tables", sink._maintain_small_tables)
    timed("retired tables and orphans", sink._drop_retired_and_orphans)
    return steps


# --------------------------------------------------------------------------- coordinator


def _run_worker(tree: Path, spec: dict) -> dict:
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != REPO]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), *extra]), BENCH_TREE=str(tree))
    res = subprocess.run([sys.executable, "-P", str(Path(__file__).resolve()), "--worker", json.dumps(spec | {"tree": str(tree)})],
                         env=env, capture_output=True, text=True, cwd=str(tree))
    sys.stderr.write(res.stderr[-4000:])
    if res.returncode != 0:
        raise RuntimeError(f"worker in {tree} failed ({res.returncode}): {res.stderr[-1500:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def _git(tree: Path) -> str:
    return subprocess.run(["git", "-C", str(tree), "log", "-1", "--format=%h %s"], capture_output=True, text=True).stdout.strip()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.objectstore_maint", description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="100k", choices=("10k", "100k", "1m"),
                    help="1m: the ann benchmark's corpus (built once, ~2.5 GB; ~3 GB of moto memory per arm)")
    ap.add_argument("--before", default=None, help="a worktree of the commit to compare with (default: none)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", action="store_true", help="also maintain() step by step (needs pylance)")
    ap.add_argument("--fold", choices=("all", "merge", "delta"), default="all",
                    help="--steps: the index update in one call (all), or per index merged or as a new segment")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker)), default=str))
        return 0
    from bench.latency import PERSONA
    from bench.objectstore import SIZES, build_local_cached, upload
    from tests.s3_server import start_s3

    n = SIZES[args.size]
    emb, pool = _embedder()
    local = build_local_cached(args.size, n, emb.real, pool, emb.vectors, emb)
    arms = [("after", REPO)] + ([("before", Path(args.before).resolve())] if args.before else [])
    s3 = start_s3(own_process=True, server_module="bench.s3_ranges")
    found: dict = {"size": args.size, "arms": {a: {"commit": _git(t), "rounds": []} for a, t in arms}, "steps": None}
    try:
        specs = {}
        for arm, _tree in arms + ([("steps", arms[-1][1])] if args.steps else []):
            remote = upload(local, s3, args.size)
            specs[arm] = {"uri": remote["info"]["uri"], "options": s3.options(), "persona": PERSONA,
                          "index_dir": str(remote["config"].index.dir), "turns_from": n + DOCS}
            # each arm its own writer folder (the next upload() empties the one it made)
            own = OUT / "objectstore" / f"{args.size}-maint-{arm}"
            shutil.rmtree(own, ignore_errors=True)
            Path(specs[arm]["index_dir"]).parent.rename(own)
            specs[arm]["index_dir"] = str(own / "index")
        if args.steps:
            log(f"steps on {arms[-1][0]} ({_git(arms[-1][1])})")
            found["steps"] = _run_worker(arms[-1][1], specs["steps"] | {"steps": True, "fold": args.fold})
        for k in range(args.rounds):
            for arm, tree in (arms if k % 2 == 0 else arms[::-1]):
                spec = specs[arm] | {"turns_from": n + DOCS + (k + 1) * DOCS}
                got = _run_worker(tree, spec)
                found["arms"][arm]["rounds"].append(got)
                log(f"round {k + 1} {arm}: maintain {fmt_s(got['maintain_s'])}, {got['requests']:,} requests, "
                    f"{got['put']:,} PUT, {got['get_mb']:.1f} MB GET, load {got['load_before']}; "
                    f"{got['layout_before']} -> {got['layout_after']}")
    finally:
        s3.stop()
    write_outputs(NAME, report(found), found)
    return 0


def report(found: dict) -> str:
    parts = [f"### Writer maintenance on S3 after {DOCS:,} documents ({found['size']})\n"]
    if found.get("steps"):
        st = found["steps"]
        parts += [f"By step (commit {_git(Path(st['tree']))}; load {st['load_before']}):", "",
                  md_table(["step", "time", "requests", "PUT", "GET MB"],
                           [[k, fmt_s(v["seconds"]), f"{v['requests']:,}", f"{v['put']:,}", f"{v['get_mb']:.1f}"]
                            for k, v in st["steps"].items()]), ""]
    def segs(layout: dict) -> str:
        ix = layout["index_segments"]
        scalar = max((v for k, v in ix.items() if k not in ("text_idx", "vector_idx")), default=0)
        return f"{layout['fragments']} / {scalar}, {ix.get('text_idx', 0)}, {ix.get('vector_idx', 0)}"

    rows = []
    for arm, a in found["arms"].items():
        for k, r in enumerate(a["rounds"]):
            rows.append([arm, a["commit"][:60], k + 1, fmt_s(r["maintain_s"]), f"{r['requests']:,}", f"{r['put']:,}",
                         f"{r['get_mb']:.1f}", segs(r["layout_after"]),
                         r["load_before"]])
    parts.append(md_table(["arm", "commit", "round", "maintain()", "requests", "PUT", "GET MB",
                           "after: fragments / index segments (scalar, text, vector)", "load average"], rows))
    for arm, a in found["arms"].items():
        if a["rounds"]:
            total = sum(r["maintain_s"] for r in a["rounds"])
            reqs = sum(r["requests"] for r in a["rounds"])
            parts.append(f"\n{arm}: {len(a['rounds'])} rounds, maintain() {total / len(a['rounds']):.1f} s and "
                         f"{reqs / len(a['rounds']):,.0f} requests a round on average")
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    sys.exit(main())
