"""A search's prefilter (:class:`Where`) and how a query is shaped by it (the retriever's helpers)."""

from __future__ import annotations

from dataclasses import dataclass

from exporters.lancedb.schema import DETAIL_COLUMNS


@dataclass(frozen=True, slots=True)
class Where:
    """A prefilter: its SQL, and whether it admits every row of the table (the persona
    scope over both sources, no session excluded): such a filter routes without counting
    and is not sent to LanceDB at all (:func:`_sent`)."""

    sql: str
    whole: bool = False
    #: The filter admits one session's turns (and the persona's memory files): usually fewer rows
    #: than a query's candidates, so :meth:`Retriever.nearest` reads them whole first.
    few: bool = False

    def __str__(self) -> str:
        return self.sql


def _as_where(where: Where | str) -> Where:
    return where if isinstance(where, Where) else Where(str(where))


def _sent(where: Where) -> str | None:
    """The SQL of ``where`` as sent to LanceDB (always a prefilter), or None: a filter every row
    passes is not sent, since LanceDB would evaluate it on every row of the table for every query
    (the persona scope at 1M rows: 7 ms of a 25 ms vector stage). The searcher's per-row scope
    check still runs."""
    return None if where.whole else where.sql


def _needs_details(columns: list[str]) -> bool:
    """Rows queried without the detail columns carry ``_rowid`` for :meth:`Retriever.details`."""
    return any(c not in columns for c in DETAIL_COLUMNS)
