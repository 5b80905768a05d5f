"""The full-text stage searches a question's content words (issue 36)."""

from __future__ import annotations

from indexer.search.searcher import keyword_query


def test_question_words_are_dropped_and_content_words_kept_in_order():
    assert keyword_query("When did Caroline go to the LGBTQ support group?") == "caroline go lgbtq support group"
    assert keyword_query("What did we decide about JWT expiry?") == "decide about jwt expiry"


def test_a_query_of_nothing_but_stop_words_is_searched_as_it_is():
    assert keyword_query("what did we do") == "what did we do"
    assert keyword_query("PgBouncer") == "pgbouncer"
