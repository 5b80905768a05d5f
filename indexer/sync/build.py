"""Building the documents of ledger sessions (one step of a sync pass).

``build_sessions`` reads a batch of sessions in a fixed number of ledger
queries and returns their documents, what was skipped and why, and the turns
still pending. Pure with respect to the sinks: nothing is written here.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import structlog

from indexer.core.documents import Skip, SkipReason, compaction_document, turn_document
from indexer.core.types import Document
from indexer.sync.context import Indexer
from indexer.sync.recurring import StagedMemory
from indexer.sync.secret_spread import SecretSpread
from indexer.sync.turn_rows import DONE_STATUSES, TurnRows, head_history, session_histories, turn_positions
from indexer.sync.work import Step
from ledger.reader import LedgerReader
from ledger.rows import SessionRow

log = structlog.get_logger("indexer.sync")

__all__ = ["SESSIONS_PER_BATCH", "Built", "build_sessions"]

#: sessions built (and committed) at a time when a pass builds many (callers read it from here:
#: ``build.SESSIONS_PER_BATCH``, ``build.build_sessions``, so a test can change either in one place)
SESSIONS_PER_BATCH = 50


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
    # sessions it read again for values found in another persona (indexer.sync.revisit.write_owed)
    rechecked: list[str] = field(default_factory=list)
    # (session, turn) of the turns done with no text (no document): built again if messages arrive
    # (indexer.sync.late)
    empty: list[tuple[str, str]] = field(default_factory=list)
    # (session, turn) pairs to revisit that are no longer in the session's history: not built
    left: list[tuple[str, str]] = field(default_factory=list)

    def not_written(self) -> int:
        """Turns considered that made no document to write (skipped, pending)."""
        return max(0, self.considered - len({d.path for d in self.docs}))


def build_sessions(
    ix: Indexer,
    reader: LedgerReader,
    persona: str,
    sessions: Sequence[SessionRow],
    step: Step,
    *,
    pass_holders: dict[str, set[str]] | None = None,
    learned: StagedMemory | None = None,
) -> Built:
    """Documents for ``sessions`` (and for ``step.turns``: (session, turn) pairs
    to revisit), in a fixed number of ledger queries (more when a secret found in
    one turn must be masked in turns already indexed: :mod:`indexer.sync.secret_spread`).

    ``step`` (a value of the pass's plan, :mod:`indexer.sync.work`) says what is built:
    ``NEW_TURNS`` skips turns already indexed for that session (a done turn is built once; one
    given a message later comes back as a turn of the step: :mod:`indexer.sync.late`);
    ``EVERY_TURN`` builds every turn. A revisited turn that left the session's
    history (rewound, the session deleted or moved) is not built: ``Built.left``.
    Secret values found in one turn are masked in the session's other turns and in every copy
    of them (:mod:`indexer.sync.secret_spread`): documents already indexed come back here
    when a new value turns up. What the build learned is in ``Built.learned`` (``learned``: a
    staging shared by a rebuild's batches), to commit once the documents are written.
    ``pass_holders``: turn → sessions built earlier in this pass but not recorded in the state
    DB yet (a rebuild's), kept up to date. ``step.recheck``: sessions a build of another persona
    found values for: they take what is owed and read their other-persona co-holders' values again.
    """
    only_new, extra_turns, recheck = step.only_new, step.turns, step.recheck
    out = Built()
    by_label = {s.label: s for s in sessions}
    threads = reader.threads(s.thread_id for s in sessions)
    wanted: dict[str, list[str]] = {}
    unreadable: list[str] = []
    for s in sessions:
        thread = threads.get(s.thread_id)
        if thread is None:
            out.skips.append(Skip(SkipReason.MISSING_THREAD, s.label, s.thread_id,
                                  f"session head {s.thread_id} has no threads row"))
            unreadable.append(s.label)
            continue
        ancestry = head_history(reader, thread, s.thread_id)
        if ancestry is None:
            out.skips.append(Skip(SkipReason.BAD_ANCESTRY, s.label, s.thread_id,
                                  "threads.ancestry is not a JSON array of turn ids" if thread.ancestry_json is not None
                                  else "threads.ancestry is NULL and the turns' parents do not lead to a root"))
            unreadable.append(s.label)
            continue
        out.ancestry[s.label] = ancestry
        if only_new:
            # Turns recorded as bad are retried whenever their session moves
            # (new history row) and by `sync --retry-bad`: nothing stays dropped.
            known = ix.state.indexed_turns(persona, s.label)
            wanted[s.label] = [t for t in ancestry if t not in known]
        else:
            wanted[s.label] = list(dict.fromkeys(ancestry))
    # A turn to revisit (pending, or given a late message) that left its session's history (rewound,
    # the session deleted or moved to another persona) is not built; done with it (``Built.left``).
    extra_pairs = list(dict.fromkeys(extra_turns))
    if not only_new:
        # A whole build (backfill, rebuild) keeps the documents it cannot place: the turns indexed
        # before for a session whose head cannot be read are built again from their own rows (the
        # head itself is a bad row, retried when it changes). Left out, they were deleted as stale.
        for label in unreadable:
            kept = sorted(ix.state.indexed_turns(persona, label))
            extra_pairs.extend((label, t) for t in kept if (label, t) not in extra_pairs)
            if kept:
                log.warning("session.head_unreadable", persona=persona, session=label, turns_kept=len(kept),
                            action="its indexed turns are built from their own rows until the head is mended")
    current = session_histories(reader, persona, sorted({lb for lb, _ in extra_pairs if lb not in out.ancestry}))
    extra: set[tuple[str, str]] = set()
    for label, turn_id in extra_pairs:
        history = out.ancestry.get(label, current.get(label))
        if history == "gone" or (isinstance(history, list) and turn_id not in history):
            out.left.append((label, turn_id))
            continue
        extra.add((label, turn_id))
        wanted.setdefault(label, [])
        if turn_id not in wanted[label]:
            wanted[label].append(turn_id)
    out.considered = sum(len(ids) for ids in wanted.values())

    limit = ix.config.ledger.max_message_bytes
    rows = TurnRows(reader, limit)
    secrets = learned if learned is not None else ix.secrets.stage() if ix.secrets is not None else None
    out.learned = secrets
    histories = dict(out.ancestry)
    histories.update((label, h) for label, h in current.items() if isinstance(h, list))
    learn: dict[str, list[str]] = {}
    if secrets is not None:
        # Revisited turns (a streaming turn finished) are learned from with their session's history.
        found = session_histories(reader, persona, [label for label in wanted if label not in histories])
        histories.update((label, h) for label, h in found.items() if isinstance(h, list))
        learn = {label: secrets.unlearned(persona, label, anc) for label, anc in histories.items()}
    rows.read({t for ids in wanted.values() for t in ids} | {t for ids in learn.values() for t in ids})
    positions = {}
    if secrets is not None:
        spread = SecretSpread(ix, reader, persona, secrets, rows, histories, pass_holders).run(learn, recheck)
        out.rechecked = sorted(set(recheck) | spread.took)
        for label, tids in spread.again.items():
            ids = wanted.setdefault(label, [])
            ids.extend(t for t in tids if t not in ids)
        positions.update(spread.positions)

    positions.update({label: {t: i for i, t in enumerate(dict.fromkeys(anc))} for label, anc in histories.items()})
    for label in unreadable:  # their places from the turns' own thread rows
        placed = positions.setdefault(label, {})
        placed.update({t: i for t, i in turn_positions(reader, [t for t in wanted.get(label, ()) if t not in placed]).items()})
    # The turn before each one built (its document opens with that turn's first words:
    # indexer.core.documents.turn_context), read with the others when a tail left it out. Not
    # when a session of the persona was created between the two turns: a fork's first turn never
    # carries words of the session it was forked from (maybe a private one), and the rule depends
    # on the turns alone, so every fork's copy of a turn reads the same.
    before = {label: dict(zip(anc[1:], anc)) for label, anc in histories.items()}
    rows.read({b for label, ids in wanted.items() for t in ids if (b := before.get(label, {}).get(t))})
    born = sorted(r.created_at for r in reader.sessions(persona=persona)) if wanted else []
    for label, ids in wanted.items():
        session = by_label.get(label)
        redact = secrets.redact(persona, label) if secrets is not None else ix.redact
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
                    b = before.get(label, {}).get(tid)
                    said = b is not None and rows.text(b) is not None and rows.turns[b].turn_type != "compaction" \
                        and _one_speaker(born, rows.turns[b].started_at, turn.started_at)
                    result = turn_document(persona_of, label, turn, rows.messages.get(tid, []), redact=redact,
                                           max_message_bytes=limit,
                                           previous=rows.messages.get(b, []) if said and b else None)
            except Exception as exc:  # one bad row never stops a sync
                result = Skip(SkipReason.INVALID_ROW, label, tid, f"{type(exc).__name__}: {exc}")
            if isinstance(result, Skip):
                out.skips.append(result)
                continue
            if result is None:
                out.empty.append((label, tid))
            else:
                out.docs.append(replace(result, turn_seq=positions.get(label, {}).get(tid)))
    # Read in the caller's snapshot, with the rows the skips were decided on.
    out.fingerprints = reader.turn_fingerprints(s.turn_id for s in out.skips if s.turn_id)
    return out


def _one_speaker(born: Sequence[int], previous_ms: int, this_ms: int) -> bool:
    """No session was created (a fork included) after the previous turn started and by the time this
    one started, so both were said by the same session; unknown times: not known to be."""
    if not previous_ms or not this_ms or previous_ms > this_ms:
        return False
    i = bisect.bisect_right(born, previous_ms)
    return i == len(born) or born[i] > this_ms
