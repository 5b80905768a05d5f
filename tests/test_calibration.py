"""Calibrated scores (issue 12): the score a caller sees is a fixed, strictly increasing map of
the ranking score into 0..1 — the query's own words and meaning ≥ 0.9, nothing in common ≈ 0 —
so ``min_score`` means the same for every query and never reorders anything.

Properties on the pure functions (Hypothesis), then the real model over a real WAL ledger and
LanceDB for the two ends of the scale."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexer.core import ranking
from indexer.core.calibration import calibrated, evidence
from indexer.core.ranking import SHIPPED, Candidate, Fusion, RankingSettings, context_floor, keyword_score, rank
from indexer.core.results import collapse
from indexer.core.time_hints import TimeHints

NO_DATES = TimeHints()
MODES = ("hybrid", "vector", "keyword")

unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
some_settings = st.builds(
    RankingSettings,
    vector_weight=st.floats(0.0, 1.0), neighbour_weight=st.floats(0.0, 2.0), session_weight=st.floats(0.0, 5.0),
    session_top=st.integers(1, 5), context_gate=st.floats(0.0, 1.0), time_weight=st.floats(0.0, 0.5),
)


@settings(max_examples=300, deadline=None)
@given(a=unit, b=unit, mode=st.sampled_from(MODES), s=some_settings)
def test_calibration_is_monotone_and_bounded(a, b, mode, s):
    ca, cb = calibrated(a, mode, s), calibrated(b, mode, s)
    assert 0.0 <= ca <= 1.0 and 0.0 <= cb <= 1.0
    if a < b:
        assert ca <= cb
        if a > 1e-3 and b - a > 1e-9:  # strictly increasing (beyond float rounding) wherever it does not underflow
            assert ca < cb


@settings(max_examples=150, deadline=None)
@given(data=st.data(), s=some_settings)
def test_calibration_never_reorders_results(data, s):
    n = data.draw(st.integers(1, 25))
    cands, rows = [], {}
    for i in range(n):
        group = data.draw(st.sampled_from(["a", "b", "c"]))
        key = f"sessions/{group}/turns/t{i}.md#0"
        cands.append(Candidate(key=key, group=group, seq=data.draw(st.integers(0, 6)),
                               vector=data.draw(st.none() | unit), keyword=data.draw(st.none() | unit),
                               timestamp_ms=None))
        rows[key] = {"path": key.split("#")[0], "session": group, "turn_id": f"t{i}", "kind": "turn",
                     "source": "sessions", "chunk_index": 0, "text": f"text {i}"}
    for mode in MODES:
        hits = collapse(rank(cands, mode, NO_DATES, s), rows)
        shown = [calibrated(h.score, mode, s) for h in hits]
        assert shown == sorted(shown, reverse=True)  # the ranking order is the order of the shown scores
        assert all(0.0 <= x <= 1.0 for x in shown)


def test_the_anchors_of_the_map():
    # the query's words and meaning: cosine 0.85, every word present (keyword 0.8), alone in its session
    exact = Candidate("x", "s", 0, vector=0.85, keyword=0.8, timestamp_ms=None)
    assert calibrated(rank([exact], "hybrid", NO_DATES)["x"], "hybrid") >= 0.9
    # one rare word in common, nothing else
    one_word = Candidate("w", "s", 0, vector=0.2, keyword=0.5, timestamp_ms=None)
    assert 0.3 <= calibrated(rank([one_word], "hybrid", NO_DATES)["w"], "hybrid") <= 0.5
    # nothing in common: MiniLM's cosine range for unrelated text, no word
    for v in (0.0, 0.1, 0.2):
        nothing = Candidate("n", "s", 0, vector=v, keyword=None, timestamp_ms=None)
        assert calibrated(rank([nothing], "hybrid", NO_DATES)["n"], "hybrid") < 0.01
    assert calibrated(0.95, "vector") >= 0.9 and calibrated(0.15, "vector") < 0.02
    assert calibrated(0.0, "hybrid") == 0.0


def test_evidence_undoes_the_context_division_for_a_turn_alone_in_its_session():
    for s in (SHIPPED, RankingSettings(session_weight=1.5, session_top=3, neighbour_weight=0.3)):
        alone = Candidate("x", "s", 0, vector=0.7, keyword=0.6, timestamp_ms=None)
        fused = ranking.fuse_linear([alone], s)["x"]
        assert evidence(rank([alone], "hybrid", NO_DATES, s)["x"], "hybrid", s) == pytest.approx(fused)
        assert context_floor(s) == pytest.approx(rank([alone], "hybrid", NO_DATES, s)["x"] / fused)


def test_rrf_scores_are_shown_as_they_are():
    rrf = RankingSettings(fusion=Fusion.RRF)
    assert calibrated(0.37, "hybrid", rrf) == 0.37


def test_a_turn_sharing_nothing_is_not_lifted_by_a_matching_session():
    cands = [Candidate("q", "s", 0, vector=0.9, keyword=0.9, timestamp_ms=None),
             Candidate("q2", "s", 3, vector=0.8, keyword=0.8, timestamp_ms=None),
             Candidate("bread", "s", 1, vector=0.05, keyword=None, timestamp_ms=None)]
    scores = rank(cands, "hybrid", NO_DATES)
    assert calibrated(scores["bread"], "hybrid") < 0.01
    ungated = rank(cands, "hybrid", NO_DATES, dataclasses.replace(SHIPPED, context_gate=0.0))
    assert calibrated(ungated["bread"], "hybrid") > 0.5  # what the gate prevents


def test_the_keyword_scale_follows_the_corpus_size():
    # the same evidence, "three unique words' worth of BM25", reads the same in a small and a large corpus
    import math

    small, large = keyword_score(3 * math.log1p(10), corpus_chunks=10), keyword_score(3 * math.log1p(10**6),
                                                                                      corpus_chunks=10**6)
    assert small == pytest.approx(large) == pytest.approx(0.75)


# -- the real model, a real ledger, real LanceDB ------------------------------------------------------------

TEXTS = [
    "We decided the JWT access tokens expire after 15 minutes and refresh tokens after 7 days.",
    "The postgres cluster runs version 16 with PgBouncer in transaction mode.",
    "My cat likes to sleep on the warm laptop keyboard in the afternoon.",
    "Let's plan the team offsite in Lisbon next spring.",
    "The deploy pipeline uses canary releases with a 5 percent traffic split.",
    "I baked sourdough bread with rye flour this weekend.",
]
OTHER = ["Can you summarise the quarterly budget?", "The budget is 40k for the third quarter."]
UNRELATED = ["What is the boiling point of liquid nitrogen?", "How many moons does Jupiter have?",
             "zzzz qqqq", "Explain the rules of cricket"]


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    from conftest import make_config

    from indexer.embedding.factory import make_embedder
    from indexer.search.searcher import Searcher
    from indexer.sync.context import Indexer, build_sinks
    from indexer.sync.engine import sync_once
    from ledger.writer import LedgerWriter

    root = tmp_path_factory.mktemp("calibration")
    ledger = root / "ledger" / "agents.db"
    ledger.parent.mkdir()
    with LedgerWriter(ledger, start_ms=1_763_000_000_000, seed=5) as w:
        for text in TEXTS:
            w.turn("main", user=text)
        for text in OTHER:
            w.turn("other", user=text)
    config = make_config(root, ledger, sinks=("lancedb",))
    embedder = make_embedder(config)
    ix = Indexer(config, sinks=build_sinks(config, embedder=embedder), redact=lambda s: s, redaction_version="t")
    try:
        sync_once(ix)
    finally:
        ix.close()
    searcher = Searcher(config, embedder=embedder)
    yield searcher
    searcher.close()


def ask(searcher, query, **kw):
    from indexer.search.searcher import SearchRequest

    return searcher.search(SearchRequest(query=query, persona="atlas", **kw)).results


@pytest.mark.parametrize("text", [TEXTS[0], TEXTS[2], OTHER[0]])
def test_the_query_s_own_words_score_at_least_0_9(real, text):
    for mode in ("hybrid", "vector"):
        top = ask(real, text, mode=mode)[0]
        assert text in top.snippet and top.score >= 0.9, (mode, top)
    assert ask(real, text, mode="keyword")[0].score >= 0.8


def test_a_paraphrase_with_the_key_words_scores_high_and_above_the_rest(real):
    results = ask(real, "how long do JWT access tokens last", max_results=3)
    assert results[0].snippet.startswith("User: We decided the JWT") and results[0].score >= 0.7
    # the turn after it carries its opening words (its `Previous:` line, doc-v3): second, and lower
    assert results[1].snippet.startswith(f"Previous: {TEXTS[0]}") and results[1].score < results[0].score
    assert all(r.score < 0.1 for r in results[2:])  # the other turns share nothing with it


@pytest.mark.parametrize("query", UNRELATED)
def test_unrelated_queries_score_near_zero(real, query):
    results = ask(real, query, max_results=5)
    assert results and all(r.score < 0.1 for r in results), [(r.score, r.snippet) for r in results]


def test_min_score_0_3_keeps_a_perfect_hit_and_drops_unrelated_text(real):
    kept = ask(real, TEXTS[4], min_score=0.3)
    # the turn itself, then the one after it, whose context line quotes it (doc-v3)
    assert [r.snippet.split("\n")[0] for r in kept] == [f"User: {TEXTS[4]}", f"Previous: {TEXTS[4]}"]
    assert kept[0].score > kept[1].score
    assert ask(real, UNRELATED[0], min_score=0.3) == []
    assert ask(real, TEXTS[4], min_score=0.9)  # the threshold the README names for exact matches

