"""A writer with no maintenance schedule (the CLI: cron, a one-shot backfill before ``serve``) leaves
indexed tables: a pass that wrote folds new rows into every index when they are a large share of the
table, and a tail pass of a few turns only reads index metadata."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from fake_embedder import FakeEmbedder

from exporters.lancedb import LanceSink, open_retriever
from exporters.lancedb.coverage import FOLD_MIN_ROWS, FOLD_SHARE, Coverage, coverage, fold_due
from ledger.writer import LedgerWriter
from tests.cli_runner import run_cli
from tests.test_lancedb_sink import mkdoc

WORDS = "deploy cache token schema migration retry budget latency shard vector kafka redis jwt expiry".split()


def _index_coverage(tbl) -> dict[str, tuple[int, int]]:
    """(indexed, unindexed) rows of every index of ``tbl``, by index name."""
    out = {}
    for ix in tbl.list_indices():
        stats = tbl.index_stats(ix.name)
        out[ix.name] = (stats.num_indexed_rows, stats.num_unindexed_rows)
    return out


@pytest.mark.parametrize("rows, unindexed, due", [
    (0, 0, False), (100, 100, False),  # a small table: a flat scan costs less than a fold
    (1_000, FOLD_MIN_ROWS, True), (6_000, 299, False), (6_000, 300, True), (100_000, 4_999, False),
])
def test_fold_due_when_a_large_share_is_outside_an_index(rows, unindexed, due):
    assert fold_due(Coverage(rows, unindexed)) is due
    assert FOLD_SHARE == 0.05 and FOLD_MIN_ROWS == 256


def test_a_cli_sync_of_6000_turns_leaves_every_index_covering_the_rows(tmp_path: Path):
    ledger = tmp_path / "agents.db"
    rng = random.Random(7)
    with LedgerWriter(ledger, start_ms=1_763_000_000_000, seed=7) as w:
        for i in range(6000):
            w.turn(f"s{i % 30}", user=f"q{i} {' '.join(rng.sample(WORDS, 3))}", assistant=f"a{i}")
    config = tmp_path / "config.toml"
    config.write_text(f'[ledger]\npath = "{ledger}"\n[index]\ndir = "{tmp_path / "index"}"\nsinks = ["lancedb"]\n')
    for _ in range(2):  # the case: `sync` twice; the second writes nothing
        result = run_cli("--config", str(config), "sync")
        assert result.returncode == 0, result.stderr
    retriever = open_retriever(tmp_path / "index" / "lancedb")
    tbl = retriever.active_table("atlas")
    rows = tbl.count_rows()
    assert rows >= 6000
    stats = _index_coverage(tbl)
    assert {"text_idx", "id_idx", "path_idx", "timestamp_ms_idx", "session_idx", "kind_idx", "source_idx",
            "vector_idx"} <= set(stats)
    for name, (indexed, unindexed) in stats.items():
        assert indexed + unindexed == rows and indexed >= 0.95 * rows, (name, indexed, unindexed)


def test_a_tail_pass_of_a_few_documents_reads_index_metadata_only(tmp_path: Path):
    sink = LanceSink(tmp_path / "db", FakeEmbedder())
    try:
        docs = [mkdoc(f"sessions/s/turns/t{i}.md", f"User: words {i} about things", turn=f"t{i}") for i in range(3000)]
        sink.upsert("atlas", docs)
        sink.after_batch()  # a backfill: folded, and the vector index built (3,000 rows)
        tbl = sink.active_table("atlas")
        assert coverage(tbl).unindexed == 0 and "vector_idx" in {ix.name for ix in tbl.list_indices()}
        version = tbl.version
        sink.upsert("atlas", [mkdoc("sessions/s/turns/new.md", "User: one more", turn="new")])
        sink.after_batch()  # a tail pass: 1 row of 3,001 outside the indexes, no fold (no new version)
        assert tbl.version == version + 1 and coverage(tbl).unindexed == 1
        more = [mkdoc(f"sessions/s/turns/m{i}.md", f"User: more {i}", turn=f"m{i}") for i in range(300)]
        sink.upsert("atlas", more)
        sink.after_batch()  # 301 of 3,301: past 5 %, folded
        assert coverage(tbl) == Coverage(3301, 0)
        assert sink.optimizations == 2
    finally:
        sink.close()
