"""The writer's optimize (exporters/lancedb/compaction.py): the size-tiered compaction plan, new
rows folded into scalar index segments, and search results unchanged by maintenance, on real LanceDB."""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import numpy as np
from builders import document
from fake_embedder import FakeEmbedder

from exporters.lancedb import LanceSink, compaction, open_retriever, vector_maint
from exporters.lancedb.compaction import MERGE_SEGMENTS, Fragment, plan


def frags(*rows: int) -> list[Fragment]:
    return [Fragment(i, r) for i, r in enumerate(rows)]


def test_plan_merges_the_newest_run_and_leaves_the_big_fragments():
    p = plan(frags(100_000, 1000, 1000, 1000, 1000))
    assert p.run == (1, 2, 3, 4) and p.excluded == (0,) and p.rows == 4000
    # a run shorter than MIN_FRAGMENTS waits; a bigger older fragment ends the run
    assert not plan(frags(100_000, 2000, 1000)).due
    p = plan(frags(100_000, 8000, 4000, 2000, 1000, 1000))
    assert p.run == (1, 2, 3, 4, 5) and p.excluded == (0,)
    # the big fragment joins once the newer ones add up to it
    assert plan(frags(4000, 1000, 1000, 1000, 1000)).run == (0, 1, 2, 3, 4)


def test_plan_rewrites_a_fragment_with_deleted_rows_alone():
    """Any deleted row: a deleted or re-masked document's old text must leave the store."""
    p = plan([Fragment(0, 100_000, deleted=1), Fragment(1, 1000)])
    assert p.purged == (0,) and p.run == () and p.excluded == (1,) and p.due
    assert not plan([Fragment(0, 100_000), Fragment(1, 1000)]).due
    # also when it would have joined a run too short to compact
    assert plan([Fragment(0, 3, deleted=2), Fragment(1, 3)]).purged == (0,)


def test_plan_rewrites_a_row_a_logarithmic_number_of_times():
    """500 batches of 1,000 rows onto a 100k table: rows rewritten per batch and fragments kept,
    against Lance's default (every fragment under 1M rows merged: the table at each batch)."""
    table, rewritten, most = frags(100_000), 0, 0
    for k in range(500):
        table = [*table, Fragment(1000 + k, 1000)]
        p = plan(table)
        if p.due:
            merged = [f for f in table if f.id in p.run]
            table = [f for f in table if f.id not in p.run] + [Fragment(10_000 + k, sum(f.rows for f in merged))]
            rewritten += p.rows
        most = max(most, len(table))
    assert rewritten / 500 < 10_000  # Lance's default: 100k-600k rows a batch
    assert most <= 16


WORDS = ("harbor lantern meadow copper violet summit quarry ember falcon orchard glacier ribbon "
         "thunder pebble saffron canyon marble willow cobalt juniper").split()


def body(i: int, rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(4, 14))]
    return f"User: note tok{i} " + " ".join(words)  # tok{i}: no two documents alike (no tied scores)


def write_round(sink: LanceSink, r: int, start: int, n: int, *, edits: bool = True) -> None:
    rng = random.Random(r)
    docs = [document(body(i, rng), path=f"d{i}.md", persona="atlas", session=f"s{i % 3}", turn=f"t{i}")
            for i in range(start, start + n)]
    if edits:  # an edit of an older document (a deletion in an old fragment)
        docs.append(document(body(r * 7, rng) + " edited", path=f"d{r * 7}.md", persona="atlas", session="s0",
                             turn="t"))
    sink.upsert("atlas", docs)
    if edits and r % 3 == 0:
        sink.delete("atlas", [f"d{r * 5 + 1}.md"])


def answers(sink: LanceSink) -> dict[str, list]:
    """Every full-text match and every row by distance, for a few queries (no cut at a limit, and a
    canonical order: the fake embedder and BM25 give tied scores, whose order is Lance's choice)."""
    reader = open_retriever(sink.db_dir)
    try:
        tbl = reader.active_table("atlas")
        out: dict[str, list] = {"fts": [], "vector": []}
        for q in WORDS[:6]:
            hits, _ = reader.matching(tbl, q, "persona = 'atlas'", 10_000, ["id"])
            out["fts"].append({h["id"]: float(h["_score"]) for h in hits})
            vec = np.asarray(sink.embedder.embed_query(q), dtype=np.float32)
            near = reader.nearest(tbl, vec, "session != 's1'", 10_000, ["id"])
            out["vector"].append(sorted((round(h["_distance"], 5), h["id"]) for h in near))
        return out
    finally:
        reader.close()


#: BM25 statistics (documents, lengths) are the index's as Lance last wrote it: a merge and a
#: compaction that drops deleted rows (a remap) leave them slightly different: the two paths'
#: scores agree within this, and ranks do beyond it.
SCORE_TOLERANCE = 0.03


def same_matches(a: dict[str, float], b: dict[str, float], where: str, scores: bool) -> None:
    """The same documents match; with ``scores``, scores within SCORE_TOLERANCE, and any two
    documents whose scores differ by more than twice that are ranked alike in both."""
    assert set(a) == set(b), (where, sorted(set(a) ^ set(b)))
    if not scores:
        return
    for k in a:
        assert abs(a[k] - b[k]) <= SCORE_TOLERANCE * max(a[k], b[k]), (k, a[k], b[k])
    ranked = sorted(a, key=a.get)
    for lo, hi in zip(ranked, ranked[1:]):
        if a[hi] - a[lo] > 2 * SCORE_TOLERANCE * a[hi]:
            assert b[hi] > b[lo], (where, lo, hi, a[lo], a[hi], b[lo], b[hi])


def same_answers(a: dict[str, list], b: dict[str, list], where: str, *, scores: bool = True) -> None:
    assert a["vector"] == b["vector"], f"{where}: nearest rows differ"
    for x, y in zip(a["fts"], b["fts"], strict=True):
        same_matches(x, y, where, scores)


def run(tmp_path: Path, name: str, check=None) -> list[dict]:
    """The same writes and maintenance rounds; the answers after each round."""
    sink = LanceSink(tmp_path / name, FakeEmbedder(), vector_index_rows=200, retire_grace=timedelta(0))
    try:
        for s in range(0, 300, 100):
            sink.upsert("atlas", [document(body(i, random.Random(i)), path=f"d{i}.md", persona="atlas",
                                           session=f"s{i % 3}", turn=f"t{i}") for i in range(s, s + 100)])
        assert sink.maintain(force=True)["vector_index"]
        start, rounds = 300, []
        for r in range(1, MERGE_SEGMENTS + 3):
            write_round(sink, r, start, 25)
            start += 25
            before = answers(sink)  # the new rows searched flat beside the indexes
            sink.maintain()
            if check:
                check(sink, r, before)
            rounds.append(answers(sink))
        return rounds
    finally:
        sink.close()


def test_maintenance_leaves_answers_identical_and_folds_new_rows_as_segments(tmp_path: Path, monkeypatch):
    with monkeypatch.context() as m:  # the same writes maintained by lancedb's optimize (the old path)
        m.setattr(compaction, "have_pylance", lambda: False)
        old = run(tmp_path, "old")
    seen: dict[str, list[int]] = {}

    def check(sink: LanceSink, r: int, before: list) -> None:
        tbl = sink.active_table("atlas")
        for ix in tbl.list_indices():
            assert int(ix.num_unindexed_rows or 0) == 0, (r, ix.name)  # every new row folded in
            seen.setdefault(ix.name, []).append(int(ix.num_segments))
        # BM25 of rows outside the index is the flat search's own (Lance's, on either path): the
        # matches, not their scores, before and after the fold
        same_answers(before, answers(sink), f"round {r}, before and after maintenance", scores=False)

    new = run(tmp_path, "new", check)
    for r, (a, b) in enumerate(zip(old, new, strict=True), 1):
        same_answers(a, b, f"round {r}, lancedb's optimize against the steps")
    assert set(seen["text_idx"]) == {1}  # merged at every fold, as lancedb's optimize does
    for scalar in ("session_idx", "path_idx"):  # segments, then one merge
        got = seen[scalar]
        assert max(got) <= MERGE_SEGMENTS and got[0] == 2 and 1 in got[1:], (scalar, got)


def test_after_a_retrain_compaction_merges_the_small_fragments_and_keeps_the_big_one(tmp_path: Path):
    sink = LanceSink(tmp_path / "db", FakeEmbedder(), vector_index_rows=200)
    try:
        sink.upsert("atlas", [document(body(i, random.Random(i)), path=f"d{i}.md", persona="atlas")
                              for i in range(2000)])
        sink.maintain(force=True)
        for r in range(MERGE_SEGMENTS):  # the last fold merges the scalar and full-text segments
            write_round(sink, r + 1, 2000 + 20 * r, 20, edits=False)  # no deleted row in the big fragment
            sink.maintain()
        assert {int(ix.num_segments) for ix in sink.active_table("atlas").list_indices()
                if ix.name != "vector_idx"} == {1}
        tbl = sink.active_table("atlas")
        sizes = {f.fragment_id: f.count_rows() for f in tbl.to_lance().get_fragments()}
        big = max(sizes, key=sizes.get)
        vector_maint.build(tbl, "atlas", "test: one segment")  # a re-train: fragments no longer split by segment
        write_round(sink, 9, 3000, 20, edits=False)
        before = answers(sink)
        sink.maintain()
        after = [f.fragment_id for f in sink.active_table("atlas").to_lance().get_fragments()]
        assert big in after, "the big fragment was rewritten"
        assert len(after) < len(sizes), (sizes, after)  # the small ones merged
        same_answers(before, answers(sink), "a compaction after a re-train", scores=False)
    finally:
        sink.close()
