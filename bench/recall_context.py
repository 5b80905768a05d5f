"""Contextual chunk text and query rewriting on LoCoMo, measured outside the pipeline (issue 36).

A lab harness: the shipped model embeds every LoCoMo line of the chosen conversations in
several variants of the text a chunk would carry, and each variant is searched within its
conversation (the bench's ``project`` scope) by the vector stage alone, by SQLite FTS5 BM25
over the same text, and by the shipped linear fusion of the two (no conversational context,
no dates: those act the same on every variant). Recall@10 as in bench/locomo.py.

Variants (what is embedded and indexed for BM25):

- ``plain``: the line as the pipeline embeds it today (``speaker: text [shares a photo: …]``);
- ``prev``: the previous line of the same session, then the line (the question an answer
  replies to);
- ``date``: ``session date: 8 May 2023`` then the line;
- ``ctxN``: the shipped context line (``indexer.core.documents.turn_context`` capped at N
  characters) before the line; ``+date`` after a variant adds the date line;
- ``A@vB``: BM25 over variant A's text, the vectors of variant B's (e.g. ``ctx200@vplain``).

Query rewrites (BM25 side only): ``asis``; ``content`` (stop words and question words
dropped, so FTS5's OR of terms is not diluted by them).

Use the tuning conversations (``--conversations``, default the even-numbered half) to choose;
the pipeline's leave-one-conversation-out run (bench/locomo.py) is the headline.

    python -m bench.recall_context [--conversations 0,2,4] [--model NAME]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sqlite3
import sys
from collections.abc import Sequence

import numpy as np

from bench.common import LOCOMO_PATH, OUT, Timer, loadavg, log, md_table, write_outputs

NAME = "recall_context"
VARIANTS = ("plain", "prev", "date")
STOP = frozenset(
    "a an and are as at be been but by did do does for from had has have he her him his how i if in into is it its "
    "me my of on or our she so than that the their them then there they this to was we were what when where which "
    "who whom why will with would you your".split())
_WORD = re.compile(r"\w+")


def variant_texts(lines, variant: str) -> list[str]:
    """The text each line's chunk carries in ``variant``: ``plain``, ``prev`` (the whole previous line),
    ``ctxN`` (the shipped context line, :func:`indexer.core.documents.turn_context`, capped at N
    characters), ``date``; ``+date`` after any of them adds the session date."""
    from bench.locomo import turn_text
    from indexer.core.documents import turn_context
    from ledger.rows import MessageRow

    base, _, extra = variant.partition("+")
    out = []
    for i, ln in enumerate(lines):
        t = turn_text(ln)
        before = lines[i - 1] if i > 0 else None
        if before is not None and (before.session, before.sample_id) != (ln.session, ln.sample_id):
            before = None
        if base == "prev" and before is not None:
            t = turn_text(before) + "\n" + t
        elif base.startswith("ctx") and before is not None:
            msg = MessageRow("m", "t", "user", turn_text(before), len(turn_text(before)), 0)
            ctx = turn_context([msg], redact=str, max_message_bytes=1 << 20, max_chars=int(base[3:]))
            t = f"{ctx}\n\n{t}" if ctx else t  # the line without its label, as the stages would see it
        if base == "date" or extra == "date":
            day = dt.datetime.fromtimestamp(ln.ts_ms / 1000, tz=dt.UTC)
            t = f"session date: {day.day} {day:%B %Y}\n" + t
        out.append(t)
    return out


def fts_query(question: str, rewrite: str) -> str:
    words = [w.lower() for w in _WORD.findall(question)]
    if rewrite == "content":
        words = [w for w in words if w not in STOP] or words
    return " OR ".join(f'"{w}"' for w in dict.fromkeys(words))


def bm25_scores(db: sqlite3.Connection, query: str, sample: str) -> dict[int, float]:
    rows = db.execute("SELECT rowid, -bm25(t) FROM t WHERE t MATCH ? AND sample = ? ORDER BY bm25(t) LIMIT 200",
                      (query, sample)).fetchall()
    return {int(r): float(s) for r, s in rows}


def main(argv: Sequence[str] | None = None) -> int:
    from bench.locomo import lines_of, questions_of, recall_at
    from indexer.core.ranking import SHIPPED, keyword_score, vector_score
    from indexer.embedding.cache import CachedEmbedder
    from indexer.embedding.embedder import FastEmbedder

    ap = argparse.ArgumentParser(prog="python -m bench.recall_context", description=__doc__.split("\n\n")[0])
    ap.add_argument("--conversations", default="0,2,4,6,8", help="indices of LoCoMo conversations to use")
    ap.add_argument("--model", default=None)
    ap.add_argument("--rewrites", default="asis,content", help="BM25 query forms: asis, content")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--out-name", default=NAME)
    args = ap.parse_args(argv)
    data = json.loads(LOCOMO_PATH.read_text(encoding="utf-8"))
    picked = [data[int(i)] for i in args.conversations.split(",")]
    emb = FastEmbedder(args.model) if args.model else FastEmbedder()
    cached = CachedEmbedder(emb, OUT / "recall-context-cache.sqlite")
    scale = (emb.cosine_floor, emb.cosine_ceiling)
    lines = [ln for s in picked for ln in lines_of(s)]
    index = {(ln.sample_id, ln.dia_id): i for i, ln in enumerate(lines)}
    qs = [q for s in picked for q in questions_of(s, {ln.dia_id for ln in lines_of(s)})[0]]
    qv = np.stack([emb.embed_query(q.question) for q in qs])
    sample_of = np.array([ln.sample_id for ln in lines])
    results: dict[str, dict[str, float]] = {}
    per_cat: dict[str, dict[int, list[float]]] = {}
    load0 = loadavg()
    for variant in args.variants.split(","):
        # ``A@vB``: BM25 over variant A's text, vectors of variant B's (context for one stage only)
        fts_variant, _, vec_variant = variant.partition("@v")
        texts = variant_texts(lines, fts_variant)
        with Timer() as t:
            dv = cached.embed(variant_texts(lines, vec_variant) if vec_variant else texts)
        log(f"{variant}: {len(texts)} texts embedded in {t.seconds:.0f} s")
        db = sqlite3.connect(":memory:")
        db.execute("CREATE VIRTUAL TABLE t USING fts5(body, sample UNINDEXED)")
        db.executemany("INSERT INTO t(rowid, body, sample) VALUES (?, ?, ?)",
                       [(i, tx, ln.sample_id) for i, (tx, ln) in enumerate(zip(texts, lines))])
        n_rows = len(texts)
        for rewrite in args.rewrites.split(","):
            rec = {"vector": [], "bm25": [], "hybrid": []}
            for qi, q in enumerate(qs):
                mask = sample_of == q.sample_id
                ids = np.nonzero(mask)[0]
                sims = dv[ids] @ qv[qi]
                vec = {int(ids[j]): vector_score(1.0 - float(sims[j]), *scale) for j in range(len(ids))}
                kw = {r: keyword_score(s, SHIPPED, n_rows) for r, s in
                      bm25_scores(db, fts_query(q.question, rewrite), q.sample_id).items()}
                gold = [index[(q.sample_id, g)] for g in q.gold]
                w = SHIPPED.vector_weight
                hyb = {r: w * vec.get(r, 0.0) + (1 - w) * kw.get(r, 0.0) for r in set(vec) | set(kw)}
                for name, sc in (("vector", vec), ("bm25", kw), ("hybrid", hyb)):
                    top = [str(r) for r, _ in sorted(sc.items(), key=lambda kv: -kv[1])[:10]]
                    r10 = recall_at(top, [str(g) for g in gold], 10)
                    rec[name].append(r10)
                    per_cat.setdefault(f"{variant}/{rewrite}/{name}", {}).setdefault(q.category, []).append(r10)
            results[f"{variant}/{rewrite}"] = {k: 100 * float(np.mean(v)) for k, v in rec.items()}
            log(f"{variant}/{rewrite}: " + ", ".join(f"{k} {v:.1f}" for k, v in results[f'{variant}/{rewrite}'].items()))
    rows = [[k, f"{v['vector']:.1f}", f"{v['bm25']:.1f}", f"{v['hybrid']:.1f}"] for k, v in results.items()]
    md = "\n".join([
        "# Contextual chunk text and query rewriting on LoCoMo (lab harness, issue 36)\n",
        f"`python -m bench.recall_context --conversations {args.conversations} --variants {args.variants} "
        f"--rewrites {args.rewrites}{' --model ' + args.model if args.model else ''}` with "
        f"`{emb.fingerprint}`; "
        f"{len(qs)} questions, {len(lines)} lines; load average {load0} → {loadavg()}. Recall@10 within the "
        "question's conversation; hybrid = the shipped linear fusion without conversational context or dates.\n",
        md_table(["text variant / BM25 query", "vector R@10", "BM25 R@10", "hybrid R@10"], rows),
    ])
    write_outputs(args.out_name, md, {"results": results, "per_category": {k: {c: 100 * float(np.mean(v)) for c, v in d.items()}
                                                                  for k, d in per_cat.items()},
                             "conversations": args.conversations, "model": emb.fingerprint})
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
