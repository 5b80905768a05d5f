"""Dates named in a query → time windows (pure)."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexer.core.time_hints import DAY_MS, TimeHints, Window, parse

NOW = dt.datetime(2026, 11, 21, 15, 30, tzinfo=dt.UTC)  # a Saturday


def days(hints: TimeHints) -> list[tuple[str, str]]:
    def f(ms: int) -> str:
        return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d")

    return [(f(w.start_ms), f(w.end_ms)) for w in hints.windows]


@pytest.mark.parametrize("query, expected", [
    ("What painting did Melanie show on October 13, 2023?", [("2023-10-13", "2023-10-14")]),
    ("What did Gina find for her store on 1 February, 2023?", [("2023-02-01", "2023-02-02")]),
    ("the 2nd of March 2024 meeting", [("2024-03-02", "2024-03-03")]),
    ("deploy log 2025-01-31", [("2025-01-31", "2025-02-01")]),
    ("What setback did Melanie face in October 2023?", [("2023-10-01", "2023-11-01")]),
    ("budget for Dec 2024", [("2024-12-01", "2025-01-01")]),
    ("releases in 2023", [("2023-01-01", "2024-01-01")]),
    ("Feb 30, 2023 is not a day", [("2023-02-01", "2023-03-01")]),  # falls back to the month
])
def test_absolute_dates(query, expected):
    assert days(parse(query, NOW)) == expected


@pytest.mark.parametrize("query, expected", [
    ("what did we decide about JWT expiry last week?", [("2026-11-09", "2026-11-16")]),
    ("notes from this week", [("2026-11-16", "2026-11-22")]),
    ("what broke yesterday", [("2026-11-20", "2026-11-21")]),
    ("today's plan", [("2026-11-21", "2026-11-22")]),
    ("errors in the past 2 weeks", [("2026-11-07", "2026-11-22")]),
    ("the outage three days ago", [("2026-11-15", "2026-11-22")]),
    ("last month's invoices", [("2026-10-01", "2026-11-01")]),
    ("this month", [("2026-11-01", "2026-11-22")]),
    ("what we shipped last year", [("2025-01-01", "2026-01-01")]),
])
def test_relative_dates_are_read_against_now(query, expected):
    assert days(parse(query, NOW)) == expected


def test_a_month_without_a_year_means_that_month_of_any_recent_year():
    hints = parse("When did Melanie go camping in June?", NOW)
    assert ("2023-06-01", "2023-07-01") in days(hints) and ("2026-06-01", "2026-07-01") in days(hints)
    assert all(a[5:7] == "06" for a, _ in days(hints))


@pytest.mark.parametrize("query", [
    "what did we decide about JWT expiry",
    "you may want to march on",  # lower-case "may"/"march" are words, not months
    "May I ask how the deploy went?",  # a query opening with "May"
    "port 8080 and 443",  # numbers that are not years
    "",
])
def test_queries_without_dates_give_no_hints(query):
    assert not parse(query, NOW)


def test_match_is_one_inside_and_falls_off_over_the_margin():
    w = Window(0, DAY_MS)
    hints = TimeHints((w,))
    assert hints.match(DAY_MS // 2) == 1.0
    assert hints.match(DAY_MS + int(3.5 * DAY_MS) - 1, margin_days=7) == pytest.approx(0.5, abs=1e-6)
    assert hints.match(-7 * DAY_MS, margin_days=7) == 0.0
    assert hints.match(None) == 0.0 and TimeHints().match(5) == 0.0
    assert hints.ranges(margin_days=1) == [(-DAY_MS, 2 * DAY_MS)]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120), st.integers(min_value=-10**13, max_value=10**13))
def test_any_text_parses_to_sane_windows(text, ts):
    hints = parse(text, NOW)
    for w in hints.windows:
        assert w.start_ms < w.end_ms
    assert 0.0 <= hints.match(ts) <= 1.0
