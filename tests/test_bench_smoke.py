"""Smoke tests for the benchmarks (bench/): the LoCoMo mapping and the recall metric.

Fast: a hand-made LoCoMo-shaped sample goes through the real ledger writer,
``sync_once`` and ``Searcher`` with the fake embedder, and the recall of a
few questions is checked against values worked out by hand, so the metric
code cannot silently break. The real data file (../shared, CC BY-NC) is only
read, when present.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import locomo as L
from bench.common import LOCOMO_PATH, md_table, percentile
from bench.run_all import BENCHES, ORDER

MINI = {
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a zebrafish named Pip."},
            {"speaker": "Bob", "dia_id": "D1:2", "text": "Nice! I am learning the cello these days."},
            {"speaker": "Ann", "dia_id": "D1:3", "text": "My sister lives in Lisbon now.",
             "img_url": ["https://example.invalid/x.jpg"], "blip_caption": "a photo of a yellow tram",
             "query": "lisbon tram"},
        ],
        "session_2_date_time": "10:00 am on 9 June, 2023",
        "session_2": [
            {"speaker": "Bob", "dia_id": "D2:1", "text": "The recital went well, finally."},
            {"speaker": "Ann", "dia_id": "D2:2", "text": "Pip the zebrafish is growing fast."},
        ],
        # like the real data: a date key without a session
        "session_3_date_time": "10:00 am on 1 July, 2023",
    },
    "qa": [
        {"question": "Where does Ann's sister live, Lisbon?", "evidence": ["D1:3"], "category": 4},
        {"question": "Which photo showed a tram?", "evidence": ["D1:3"], "category": 1},
        # "D9:99" matches no turn: dropped; "D1:1; D2:2" is one malformed string holding two ids
        {"question": "zebrafish", "evidence": ["D1:1; D2:2", "D9:99"], "category": 2},
        # gold D2:1 (recital) is found, D1:3 (no query word) is not: recall 0.5
        {"question": "recital", "evidence": ["D2:1", "D1:3"], "category": 3},
        {"question": "adversarial, excluded", "evidence": ["D1:1"], "category": 5, "adversarial_answer": "x"},
        {"question": "only a malformed id", "evidence": ["D:11:26"], "category": 2},
    ],
}


# -- the metric, by hand --------------------------------------------------------------------------


def test_recall_at_hand_made_cases():
    retrieved = ["D1:1", "D1:2", "D1:3", "D2:1"]
    assert L.recall_at(retrieved, ["D1:2", "D9:9"], 1) == 0.0
    assert L.recall_at(retrieved, ["D1:2", "D9:9"], 2) == 0.5
    assert L.recall_at(retrieved, ["D1:2", "D2:1"], 3) == 0.5
    assert L.recall_at(retrieved, ["D1:2", "D2:1"], 4) == 1.0
    assert L.recall_at(retrieved, ["D1:2", "D2:1"], 25) == 1.0  # k past the list
    assert L.recall_at(retrieved, ["D1:1", "D1:1"], 1) == 1.0  # duplicate gold ids count once
    assert L.recall_at([], ["D1:1"], 5) == 0.0
    with pytest.raises(ValueError):
        L.recall_at(retrieved, [], 5)
    assert L.recalls(retrieved, ["D1:3"]) == {5: 1.0, 10: 1.0, 25: 1.0}


def test_aggregate_means_per_category_and_overall():
    rows = [(1, {5: 1.0, 10: 1.0, 25: 1.0}), (1, {5: 0.0, 10: 0.5, 25: 1.0}), (4, {5: 0.5, 10: 0.5, 25: 0.5})]
    agg = L.aggregate(rows)
    assert agg["overall"]["n"] == 3
    assert agg["overall"][5] == pytest.approx(50.0)
    assert agg["overall"][10] == pytest.approx(100 * 2 / 3)
    assert agg[1][10] == pytest.approx(75.0) and agg[1]["n"] == 2
    assert agg[4][25] == pytest.approx(50.0)
    assert agg[2]["n"] == 0 and agg[2][5] != agg[2][5]  # NaN for an empty category


def test_evidence_parsing_and_turn_ids():
    valid = {"D1:1", "D2:2", "D8:6", "D9:17", "D30:5"}
    assert L.gold_ids(["D8:6; D9:17"], valid) == ("D8:6", "D9:17")
    assert L.gold_ids(["D:11:26", "D30:05", "D1:1", "D1:1"], valid) == ("D1:1",)
    assert L.gold_ids([], valid) == ()
    assert L.turn_id_for("conv-26", "D12:3") == "conv-26-D12-3"
    assert L.dia_of("conv-26-D12-3") == ("conv-26", "D12:3")
    assert L.dia_of("01HXYZ") is None and L.dia_of(None) is None
    assert L.parse_session_date("1:56 pm on 8 May, 2023") == 1683554160000
    lines = L.lines_of(MINI)
    assert [ln.dia_id for ln in lines] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
    assert lines[1].ts_ms - lines[0].ts_ms == L.LINE_STEP_MS
    assert L.turn_text(lines[2]) == "Ann: My sister lives in Lisbon now. [shares a photo: a photo of a yellow tram]"
    qs, dropped = L.questions_of(MINI, {ln.dia_id for ln in lines})
    assert [q.gold for q in qs] == [("D1:3",), ("D1:3",), ("D1:1", "D2:2"), ("D2:1", "D1:3")]
    assert dropped == 1  # "only a malformed id"; category 5 is not counted


def test_limit_questions_spreads_over_samples():
    a = [L.Question("a", i, "q", 1, ("D1:1",)) for i in range(5)]
    b = [L.Question("b", i, "q", 1, ("D1:1",)) for i in range(5)]
    picked = L.limit_questions([a, b], 4)
    assert [(q.sample_id, q.number) for q in picked] == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    assert len(L.limit_questions([a, b], None)) == 10


def test_qmd_result_parsing():
    hits = [{"file": "qmd://s/turns/conv-x-D1-3.md"}, {"file": "qmd://s/turns/conv-y-D1-1.md"},
            {"file": "qmd://s/turns/conv-x-D2-1.md?index=big"}, {"file": "qmd://s/turns/conv-x-D1-3.md"}]
    assert L._qmd_dias(hits, "conv-x") == ["D1:3", "D2:1"]


def test_helpers():
    assert percentile([1, 2, 3, 4], 50) == 2.5 and percentile([5], 95) == 5.0
    assert md_table(["a", "b"], [[1, 2]]).splitlines()[1] == "| :--- | ---: |"
    assert [b.name for b in BENCHES] == ["redaction", "locomo", "latency", "ann", "daemon", "kill_campaign",
                                         "cli_latency", "mcp_latency", "noop_pass", "recurring_cost", "objectstore",
                                         "embed_memory", "fold_cost"]
    assert {b.name for b in BENCHES} - {"embed_memory"} <= set(ORDER)  # every benchmark has its place in RESULTS.md


# -- end to end with the fake embedder ----------------------------------------------------------------


def test_locomo_pipeline_end_to_end_with_fake_embedder(tmp_path: Path):
    from fake_embedder import FakeEmbedder

    from indexer.runtime.config import load_config
    from indexer.search.searcher import Searcher
    from indexer.sync.context import Indexer, build_sinks
    from indexer.sync.engine import sync_once

    db = tmp_path / "ledger.db"
    assert L.write_ledger([MINI], db) == 5
    config = load_config(None, env={}, overrides={"ledger": {"path": str(db), "personas": [L.PERSONA]},
                                                  "index": {"dir": str(tmp_path / "index"), "sinks": ["lancedb"]}})
    embedder = FakeEmbedder()
    ix = Indexer(config, sinks=build_sinks(config, embedder=embedder), redact=lambda s: s, redaction_version="test")
    try:
        summary = sync_once(ix)
        L.add_projects(ix.state, [MINI])
    finally:
        ix.close()
    assert summary.documents_written == 5

    qs, _ = L.questions_of(MINI, {ln.dia_id for ln in L.lines_of(MINI)})
    searcher = Searcher(config, embedder=embedder)
    try:
        run = L.run_searcher(searcher, qs, "keyword", "keyword")
        hybrid = L.run_searcher(searcher, qs, "hybrid", "hybrid")
    finally:
        searcher.close()
    assert run.foreign == 0 and hybrid.foreign == 0
    # every result maps back to a dia_id of this sample
    assert all(d in {"D1:1", "D1:2", "D1:3", "D2:1", "D2:2"} for ds in run.per_question for d in ds)
    assert run.per_question[0][0] == "D1:3"  # sister / Lisbon
    assert run.per_question[1][0] == "D1:3"  # the image caption is indexed
    # both zebrafish lines, and D1:2, whose context line (doc-v3) quotes D1:1
    assert run.per_question[2][0] == "D1:1" and set(run.per_question[2]) == {"D1:1", "D1:2", "D2:2"}
    assert run.per_question[3] == ["D2:1", "D2:2"]  # the recital line, then the turn that quotes it
    per_q = [L.recalls(d, q.gold)[5] for q, d in zip(qs, run.per_question)]
    assert per_q == [1.0, 1.0, 1.0, 0.5]
    agg = L.aggregate([(q.category, L.recalls(d, q.gold)) for q, d in zip(qs, run.per_question)])
    assert agg["overall"][5] == pytest.approx(87.5)
    assert agg[3][5] == pytest.approx(50.0) and agg[4][5] == pytest.approx(100.0)
    # hybrid retrieves at least what keyword found (all 5 turns are within k=25)
    assert all(set(k) <= set(h) for k, h in zip(run.per_question, hybrid.per_question))


@pytest.mark.skipif(not LOCOMO_PATH.exists(), reason="LoCoMo data not present at ../shared/benchmarks")
def test_real_locomo_mapping_is_recoverable():
    data = json.loads(LOCOMO_PATH.read_text(encoding="utf-8"))
    ids = set()
    n_lines = n_questions = dropped = 0
    for sample in data:
        lines = L.lines_of(sample)
        n_lines += len(lines)
        for ln in lines:
            tid = L.turn_id_for(ln.sample_id, ln.dia_id)
            assert L.dia_of(tid) == (ln.sample_id, ln.dia_id)
            ids.add(tid)
        qs, d = L.questions_of(sample, {ln.dia_id for ln in lines})
        n_questions += len(qs)
        dropped += d
    assert len(ids) == n_lines == 5882  # turn ids unique across samples
    assert n_questions + dropped == 1540 and n_questions == 1535


def test_leave_one_conversation_out_chooses_on_the_others_and_measures_on_the_held_out_one():
    # 3 conversations (a: 2 questions, b: 1, c: 1); per-question R@10 of three grid points
    conv = ["a", "a", "b", "c"]
    points = [{"values": {"SESSION_WEIGHT": 0.6}, "per_q": [1.0, 1.0, 0.0, 0.0]},
              {"values": {"SESSION_WEIGHT": 1.0}, "per_q": [0.5, 0.5, 1.0, 1.0]},
              {"values": {"SESSION_WEIGHT": 1.5}, "per_q": [0.0, 0.0, 1.0, 0.5]}]
    for p in points:
        p["r10"] = 100 * sum(p["per_q"]) / 4
    cv = L.leave_one_out(points, conv)
    folds = {f["held_out"]: f for f in cv["folds"]}
    # without a: b+c → 1.0 is best (100) → measured on a: 50
    assert folds["a"]["values"] == {"SESSION_WEIGHT": 1.0} and folds["a"]["test_r10"] == 50.0
    assert folds["a"]["train_r10"] == 100.0 and folds["a"]["n"] == 2
    # without b: a+c → 0.6 gives (1+1+0)/3, 1.0 gives (0.5+0.5+1)/3: a tie, the first in grid order wins → 0 on b
    assert folds["b"]["values"] == {"SESSION_WEIGHT": 0.6} and folds["b"]["test_r10"] == 0.0
    # without c: a+b → 0.6: 2/3, 1.0: 2/3, 1.5: 1/3 → the first, 0.6 → 0 on c
    assert folds["c"]["values"] == {"SESSION_WEIGHT": 0.6} and folds["c"]["test_r10"] == 0.0
    # pooled by question: a's two questions at 50, b and c at 0
    assert cv["loco_r10"] == pytest.approx((50.0 * 2 + 0.0 + 0.0) / 4)
    # in-sample: the best point on everything (1.0: 75) is above what cross-validation measures
    assert cv["in_sample"] == {"SESSION_WEIGHT": 1.0} and cv["in_sample_r10"] == 75.0
    assert cv["majority"] == {"SESSION_WEIGHT": 0.6} and cv["majority_folds"] == 2


def test_leave_one_out_never_sees_the_held_out_conversation():
    # a point that is perfect only on the held-out conversation is never chosen for it
    conv = ["a", "b", "c"]
    points = [{"values": {"X": 1}, "per_q": [0.5, 0.5, 0.5]}, {"values": {"X": 2}, "per_q": [1.0, 0.0, 0.0]},
              {"values": {"X": 3}, "per_q": [0.0, 1.0, 0.0]}, {"values": {"X": 4}, "per_q": [0.0, 0.0, 1.0]}]
    for p in points:
        p["r10"] = 100 * sum(p["per_q"]) / 3
    cv = L.leave_one_out(points, conv)
    for f in cv["folds"]:
        chosen = f["values"]["X"]
        assert chosen != {"a": 2, "b": 3, "c": 4}[f["held_out"]]
    assert cv["loco_r10"] <= max(p["r10"] for p in points)


def test_ranking_replayed_from_retrieved_candidates():
    from indexer.core.ranking import SHIPPED, Candidate
    from indexer.core.time_hints import TimeHints
    from indexer.search.searcher import Retrieved

    found = Retrieved(hints=TimeHints(), terms=[])
    for i, (session, turn, kw) in enumerate([("locomo-conv-1-s1", "conv-1-D1-1", 0.9),
                                             ("locomo-conv-1-s1", "conv-1-D1-2", 0.2),
                                             ("locomo-conv-2-s1", "conv-2-D1-1", 0.99)]):
        key = f"sessions/{session}/turns/{turn}.md#0"
        found.cands.append(Candidate(key, session, i, vector=kw, keyword=kw, timestamp_ms=None))
        found.rows[key] = {"path": key[:-2], "session": session, "turn_id": turn, "kind": "turn",
                           "source": "sessions", "chunk_index": 0, "text": turn}
    ranked = L.rank_found(found, SHIPPED)
    assert [r.turn_id for r in ranked] == ["conv-2-D1-1", "conv-1-D1-1", "conv-1-D1-2"]
    assert all(0.0 <= r.score <= 1.0 for r in ranked) and ranked[0].score > ranked[-1].score
    q = L.Question("conv-1", 0, "q", 4, ("D1:2",))
    assert L.dias_in(ranked, q) == ["D1:1", "D1:2"]  # the other conversation's turn is not counted


def test_verdict_names_the_target():
    aggs = {name: {"overall": {5: 40.0, 10: r10, 25: 60.0}} for name, r10 in
            (("hybrid", 68.0), ("keyword", 60.8))}
    assert "**not met**" in L.verdict(aggs, None)
    aggs["hybrid"]["overall"][10] = 70.2
    text = L.verdict(aggs, {"loco_r10": 70.5}, L.standard_error([0.0, 1.0] * 50))
    assert "met" in text and "not met" not in text and "70.5 leave-one-conversation-out" in text
    assert "in-sample" in text and "70.2" in text and "± 5.0 standard error" in text
    # the target is judged on the cross-validated figure, not on the in-sample one
    assert "**not met**" in L.verdict(aggs, {"loco_r10": 69.5})


def test_conversation_membership_of_labels():
    assert L.in_conversation(L.session_label("conv-2", 3), "conv-2")
    assert not L.in_conversation(L.session_label("conv-26", 3), "conv-2")
    assert not L.in_conversation(None, "conv-2")


def test_summary_rows_read_the_result_files_and_flag_misses():
    import bench.summary as S

    def text(name: str, data: dict) -> str:
        return "\n".join("| " + " | ".join(row) + " |" for row in S.rows_for(name, data))

    red = text("redaction", {"secrets": 168, "missed": 3, "recall": 165 / 168, "chat": 117, "chat_changed": 0,
                             "sync_share": 0.001, "mb_s_per_message": 14.0})
    assert "165/168 = 98.2 % | ≥ 99 % | **no** |" in red and "| 0/117 | 0 | yes |" in red
    assert "| 14 MB/s | ≥ 10 MB/s | yes |" in red
    kills = text("kill_campaign", {"n_kills": 20, "lost": 0, "duplicated_chunks": 0, "stale": 0, "expected": 1700})
    assert "0 lost, 0 duplicated, 0 stale of 1700 documents | ≥ 20 kills, 0 lost, 0 duplicated | yes |" in kills
    loco = text("locomo", {"aggs": {"hybrid": {"overall": {"5": 50.0, "10": 69.9, "25": 77.0}},
                                    "keyword": {"overall": {"5": 50.0, "10": 60.0, "25": 70.0}}},
                           "n_questions": 1535, "limited": "", "grid": {"loco_r10": 69.0}})
    assert "69.0 leave-one-conversation-out; in-sample 69.9" in loco and "| ≥ 70 | **no** |" in loco
    assert "latency | result file not understood" in text("latency", {"sync": {"old": "shape"}})
    assert S.rows_for("fold_cost", {}) is None  # no builder: the record keeps the rows it had

    def split(hits, lines):
        return {"heldout": {"hits": hits, "lines": lines, "recall": hits / lines}}

    evaluation = {"version": "9.9.9", "chat": split(96, 100), "catalog": split(99, 100), "gitleaks": split(50, 50),
                  "clean_dev": {"heldout": {"changed": 0, "lines": 160}},
                  "targets": {"chat": 0.97, "catalog": 0.97, "gitleaks": 0.98, "clean_dev_rate": 1 / 300}}
    assert text("redaction_eval", evaluation).endswith(
        "| 96.0 % / 99.0 % / 100.0 % / 0 of 160 | ≥ 97 / ≥ 97 / ≥ 98 % / ≤ 1 in 300 | chat: **no**; catalog: yes; "
        "gitleaks: yes; prose: yes |")
    evaluation["chat"] = split(97, 100)
    assert text("redaction_eval", evaluation).endswith("| yes |")
    ab = {"this": "new", "baseline": "old", "sets": {name: {"slowdown": x} for name, x in
                                                     (("chat", 1.4), ("prose", 1.6), ("secrets", 3.0))}}
    assert text("redaction_ab", ab) == ("| redaction throughput new / old, side by side | 1.40× slower on ordinary "
                                        "chat, 1.60× on real prose, 3.00× on secret-dense chat | ≤ 1.5× | **no** |")


def test_the_locomo_grid_passes_settings_instead_of_patching_globals(monkeypatch):
    from indexer.core import ranking

    class FakeSearcher:
        pass

    seen = []
    monkeypatch.setattr(L, "run_searcher", lambda s, qs, mode, name: seen.append((mode, s.ranking)) or "run")
    searcher = FakeSearcher()
    searcher.ranking = ranking.SHIPPED
    assert L.run_with(searcher, [], "grid", {"SESSION_WEIGHT": 0.0, "BM25_K": 4.0}) == "run"
    mode, used = seen[0]
    assert mode == "hybrid" and (used.session_weight, used.bm25_k) == (0.0, 4.0)
    assert searcher.ranking is ranking.SHIPPED and ranking.SHIPPED.session_weight == 1.0  # nothing leaked
    assert L.shipped_knobs()["SESSION_WEIGHT"] == ranking.SHIPPED.session_weight
