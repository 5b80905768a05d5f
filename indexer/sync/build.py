"""Building the documents of ledger sessions (one step of a sync pass).

``build_sessions`` reads a batch of sessions in a fixed number of ledger
queries and returns their documents, what was skipped and why, and the turns
still pending. Pure with respect to the sinks: nothing is written here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

import structlog

from indexer.core.documents import Skip, SkipReason, compaction_document, compaction_text, turn_document, turn_text
from indexer.core.types import Document
from indexer.sync.context import Indexer
from ledger.reader import LedgerReader
from ledger.rows import CompactionRow, MessageRow, SessionRow, TurnRow
from indexer.sync.recurring import WAIT, StagedMemory
from redaction import Recurring

log = structlog.get_logger("indexer.sync")

DONE_STATUSES = ("completed", "failed")


@dataclass
class Built:
    docs: list[Document] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)
    pending: list[tuple[str, str]] = field(default_factory=list)  # (session, turn_id)
    done_pending: list[tuple[str, str]] = field(default_factory=list)
    # per session: the ancestry (turn ids) when it could be read
    ancestry: dict[str, list[str]] = field(default_factory=dict)
    # per skipped turn id: the digest of its rows as read (a change retries it)
    fingerprints: dict[str, str] = field(default_factory=dict)
    # turns looked at (documents, skips, pending): what a progress bar counts
    considered: int = 0
    # the secret values this build learned: commit() once its documents are written
    learned: StagedMemory | None = None

    def not_written(self) -> int:
        """Turns considered that made no document to write (skipped, pending)."""
        return max(0, self.considered - len({d.path for d in self.docs}))


def parse_ancestry(raw: str | None, head: str) -> list[str] | None:
    if raw is None:
        return [head]
    try:
        value = json.loads(raw)
    except (ValueError, TypeError, RecursionError):  # not JSON, not UTF-8, or nested past any use
        return None
    if not isinstance(value, list) or not all(isinstance(x, str) and x for x in value):
        return None
    return value if value else [head]


class _Rows:
    """Ledger rows of the turns a build reads, fetched in a fixed number of queries per read."""

    def __init__(self, reader: LedgerReader, limit: int) -> None:
        self.reader, self.limit = reader, limit
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

    def pending(self, tid: str) -> bool:
        turn = self.turns.get(tid)
        return turn is not None and turn.status not in DONE_STATUSES

    def learnable(self, tid: str) -> object:
        """What :meth:`SecretMemory.learn` takes for a turn: its text, None (nothing to learn), or
        ``WAIT`` for a turn that may read differently later (streaming, a bad row, not there)."""
        turn = self.turns.get(tid)
        if turn is None or turn.status not in DONE_STATUSES or turn.problem is not None:
            return WAIT
        if any(m.problem for m in self.messages.get(tid, [])):
            return WAIT
        return self.text(tid)

    def text(self, tid: str) -> str | None:
        """The unredacted text a finished, readable turn's document is made of (None: none)."""
        turn = self.turns.get(tid)
        if turn is None or turn.status not in DONE_STATUSES or turn.problem is not None:
            return None
        if turn.turn_type == "compaction":
            row = self.compactions.get(tid)
            raw = compaction_text(row, max_message_bytes=self.limit) if row is not None else None
        else:
            messages = self.messages.get(tid, [])
            if any(m.problem for m in messages):
                return None
            raw = turn_text(messages, max_message_bytes=self.limit)
        return raw[0] if raw is not None else None


def build_sessions(
    ix: Indexer,
    reader: LedgerReader,
    persona: str,
    sessions: Sequence[SessionRow],
    *,
    only_new: bool,
    extra_turns: Iterable[tuple[str, str]] = (),
    spread: bool = True,
    holders: dict[str, set[str]] | None = None,
    learned: StagedMemory | None = None,
) -> Built:
    """Documents for ``sessions`` (and for ``extra_turns``: (session, turn) pairs
    to revisit), in a fixed number of ledger queries (more when a secret found in
    one turn must be masked in turns already indexed: :mod:`indexer.sync.recurring`).

    ``only_new``: skip turns already indexed (or recorded as bad) for that
    session: completed turns never change, so a tail need not rebuild them.
    ``spread``: learn secret values and return the documents already indexed that must be
    built again for them (False: use what is known, learn nothing). What is learned goes to
    ``Built.learned`` (``learned``: a staging shared by a rebuild's batches), to commit once
    the documents are written. ``holders``: turn → sessions built earlier in this pass but
    not recorded in the state DB yet (a rebuild), kept up to date.
    """
    out = Built()
    by_label = {s.label: s for s in sessions}
    threads = reader.threads(s.thread_id for s in sessions)
    wanted: dict[str, list[str]] = {}
    for s in sessions:
        thread = threads.get(s.thread_id)
        if thread is None:
            out.skips.append(Skip(SkipReason.MISSING_THREAD, s.label, s.thread_id,
                                  f"session head {s.thread_id} has no threads row"))
            continue
        ancestry = parse_ancestry(thread.ancestry_json, s.thread_id)
        if ancestry is None:
            out.skips.append(Skip(SkipReason.BAD_ANCESTRY, s.label, s.thread_id,
                                  "threads.ancestry is not a JSON array of turn ids"))
            continue
        out.ancestry[s.label] = ancestry
        if only_new:
            # Turns recorded as bad are retried whenever their session moves
            # (new history row) and by `sync --retry-bad`: nothing stays dropped.
            known = ix.state.indexed_turns(persona, s.label)
            wanted[s.label] = [t for t in ancestry if t not in known]
        else:
            wanted[s.label] = list(dict.fromkeys(ancestry))
    for label, turn in extra_turns:
        wanted.setdefault(label, [])
        if turn not in wanted[label]:
            wanted[label].append(turn)
    extra = set(extra_turns)
    out.considered = sum(len(ids) for ids in wanted.values())

    limit = ix.config.ledger.max_message_bytes
    rows = _Rows(reader, limit)
    memory = learned if learned is not None else ix.secrets.stage() if ix.secrets is not None else None
    out.learned = memory
    histories = dict(out.ancestry)
    if memory is not None:
        # Revisited turns (a streaming turn finished) are learned from with their session's history.
        found = _histories(reader, persona, [label for label in wanted if label not in histories])
        histories.update((label, h) for label, h in found.items() if isinstance(h, list))
    learn: dict[str, list[str]] = {}
    if memory is not None and spread:
        learn = {label: memory.unlearned(persona, label, anc) for label, anc in histories.items()}
    rows.read({t for ids in wanted.values() for t in ids} | {t for ids in learn.values() for t in ids})
    if memory is not None and spread:
        seen = holders if holders is not None else {}
        for label, tids in _spread_secrets(ix, reader, persona, memory, rows, learn, histories, seen).items():
            ids = wanted.setdefault(label, [])
            ids.extend(t for t in tids if t not in ids)

    positions = {label: {t: i for i, t in enumerate(dict.fromkeys(anc))} for label, anc in histories.items()}
    for label, ids in wanted.items():
        session = by_label.get(label)
        redact = memory.redact(persona, label) if memory is not None else ix.redact
        for tid in ids:
            turn = rows.turns.get(tid)
            if turn is None:
                out.skips.append(Skip(SkipReason.MISSING_TURN, label, tid, "ancestry names a turn that does not exist"))
                continue
            if turn.status not in DONE_STATUSES:
                out.pending.append((label, tid))
                continue
            problem = turn.problem or next((m.problem for m in rows.messages.get(tid, []) if m.problem), None)
            if problem is not None:  # a field of the wrong type: this turn is a bad row, its neighbours go on
                out.skips.append(Skip(SkipReason.INVALID_ROW, label, tid, problem))
                continue
            if (label, tid) in extra:
                out.done_pending.append((label, tid))
            persona_of = session.persona if session else persona
            try:
                if turn.turn_type == "compaction":
                    result = compaction_document(persona_of, label, turn, rows.compactions.get(tid),
                                                 redact=redact, max_message_bytes=limit)
                else:
                    result = turn_document(persona_of, label, turn, rows.messages.get(tid, []),
                                           redact=redact, max_message_bytes=limit)
            except Exception as exc:  # one bad row never stops a sync
                result = Skip(SkipReason.INVALID_ROW, label, tid, f"{type(exc).__name__}: {exc}")
            if isinstance(result, Skip):
                out.skips.append(result)
            elif result is not None:
                out.docs.append(replace(result, turn_seq=positions.get(label, {}).get(tid)))
    # Read in the caller's snapshot, with the rows the skips were decided on.
    out.fingerprints = reader.turn_fingerprints(s.turn_id for s in out.skips if s.turn_id)
    return out


def _spread_secrets(ix: Indexer, reader: LedgerReader, persona: str, memory: StagedMemory, rows: _Rows,
                    learn: dict[str, list[str]], histories: dict[str, list[str]],
                    in_pass: dict[str, set[str]]) -> dict[str, list[str]]:
    """Learn the secret values of the batch's unlearned turns, and find every turn already
    indexed that must be built again to mask a value its session did not know: per session,
    those turns. A value goes wherever a turn holding it goes: a session read for the first
    time in this process takes the values its co-holders (sessions sharing a turn with it)
    found there, and a new value is given to every session holding a turn it occurs in.
    ``histories`` gains the ancestry of each session outside the batch this reaches;
    ``in_pass`` (turn → sessions holding it, built in this pass) gains this batch's."""
    unreachable: dict[str, str] = {}  # label -> "gone" / "unreadable" (see _history)

    def note(label: str, history: Sequence[str]) -> None:
        for tid in history:
            in_pass.setdefault(tid, set()).add(label)

    def learn_history(label: str, tids: Sequence[str]) -> dict[str, str]:
        rows.read(tids)
        return memory.learn(persona, label, histories[label], {t: rows.learnable(t) for t in dict.fromkeys(tids)})

    def reach(label: str) -> bool:
        """Make ``label``'s history known (read and learned if outside the batch). False: it
        has none to read (deleted, gone, or its thread row unreadable)."""
        if label in histories:
            return True
        if label in unreachable:
            return False
        history = _histories(reader, persona, [label])[label]
        if not isinstance(history, list):
            unreachable[label] = history
            return False
        histories[label] = history
        note(label, history)
        new = learn_history(label, memory.unlearned(persona, label, history))
        if new:
            gained.setdefault(label, {}).update(new)
        return True

    def holders(tids: Sequence[str]) -> dict[str, set[str]]:
        stored = ix.state.turn_holders(persona, tids)
        return {t: stored.get(t, set()) | in_pass.get(t, set()) for t in tids}

    for label, history in histories.items():
        note(label, history)
    fresh = [label for label in learn if not memory.knows(persona, label)]
    gained: dict[str, dict[str, str]] = {}
    for label, tids in learn.items():
        new = learn_history(label, tids)
        if new:
            gained.setdefault(label, {}).update(new)
    # Pull: a session first read in this process (a restart, a new fork) takes what the
    # sessions it shares turns with found in those turns.
    for label in fresh:
        shared = holders(list(dict.fromkeys(histories[label])))
        for other in sorted({h for hs in shared.values() for h in hs} - {label}):
            if not reach(other):
                continue
            theirs = memory.recurring(persona, other)
            if theirs is None:
                continue
            for tid, hs in shared.items():
                if other in hs and (text := rows.text(tid)) is not None:
                    added = memory.add(persona, label, theirs.values_in(text))
                    if added:
                        gained.setdefault(label, {}).update(added)
    # Push: a new value re-renders the turns it occurs in, and goes to each of their holders.
    again: dict[str, list[str]] = {}
    while gained:
        label, new = gained.popitem()
        if reach(label):
            new = {**new, **gained.pop(label, {})}  # reach() may have learned more
            history = histories[label]
        elif unreachable[label] == "unreadable":  # its thread row is broken: its indexed copies
            history = sorted(ix.state.turns_of(persona, [label]))
        else:  # deleted or gone: its documents are being removed, never written again
            continue
        rows.read(history)
        recurring = Recurring(new)
        found = {t: v for t in dict.fromkeys(history)
                 if (text := rows.text(t)) is not None and (v := recurring.values_in(text))}
        if not found:
            continue
        again.setdefault(label, []).extend(t for t in found if t not in again[label])
        for tid, hs in holders(list(found)).items():
            for holder in sorted(hs - {label}):
                added = memory.add(persona, holder, found[tid])
                if added:
                    gained.setdefault(holder, {}).update(added)
    if again:
        log.info("redaction.recurring", persona=persona, sessions=len(again),
                 turns=sum(len(t) for t in again.values()))
    return again


def _histories(reader: LedgerReader, persona: str, labels: Sequence[str]) -> dict[str, list[str] | str]:
    """The ancestry of each session outside the batch (two queries), or why there is none: "gone"
    (deleted or not in the ledger) or "unreadable" (no thread row, or an ancestry that is not a
    list of ids)."""
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
        history = parse_ancestry(thread.ancestry_json, session.thread_id) if thread is not None else None
        out[label] = history if history is not None else "unreadable"
    return out
