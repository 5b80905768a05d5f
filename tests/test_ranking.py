"""memory_search ranking (pure): fusion, conversational context, dates."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexer.core.ranking import (
    SHIPPED,
    Candidate,
    Fusion,
    RankingSettings,
    keyword_score,
    rank,
    with_context,
    with_time,
)
from indexer.core.time_hints import DAY_MS, TimeHints, Window

NO_DATES = TimeHints()


def cand(key, group="s", seq=None, vector=None, keyword=None, ts=None):
    return Candidate(key=key, group=group, seq=seq, vector=vector, keyword=keyword, timestamp_ms=ts)


def order(scores):
    return sorted(scores, key=lambda k: -scores[k])


def test_keyword_score_saturates_at_the_idf_of_a_unique_word():
    import math

    assert keyword_score(0, corpus_chunks=100) == 0.0 and keyword_score(-3, corpus_chunks=100) == 0.0
    for n in (1, 10, 5882, 1_000_000):  # half way at ln(1 + N), whatever the corpus size
        assert keyword_score(math.log1p(n), corpus_chunks=n) == pytest.approx(0.5)
    assert keyword_score(2.0, RankingSettings(bm25_k=2.0), corpus_chunks=10**6) == pytest.approx(0.5)  # a fixed K


def test_settings_are_immutable():
    import dataclasses

    with pytest.raises(dataclasses.FrozenInstanceError):
        SHIPPED.vector_weight = 0.9


def test_single_signal_modes_are_the_raw_scores():
    cs = [cand("a", vector=0.9, keyword=0.1), cand("b", vector=0.2, keyword=0.7)]
    assert rank(cs, "vector", NO_DATES) == {"a": 0.9, "b": 0.2}
    assert rank(cs, "keyword", NO_DATES) == {"a": 0.1, "b": 0.7}


def test_the_turn_after_a_matching_question_gains_from_its_neighbour():
    # same own score; "answer" follows a strongly matching turn, "other" sits alone further on
    cs = [cand("question", seq=0, keyword=0.9, vector=0.6), cand("answer", seq=1, keyword=0.3, vector=0.3),
          cand("other", seq=9, keyword=0.3, vector=0.3)]
    scores = rank(cs, "hybrid", NO_DATES)
    assert scores["answer"] > scores["other"]
    assert order(scores)[0] == "question"


def test_the_session_that_talks_about_it_most_wins_a_tie_when_it_counts_more_than_its_best_turn():
    cs = [cand("a1", group="A", seq=1, keyword=0.5, vector=0.4), cand("a2", group="A", seq=5, keyword=0.4),
          cand("a3", group="A", seq=9, keyword=0.4),
          cand("b1", group="B", seq=1, keyword=0.5, vector=0.4)]
    scores = rank(cs, "hybrid", NO_DATES, RankingSettings(session_top=2))
    assert scores["a1"] > scores["b1"]
    # shipped (SESSION_TOP 1, the leave-one-conversation-out choice): a session counts by its best turn
    shipped = rank(cs, "hybrid", NO_DATES)
    assert shipped["a1"] == pytest.approx(shipped["b1"])


def test_chunks_of_one_turn_count_once_in_their_session():
    # a long turn split in three chunks must not look like three matching turns
    split = [cand(f"long#{i}", group="A", seq=4, keyword=0.5) for i in range(3)]
    single = [cand("short", group="B", seq=4, keyword=0.5)]
    scores = with_context({c.key: 0.5 for c in split + single}, split + single)
    assert scores["long#0"] == pytest.approx(scores["short"])


def test_memory_chunks_without_position_are_their_own_units():
    cs = [cand("m#0", group="memory/MEMORY.md", seq=None, keyword=0.6),
          cand("m#1", group="memory/MEMORY.md", seq=None, keyword=0.2)]
    scores = rank(cs, "hybrid", NO_DATES)
    assert scores["m#0"] > scores["m#1"] and all(0 <= v <= 1 for v in scores.values())


def test_dates_in_the_query_favour_documents_from_then():
    window = TimeHints((Window(10 * DAY_MS, 11 * DAY_MS),))
    cs = [cand("then", group="A", keyword=0.5, ts=10 * DAY_MS + 5), cand("later", group="B", keyword=0.55,
                                                                            ts=40 * DAY_MS)]
    assert order(rank(cs, "keyword", NO_DATES))[0] == "later"
    assert order(rank(cs, "keyword", window))[0] == "then"
    assert order(rank(cs, "hybrid", window))[0] == "then"
    # a query without dates, or whose dates match nothing found, leaves scores as they are
    base = {"x": 0.3}
    assert with_time(base, [cand("x", ts=1)], NO_DATES) is base
    assert with_time(base, [cand("x", ts=400 * DAY_MS)], window) is base


def test_rrf_fusion_ignores_context():
    cs = [cand("a", vector=0.9, keyword=0.9), cand("b", vector=0.1)]
    scores = rank(cs, "hybrid", NO_DATES, RankingSettings(fusion=Fusion.RRF))
    assert scores["a"] == pytest.approx(1.0) and scores["b"] < scores["a"]


unit = st.floats(min_value=0.0, max_value=1.0)
maybe_unit = st.one_of(st.none(), unit)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("ABC"), st.one_of(st.none(), st.integers(0, 6)), maybe_unit, maybe_unit,
                          st.one_of(st.none(), st.integers(0, 40 * DAY_MS))), min_size=1, max_size=25),
       st.sampled_from(["hybrid", "vector", "keyword"]), st.booleans())
def test_scores_stay_in_0_1(rows, mode, dated):
    cs = [cand(f"k{i}", group=g, seq=s, vector=v, keyword=k, ts=t) for i, (g, s, v, k, t) in enumerate(rows)]
    hints = TimeHints((Window(5 * DAY_MS, 6 * DAY_MS),)) if dated else NO_DATES
    scores = rank(cs, mode, hints)
    assert set(scores) == {c.key for c in cs}
    assert all(0.0 <= v <= 1.0 + 1e-9 for v in scores.values())
