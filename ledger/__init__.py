"""The only code that touches the Agents Ledger.

Read side (used by the indexer): :func:`open_ledger` returns a read-only
:class:`LedgerReader`. Write side (:mod:`ledger.writer`) exists only to build
demo, test and benchmark ledgers; the indexer never imports it.
"""

from ledger.connection import LedgerUnavailable, open_ledger
from ledger.reader import LedgerReader
from ledger.rows import (
    CompactionRow,
    HistoryRow,
    MessageRow,
    SessionRow,
    ThreadRow,
    TurnRow,
)

__all__ = [
    "CompactionRow",
    "HistoryRow",
    "LedgerReader",
    "LedgerUnavailable",
    "MessageRow",
    "SessionRow",
    "ThreadRow",
    "TurnRow",
    "open_ledger",
]
