"""Messages that arrive for a turn after a pass built it.

A tail pass builds a turn once it is done and never again (only turns not indexed yet are built),
but a runtime may write the answer after marking the turn done, finish a turn that was done with
no text yet, or retry a failed turn in place — with no new ``session_history`` row. Every message
the runtime writes is a new row of ``messages``, so each persona keeps the newest rows it has read
(the state DB's ``late_checkpoints``: rowid, id and a digest, see :class:`LateMark`); a pass that finds the ledger files
changed reads the rows after them (a rowid range: only the new rows), and a turn among them that
is indexed, or was done with no text (``StateDB.record_empty``), is built again if it is still in
its session's history. A message edited in place (an UPDATE: no new row) is noticed only when it
is a checkpoint's row (the newest a pass had read: a runtime streaming into its last message);
others are taken by the next rebuild (``reindex``).
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from indexer.state.install_key import keyed_digest
from indexer.sync.context import Indexer
from ledger.reader import LedgerReader

log = structlog.get_logger("indexer.sync")

MAX_CHECKPOINTS = 8
#: when only an older checkpoint holds (rows after it were read before), past this many rows a pass
#: does not revisit their turns in one build: it schedules a backfill (batched and counted) instead.
#: Reading on from the newest checkpoint has no limit: rows no pass read yet are mostly new turns.
MAX_REREAD_ROWS = 50_000
#: rows before the newest a backfill or rebuild also keeps as checkpoints (one deleted row, or a few,
#: must not lose every checkpoint)
START_BACK = (0, 16, 256, 4096)
#: set while the WAL still holds the rows of an earlier layout the migration to schema 7 rewrote (a
#: reader kept it from truncating). A persona's pass that must walk every session again (no checkpoint
#: holds: the ``messages`` table renumbered; or only one more than MAX_REREAD_ROWS back) is recorded
#: as ``StateDB.set_backfill_due``, cleared by the backfill (or a rebuild).
WAL_TRUNCATE_OWED_KEY = "wal_truncate_owed_v1"

Checkpoint = tuple[int, "str | None", "str | None"]  # rowid, message id, keyed digest of the row (_keyed)
KEYED = "k1:"  # a row key digested with the index's key (schema 6 may hold others: indexer.state.schema_7)


@dataclass(frozen=True, slots=True)
class LateMark:
    """Where the next pass starts reading ``messages``: checkpoints (rowid, id, key), oldest first.
    ``messages`` has no AUTOINCREMENT: when the newest rows are deleted their rowids are handed out
    again (a failed answer deleted and written anew), and a restored or dumped ledger renumbers them.
    So a checkpoint is trusted only while its rowid holds the same message id; a row there with the
    same id but another key (edited in place, or written anew under its id) is read again."""

    checkpoints: tuple[Checkpoint, ...]

    def as_json(self) -> dict:
        return {"checkpoints": [list(c) for c in self.checkpoints]}


def _read(ix: Indexer, persona: str) -> LateMark | None:
    stored = ix.state.late_mark(persona)
    return LateMark(stored) if stored else None


def _keyed(ix: Indexer, digest: str | None) -> str | None:
    """A row's digest (:func:`ledger.reader.row_digest`) as stored: keyed with the index's key, since
    a plain digest of a short message (a tool result's code) can be recovered by guessing."""
    return None if digest is None else KEYED + keyed_digest(ix.state.key(), digest)


def convert_marks(ix: Indexer) -> bool:
    """Truncate the WAL the migration to schema 7 owes (it still holds the marks of an earlier layout,
    which held message bytes); while a reader keeps it from truncating, it stays owed (a meta flag)
    and is tried again. True when nothing is owed any more."""
    if not ix.state.get_meta(WAL_TRUNCATE_OWED_KEY):
        return True
    if not ix.state.truncate_wal():
        log.info("state.wal_truncate_deferred", reason="a reader holds the state DB", action="retried next pass")
        return False
    ix.state.delete_meta(WAL_TRUNCATE_OWED_KEY)  # a frame of its own: nothing of the old rows
    return True


def _thin(checkpoints: tuple[Checkpoint, ...]) -> tuple[Checkpoint, ...]:
    """At most MAX_CHECKPOINTS, spread out: the oldest and the newest stay, and of the others the
    one closest to its neighbours goes first (a few rows deleted must not lose every checkpoint)."""
    kept = list(checkpoints)
    while len(kept) > MAX_CHECKPOINTS:
        i = min(range(1, len(kept) - 1), key=lambda j: kept[j + 1][0] - kept[j - 1][0])
        del kept[i]
    return tuple(kept)


def start(ix: Indexer, reader: LedgerReader) -> LateMark:
    """Before a backfill or a rebuild reads the ledger (it builds every turn as it is): the mark to
    keep (:func:`keep`) in the transaction that records what it built — messages after it are late
    for that. Not before: an interrupted rebuild leaves the old index, and its mark, as they were."""
    with reader.snapshot():
        return LateMark(tuple((r, m, _keyed(ix, d)) for r, m, d in reader.messages_checkpoints(START_BACK)))


def late_turns(ix: Indexer, reader: LedgerReader, persona: str) -> tuple[list[tuple[str, str]], LateMark]:
    """(the (session, turn) pairs of ``persona``'s sessions built before and given a message since,
    the mark to keep with them: :func:`keep`). Which of them are built again (not those of a session
    deleted or moved away) is the pass's plan's to say (:mod:`indexer.sync.tail_plan`)."""
    stored = _read(ix, persona)
    with reader.snapshot():
        ((top_rowid, top_id, top_digest),) = reader.messages_checkpoints()
        top = (top_rowid, top_id, _keyed(ix, top_digest))
        if stored is None:  # an index from before this check: from now on
            return [], LateMark((top,))
        since, newest = None, len(stored.checkpoints) - 1
        for i in range(newest, -1, -1):
            rowid, mid, key = stored.checkpoints[i]
            now_id, now_digest = reader.message_at(rowid)
            now_key = _keyed(ix, now_digest)
            if now_id == mid:  # the rows up to it are the ones read; itself too unless it changed
                since = rowid if now_key == key else rowid - 1
                kept = (*stored.checkpoints[:i], (rowid, mid, now_key))  # read again once, not every pass
                break
        if since is None or (i < newest and top[0] - since > MAX_REREAD_ROWS):
            # every row after any point may be new (or too many read before would be read again): the
            # next pass walks every session (batched and counted like any backfill; unchanged
            # documents are skipped by hash)
            why = "messages_renumbered" if since is None else "messages_reread"
            log.warning(f"ledger.{why}", persona=persona, checkpoints=len(stored.checkpoints),
                        action="the next pass builds every session again")
            ix.state.set_backfill_due(persona, why)
            return [], LateMark((top,))
        turns = reader.late_messages(since, top[0])
    mark = LateMark(_thin(tuple(c for c in kept if c[0] != top[0]) + (top,)))
    pairs = ix.state.holders_of_late(persona, turns)
    owners = ix.state.registered_personas({s for s, _ in pairs})
    # only sessions registered to this persona (one that moved is the other persona's)
    return [(s, t) for s, t in pairs if owners.get(s) == persona], mark


def keep(ix: Indexer, persona: str, mark: LateMark) -> None:
    """Store ``mark`` (no write when it is stored already: every commit invalidates the scope-facts
    memo of every searcher)."""
    if ix.state.late_mark(persona) != mark.checkpoints:
        ix.state.set_late_mark(persona, mark.checkpoints)


__all__ = ["WAL_TRUNCATE_OWED_KEY", "LateMark", "convert_marks", "keep", "late_turns", "start"]
