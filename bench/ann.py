"""ANN vector index (issue 12): persona-scope latency with and without it, recall, crossover.

(Work in progress: corpus builder first.)
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Sequence

import numpy as np

from bench.common import OUT, Timer, file_lock, fmt_s, log, sha256_file, sha256_json
from bench.latency import (LOCOMO_PATH, NOISE, PERSONA, POOL_SIZE, PROJECT, PROJECT_SESSIONS, TURNS_PER_SESSION,
                           PoolEmbedder, corpus_config, make_docs, session_labels)

NAME = "ann"
CORPUS_VERSION = "ann-corpus-v1"
SIZES = {"10k": 10_000, "100k": 100_000, "300k": 300_000, "1M": 1_000_000}
UPSERT_DOCS = 1000
APPEND_DOCS = 10_000
CACHE = OUT / "ann-index"


def build_corpus(size_name: str, n_turns: int, real, pool: Sequence[str], pool_vecs: np.ndarray) -> dict:
    """The table of ``n_turns`` turns (the latency corpus, larger), built once through the real
    :class:`LanceSink` *without* a vector index and cached under ``bench/out/ann-index/``."""
    with file_lock(CACHE / f".lock-{size_name}"):
        return _build_corpus(size_name, n_turns, real, pool, pool_vecs)


def _build_corpus(size_name: str, n_turns: int, real, pool: Sequence[str], pool_vecs: np.ndarray) -> dict:
    from exporters.lancedb import LanceSink
    from exporters.lancedb.rows import document_rows
    from indexer.core.build import DOCUMENT_FORMAT_VERSION
    from indexer.core.chunking import CHUNKING_VERSION
    from indexer.state.db import StateDB

    key = sha256_json({"v": CORPUS_VERSION, "n": n_turns, "pool": POOL_SIZE, "noise": NOISE,
                       "data": sha256_file(LOCOMO_PATH), "fp": real.fingerprint, "chunking": CHUNKING_VERSION,
                       "format": DOCUMENT_FORMAT_VERSION, "tps": TURNS_PER_SESSION})[:12]
    root = CACHE / f"{size_name}-{key}"
    done = root / "built.json"
    if done.exists():
        info = json.loads(done.read_text())
        info["cached"] = True
        info["root"] = str(root)
        return info
    if root.exists():
        shutil.rmtree(root)
    config = corpus_config(root)
    config.index.dir.mkdir(parents=True)
    log(f"building the {size_name} corpus ({n_turns:,} turns) in {root}")
    emb = PoolEmbedder(real, pool, pool_vecs)
    sink = LanceSink(config.lancedb_dir, emb, vector_index_rows=None)  # rows only: the bench adds the index
    with Timer() as total:
        # The first batch through the real upsert (creates the table, its indexes and the pointer); the
        # rest appended as the same rows (document_rows, what upsert writes): merge_insert's join over
        # a growing table would make a 1M build take hours, and a fresh corpus has nothing to replace.
        sink.upsert(PERSONA, make_docs(n_turns, pool, 0, UPSERT_DOCS))
        table = sink.active_table(PERSONA)
        for start in range(UPSERT_DOCS, n_turns, APPEND_DOCS):
            rows, _ = document_rows(PERSONA, make_docs(n_turns, pool, start, APPEND_DOCS), emb, sink.chunk_settings)
            table.add(rows)
            if (start // APPEND_DOCS) % 10 == 9:
                log(f"  {min(n_turns, start + APPEND_DOCS):,} / {n_turns:,} turns ({fmt_s(time.perf_counter() - total.start)})")
        sink.maintain(force=True)
    stats = sink.table_stats(PERSONA)
    sink.close()
    labels = session_labels(-(-n_turns // TURNS_PER_SESSION))
    state = StateDB(config.state_db_path)
    try:
        with state.atomic():
            state.register_sessions([(label, PERSONA, "active") for label in labels])
        state.project_add(PROJECT, labels[:PROJECT_SESSIONS])
    finally:
        state.close()
    info = {"size": size_name, "turns": n_turns, "sessions": len(labels), "chunks": stats.chunks,
            "bytes": stats.total_bytes, "build_seconds": round(total.seconds, 1),
            "when": time.strftime("%Y-%m-%d %H:%M:%S")}
    done.write_text(json.dumps(info, indent=1))
    log(f"built {size_name}: {stats.chunks:,} chunks in {fmt_s(total.seconds)}")
    info["cached"] = False
    info["root"] = str(root)
    return info
