"""The ledger rows a build reads: session ancestries and the turns they name.

Shared by :mod:`indexer.sync.build` (documents) and :mod:`indexer.sync.secret_spread` (what
the secret memory learns from): both read the same turns, once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from indexer.core.documents import compaction_text, turn_text
from indexer.sync.recurring import WAIT, Learnable
from ledger.reader import LedgerReader
from ledger.rows import CompactionRow, MessageRow, ThreadRow, TurnRow

DONE_STATUSES = ("completed", "failed")


def head_history(reader: LedgerReader, thread: ThreadRow, head: str) -> list[str] | None:
    """A session's history from its head's thread row (None: unreadable, a bad row). A NULL
    ancestry (the column allows it) is read from the turns' parents: as one turn it would read as a
    history rewound to its head, and every earlier document of the session would be deleted."""
    if thread.ancestry_json is None:
        return reader.parent_chain(head)
    return parse_ancestry(thread.ancestry_json, head)


def parse_ancestry(raw: str | None, head: str) -> list[str] | None:
    if raw is None:
        return [head]
    try:
        value = json.loads(raw)
    except (ValueError, TypeError, RecursionError):  # not JSON, not UTF-8, or nested past any use
        return None
    if not isinstance(value, list) or not all(isinstance(x, str) and x for x in value):
        return None
    # The thread's history ends with its head turn (the ledger's contract); one that does not
    # still holds it: ids past it are not this thread's, a head left out is its last turn.
    if head in value:
        return value[: value.index(head) + 1]
    return [*value, head]


class TurnRows:
    """Rows of the turns read so far, fetched in a fixed number of queries per :meth:`read`."""

    def __init__(self, reader: LedgerReader, max_message_bytes: int) -> None:
        self.reader, self.limit = reader, max_message_bytes
        self.turns: dict[str, TurnRow] = {}
        self.messages: dict[str, list[MessageRow]] = {}
        self.compactions: dict[str, CompactionRow] = {}
        self._read: set[str] = set()

    def read(self, turn_ids: Iterable[str]) -> None:
        ids = set(turn_ids) - self._read
        if not ids:
            return
        self._read |= ids
        turns = self.reader.turns(ids)
        self.turns.update(turns)
        self.messages.update(self.reader.messages(t for t in ids if t in turns and turns[t].turn_type != "compaction"))
        self.compactions.update(self.reader.compactions(t for t in ids if t in turns
                                                        and turns[t].turn_type == "compaction"))

    def learnable(self, tid: str) -> Learnable:
        """What :meth:`SecretMemory.learn` takes for a turn: its unredacted text, None (it has
        none), or ``WAIT`` when it may read differently later (streaming, a bad row, not there)."""
        turn = self.turns.get(tid)
        if (turn is None or turn.status not in DONE_STATUSES or turn.problem is not None
                or any(m.problem for m in self.messages.get(tid, []))):
            return WAIT
        if turn.turn_type == "compaction":
            row = self.compactions.get(tid)
            if row is None:  # a bad row (missing_compaction) until its row appears
                return WAIT
            raw = compaction_text(row, max_message_bytes=self.limit)
        else:
            raw = turn_text(self.messages.get(tid, []), max_message_bytes=self.limit)
        return raw[0] if raw is not None else None

    def text(self, tid: str) -> str | None:
        """The unredacted text a finished, readable turn's document is made of (None: none)."""
        text = self.learnable(tid)
        return text if isinstance(text, str) else None


def session_histories(reader: LedgerReader, persona: str, labels: Sequence[str]) -> dict[str, list[str] | str]:
    """The ancestry of each session (two queries), or why there is none: "gone" (deleted or not
    in the ledger) or "unreadable" (no thread row, or an ancestry that is not a list of ids)."""
    if not labels:
        return {}
    rows = {s.label: s for s in reader.sessions(labels=labels, persona=persona) if s.status != "deleted"}
    threads = reader.threads(s.thread_id for s in rows.values())
    out: dict[str, list[str] | str] = {}
    for label in labels:
        session = rows.get(label)
        if session is None:
            out[label] = "gone"
            continue
        thread = threads.get(session.thread_id)
        history = head_history(reader, thread, session.thread_id) if thread is not None else None
        out[label] = history if history is not None else "unreadable"
    return out


def turn_positions(reader: LedgerReader, turn_ids: Iterable[str]) -> dict[str, int]:
    """Each turn's place in any history holding it (its own ancestry's length − 1), from its
    thread row: for a session whose own thread row cannot be read."""
    out: dict[str, int] = {}
    for tid, thread in reader.threads(turn_ids).items():
        ancestry = parse_ancestry(thread.ancestry_json, tid)
        if ancestry:
            out[tid] = len(dict.fromkeys(ancestry)) - 1
    return out
