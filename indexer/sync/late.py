"""Messages that arrive for a turn after a pass built it.

A tail pass builds a turn once it is done and never again (only turns not indexed yet are built),
but a runtime may write the answer after marking the turn done, finish a turn that was done with
no text yet, or retry a failed turn in place — with no new ``session_history`` row. Every message
the runtime writes is a new row of ``messages``, so each persona keeps the newest rowid it has
read (``LATE_MARK_KEY``); a pass that finds the ledger files changed reads the rows after it (a
rowid range: only the new rows), and a turn among them that is indexed, or was done with no text
(``StateDB.record_empty``), is built again. A message edited in place (an UPDATE: no new row) is
not noticed; the next rebuild (``reindex``) takes it.
"""

from __future__ import annotations

import structlog

from indexer.sync.context import Indexer
from ledger.reader import LedgerReader

log = structlog.get_logger("indexer.sync")

#: per persona: the newest ``messages`` rowid its passes have read
LATE_MARK_KEY = "late_messages_mark_v1"


def start(ix: Indexer, reader: LedgerReader, persona: str) -> None:
    """Before a backfill or a rebuild reads the ledger: messages from here on are late for what it
    builds (a mark already kept stays: it is older)."""
    if ix.state.get_meta(LATE_MARK_KEY, persona) is None:
        with reader.snapshot():
            mark = reader.messages_mark()
        with ix.state.atomic():
            ix.state.set_meta(LATE_MARK_KEY, str(mark), persona)


def late_turns(ix: Indexer, reader: LedgerReader, persona: str, deleted: set[str]) -> tuple[list[tuple[str, str]], int]:
    """(the (session, turn) pairs to build again — built before, and given a message since —, the
    rowid to keep once they are written: :func:`keep`)."""
    stored = ix.state.get_meta(LATE_MARK_KEY, persona)
    with reader.snapshot():
        if stored is None:  # an index from before this check: from now on
            return [], reader.messages_mark()
        mark, turns = reader.late_messages(int(stored))
    pairs = [p for p in ix.state.holders_of_late(persona, turns) if p[0] not in deleted]
    for session, turn in pairs:
        log.info("turn.late_message", persona=persona, session=session, turn=turn)
    return pairs, mark


def keep(ix: Indexer, persona: str, mark: int) -> None:
    ix.state.set_meta(LATE_MARK_KEY, str(mark), persona)


__all__ = ["LATE_MARK_KEY", "keep", "late_turns", "start"]
