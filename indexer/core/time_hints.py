"""Dates named in a query ("last week", "in July", "on October 13, 2023") as
time windows, so that ``memory_search`` can favour what was said then.

Pure: ``parse(query, now)`` returns :class:`TimeHints`; ``match(ts_ms)`` says
how well a document's time fits (1 inside a window, falling linearly to 0
over ``margin_days`` outside it, because people often talk about an event a
few days after it happened).

A small regex grammar rather than a date-parsing library: the general parsers
(dateparser, parsedatetime) read one date from a string, not dates *inside* a
question, take tens of milliseconds per call, and read "may" or "march" in
ordinary prose as months. Recognised, case-insensitive, English:

- ``October 13, 2023`` · ``13 October 2023`` · ``2023-10-13`` → that day
- ``October 2023`` → that month · ``2023`` (1900–2099, alone) → that year
- ``in July`` / ``July`` → July of any year ("May"/"March" only capitalised)
- ``today`` · ``yesterday`` · ``this/last week|month|year`` ·
  ``N days|weeks|months ago`` · ``past/last N days|weeks|months``, relative to ``now``
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass

DAY_MS = 86_400_000
#: How many days outside a window a document still gets part of the match.
MARGIN_DAYS = 7.0
#: Month-of-any-year windows are expanded to concrete ranges over this many past years.
MONTH_YEARS_BACK = 10

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_MON = "|".join(sorted(_MONTHS, key=len, reverse=True))
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"

_ISO = re.compile(r"\b((?:19|20)\d\d)-(\d\d)-(\d\d)\b")
_MDY = re.compile(rf"\b({_MON})\.?\s+{_DAY},?\s+{_YEAR}\b", re.I)
_DMY = re.compile(rf"\b{_DAY}\s+(?:of\s+)?({_MON})\.?,?\s+{_YEAR}\b", re.I)
_MY = re.compile(rf"\b({_MON})\.?,?\s+(?:of\s+)?{_YEAR}\b", re.I)
_M = re.compile(rf"\b({_MON})\b", re.I)
_Y = re.compile(rf"\b{_YEAR}\b")
_REL_AGO = re.compile(r"\b(\d{1,3}|a|one|two|three|four|five|six)\s+(day|week|month)s?\s+ago\b", re.I)
_REL_PAST = re.compile(r"\b(?:past|last)\s+(\d{1,3}|two|three|four|five|six)\s+(day|week|month)s?\b", re.I)
_REL_UNIT = re.compile(r"\b(this|last|past)\s+(week|month|year)\b", re.I)
_TODAY = re.compile(r"\btoday\b", re.I)
_YESTERDAY = re.compile(r"\byesterday\b", re.I)
_NUMBER = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
# Month names that are also ordinary words: only taken as months when capitalised.
_AMBIGUOUS = {"may", "march", "jan", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec"}


@dataclass(frozen=True, slots=True)
class Window:
    """``[start_ms, end_ms)`` in epoch milliseconds (UTC)."""

    start_ms: int
    end_ms: int

    def distance_days(self, ts_ms: int) -> float:
        if self.start_ms <= ts_ms < self.end_ms:
            return 0.0
        gap = self.start_ms - ts_ms if ts_ms < self.start_ms else ts_ms - self.end_ms + 1
        return gap / DAY_MS


@dataclass(frozen=True, slots=True)
class TimeHints:
    """The windows a query names; empty when it names none."""

    windows: tuple[Window, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.windows)

    def match(self, ts_ms: int | None, margin_days: float = MARGIN_DAYS) -> float:
        """1.0 inside a window, linearly less up to ``margin_days`` outside it, else 0."""
        if ts_ms is None or not self.windows:
            return 0.0
        d = min(w.distance_days(int(ts_ms)) for w in self.windows)
        if d <= 0:
            return 1.0
        return max(0.0, 1.0 - d / margin_days) if margin_days > 0 else 0.0

    def ranges(self, margin_days: float = MARGIN_DAYS) -> list[tuple[int, int]]:
        """The windows widened by the margin: what a timestamp prefilter should cover."""
        pad = int(margin_days * DAY_MS)
        return [(w.start_ms - pad, w.end_ms + pad) for w in self.windows]


def _ms(d: dt.date) -> int:
    return int(dt.datetime(d.year, d.month, d.day, tzinfo=dt.UTC).timestamp() * 1000)


def _day(y: int, m: int, d: int) -> Window | None:
    """That day; its month when the day does not exist (``Feb 30``); None for a bad month."""
    try:
        start = dt.date(y, m, d)
    except ValueError:
        return _month(y, m) if 1 <= m <= 12 else None
    return Window(_ms(start), _ms(start + dt.timedelta(days=1)))


def _month(y: int, m: int) -> Window:
    nxt = dt.date(y + 1, 1, 1) if m == 12 else dt.date(y, m + 1, 1)
    return Window(_ms(dt.date(y, m, 1)), _ms(nxt))


def _months_back(day: dt.date, n: int) -> dt.date:
    y, m = divmod(day.year * 12 + day.month - 1 - n, 12)
    return dt.date(y, m + 1, min(day.day, calendar.monthrange(y, m + 1)[1]))


def _relative(today: dt.date, n: int, unit: str) -> dt.date:
    unit = unit.lower()
    if unit == "day":
        return today - dt.timedelta(days=n)
    if unit == "week":
        return today - dt.timedelta(weeks=n)
    return _months_back(today, n)


def _span(start: dt.date, end: dt.date) -> Window:
    """``[start, end)`` as a window."""
    return Window(_ms(start), _ms(end))


def _count(word: str) -> int:
    return _NUMBER.get(word.lower()) or int(word)


def _unit_window(which: str, unit: str, today: dt.date) -> Window:
    """``this|last|past week|month|year``; "past" is the span up to today."""
    which, unit = which.lower(), unit.lower()
    tomorrow = today + dt.timedelta(days=1)
    if which == "past":
        return _span(_months_back(today, 12) if unit == "year" else _relative(today, 1, unit), tomorrow)
    if unit == "week":
        start = today - dt.timedelta(days=today.weekday())
        previous = start - dt.timedelta(weeks=1)
    elif unit == "month":
        start = today.replace(day=1)
        previous = _months_back(start, 1)
    else:
        start = dt.date(today.year, 1, 1)
        previous = dt.date(today.year - 1, 1, 1)
    return _span(start, tomorrow) if which == "this" else _span(previous, start)


def parse(query: str, now: dt.datetime | None = None) -> TimeHints:
    """The time windows named in ``query``; relative words are read against ``now`` (UTC)."""
    now = now or dt.datetime.now(dt.UTC)
    today = now.astimezone(dt.UTC).date()
    text = query
    windows: list[Window] = []

    def take(pattern: re.Pattern, build) -> None:
        """Windows for every match of ``pattern``; a match taken is blanked so that the
        looser patterns after it (a bare month, a bare year) do not read it again."""
        nonlocal text
        for m in list(pattern.finditer(text)):
            found = build(m)
            if found:
                windows.extend(found if isinstance(found, list) else [found])
                text = text.replace(m.group(0), " ", 1)

    def month_any_year(m: re.Match) -> list[Window] | None:
        word = m[1]
        if word.lower() in _AMBIGUOUS and (not word[0].isupper() or not m.string[: m.start()].strip()):
            return None  # "may", or "May I ask…" opening the query
        month = _MONTHS[word.lower()]
        return [_month(year, month) for year in range(today.year - MONTH_YEARS_BACK, today.year + 1)]

    def ago(m: re.Match) -> Window:  # "3 days ago": that day, give or take half a week
        day = _relative(today, _count(m[1]), m[2])
        return _span(day - dt.timedelta(days=3), day + dt.timedelta(days=4))

    tomorrow = today + dt.timedelta(days=1)
    take(_ISO, lambda m: _day(int(m[1]), int(m[2]), int(m[3])))
    take(_MDY, lambda m: _day(int(m[3]), _MONTHS[m[1].lower()], int(m[2])))
    take(_DMY, lambda m: _day(int(m[3]), _MONTHS[m[2].lower()], int(m[1])))
    take(_MY, lambda m: _month(int(m[2]), _MONTHS[m[1].lower()]))
    take(_TODAY, lambda m: _span(today, tomorrow))
    take(_YESTERDAY, lambda m: _span(today - dt.timedelta(days=1), today))
    take(_REL_AGO, ago)
    take(_REL_PAST, lambda m: _span(_relative(today, _count(m[1]), m[2]), tomorrow))
    take(_REL_UNIT, lambda m: _unit_window(m[1], m[2], today))
    take(_M, month_any_year)
    take(_Y, lambda m: _span(dt.date(int(m[1]), 1, 1), dt.date(int(m[1]) + 1, 1, 1)))
    return TimeHints(tuple(sorted(set(windows), key=lambda w: (w.start_ms, w.end_ms))))


__all__ = ["MARGIN_DAYS", "TimeHints", "Window", "parse"]
