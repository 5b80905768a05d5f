"""A tail pass, carried out from its plan (:mod:`indexer.sync.tail_plan`): read the changes, plan,
then purge and queue (one transaction), then each build step in turn — build, write to the sinks,
commit hashes, queue and cursor in one state transaction. Sinks are idempotent upserts by path and
hash, and only the state commit moves anything on: a kill between a write and its commit replays
the step, neither losing nor duplicating a document.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass

import structlog

from indexer.sync import build
from indexer.sync.commit import commit_state, stale_paths
from indexer.sync.context import Indexer
from indexer.sync.progress import Progress
from indexer.sync.quiet import LedgerStamp
from indexer.sync.registry import purge_sinks, record, writes_state
from indexer.sync.summary import PersonaSummary, check_stop
from indexer.sync.tail_plan import TailChanges, TailPlan, make_plan, read_changes
from indexer.sync.work import NEW_TURNS, TO_BUILD_REASONS, Revisit, RevisitWhy, Step, StepKind, sessions_of
from indexer.sync.writes import live_targets, write_batch, write_in_parts
from ledger.reader import LedgerReader
from ledger.rows import SessionRow

log = structlog.get_logger("indexer.sync")

HISTORY_ROWS_PER_BATCH = 2000


def run_tail(ix: Indexer, reader: LedgerReader, persona: str, cursor: int, summary: PersonaSummary,
             stop: threading.Event | None, progress: Progress | None, *, retry_bad: bool = False,
             stamp: LedgerStamp | None = None) -> TailPlan:
    """Read, plan and carry out ``persona``'s tail from ``cursor`` to ``summary.head``; returns the plan.
    One loop carries out every build of the plan, batch by batch: build, write, commit."""
    changes = read_changes(ix, reader, persona, cursor, summary.head, retry_bad=retry_bad, stamp=stamp)
    plan = make_plan(changes)
    live = live_targets(ix, persona)
    _commit_plan(ix, changes, plan, summary)
    summary.cursor = cursor
    batches = _batches(ix, reader, plan, summary, stamp)
    while plan.has_work():  # (a pass with nothing to do opens no read transaction)
        check_stop(stop)
        with reader.snapshot():  # a batch's sessions are read in the snapshot its documents are built in
            batch = next(batches, None)
            if batch is None:
                break
            built = build.build_sessions(ix, reader, persona, batch.sessions, step=batch.step)
        built.rechecked = sorted(set(built.rechecked) | set(batch.rechecked))
        write_in_parts(ix, persona, built.docs, live, summary, skip_unchanged=True, stop=stop, progress=progress)
        stale = stale_paths(ix, persona, built) if batch.cursor is not None else set()
        if stale:  # documents of turns that left their session's ancestry (a rewind)
            write_batch(ix, persona, [], stale, live, skip_unchanged=True)
        commit_state(ix, persona, summary, built, stale, batch.cursor, cleared=batch.cleared)
        summary.documents_deleted += len(stale)
        if progress is not None and batch.cursor is not None:
            progress.advanced(persona, built.not_written())
    if ix.secrets is not None:
        ix.secrets.recovered(persona, True)  # what an earlier process recorded as owed is built
    return plan


@dataclass(frozen=True, slots=True)
class Batch:
    """One build of a tail: the sessions it is given and the :class:`~indexer.sync.work.Step`;
    the plan's revisits whose queue rows go with its commit (``cleared``); sessions owed values that are
    gone (``rechecked``: their rows go too); the cursor after it (history batches only)."""

    sessions: list[SessionRow]
    step: Step
    cleared: tuple[Revisit, ...] = ()
    rechecked: tuple[str, ...] = ()
    cursor: int | None = None


def _commit_plan(ix: Indexer, changes: TailChanges, plan: TailPlan, summary: PersonaSummary) -> None:
    """The sinks drop what the plan purges; then one transaction records the registry's changes,
    queues what the plan builds with no history row naming it, and keeps the late-message mark."""
    persona = plan.persona
    purged: dict[str, set[str]] = {}
    if changes.registry is not None:
        facts, registry = changes.registry
        purged = purge_sinks(ix, persona, facts, registry, summary)
    mark_moved = plan.late_mark is not None and ix.state.late_mark(persona) != plan.late_mark.checkpoints
    registry_writes = plan.registry is not None and writes_state(plan.registry, purged)
    if not (registry_writes or plan.queue_late or plan.drop_late or mark_moved):
        return  # nothing new: a pass with nothing to do writes nothing
    with ix.state.atomic():
        if plan.registry is not None:
            record(ix, persona, plan.registry, purged)
        ix.state.queue_late(persona, plan.queue_late)
        ix.state.clear_late(persona, plan.drop_late)
        if mark_moved:  # (read before: a read in a write transaction cannot become a write once another commits)
            assert plan.late_mark is not None
            ix.state.set_late_mark(persona, plan.late_mark.checkpoints)
    if plan.drop_late:
        log.info("late.dropped", persona=persona, reason="session_gone", turns=len(plan.drop_late))


def _live(reader: LedgerReader, persona: str, labels: list[str]) -> list[SessionRow]:
    return [s for s in reader.sessions(labels=labels, persona=persona) if s.status != "deleted"]


def _batches(ix: Indexer, reader: LedgerReader, plan: TailPlan, summary: PersonaSummary,
             stamp: LedgerStamp | None) -> Iterator[Batch]:
    """The plan's builds, in order, as batches; each is read when asked for (in the caller's snapshot),
    after the one before was committed.

    1. whole sessions (live again, moved here, queued, bad rows): SESSIONS_PER_BATCH at a time (a whole
       persona may arrive at once), every turn not indexed for them yet and their bad turns;
    2. sessions owed secret values found by another persona's build (a subagent's fork and its parent);
    3. turns still pending when last built, or given a message since (when the ledger files changed);
    4. the history rows after the cursor, HISTORY_ROWS_PER_BATCH at a time (memory stays bounded on a
       long tail): each batch's sessions' new turns, committed with the cursor moved past it."""
    persona = plan.persona
    labels = sessions_of(plan.sessions)
    by_label = {r.session: r for r in plan.sessions}
    bad = plan.bad_sessions()
    before = ix.state.bad_count(persona) if bad else 0
    size = build.SESSIONS_PER_BATCH
    for start in range(0, len(labels), size):
        part = labels[start:start + size]
        yield Batch(_live(reader, persona, part), NEW_TURNS, cleared=tuple(by_label[label] for label in part))
    summary.sessions += sum(1 for r in plan.sessions if r.why in TO_BUILD_REASONS)
    if bad:
        summary.bad_retried += len(bad)
        log.info("sync.bad_retried", persona=persona,
                 why="requested" if plan.why(bad[0]) is RevisitWhy.BAD_ROW_REQUESTED else "rows_changed",
                 sessions=len(bad), still_bad=ix.state.bad_count(persona), were_bad=before)
    if plan.owed and ix.secrets is not None:
        owed = sessions_of(plan.owed)
        current = _live(reader, persona, owed)
        gone = sorted(set(owed) - {s.label for s in current} | (set(owed) & plan.deleted))
        ix.secrets.forget_owed(persona, gone)  # nothing to write for them
        yield Batch(current, Step(StepKind.NEW_TURNS, plan.owed), rechecked=tuple(gone))
    if plan.registry is not None:  # turns are revisited only when the ledger files changed
        for r in plan.turns:
            if r.why is RevisitWhy.LATE_MESSAGE:
                log.info("turn.late_message", persona=persona, session=r.session, turn=r.turn)
        if plan.turns:
            yield Batch([], Step(StepKind.NEW_TURNS, plan.turns), cleared=plan.turns)
        ix.quiet.ran("sessions", persona, stamp)
    position, head = plan.history or (plan.cursor, plan.cursor)
    while position < head:
        rows = reader.history_after(position, upto=head, persona=persona, limit=HISTORY_ROWS_PER_BATCH)
        batch_end = rows[-1].id if len(rows) == HISTORY_ROWS_PER_BATCH else head
        latest_first = list(dict.fromkeys(r.session_label for r in reversed(rows)))
        current = history_batch(latest_first, reader.sessions(history_range=(position, batch_end), persona=persona))
        summary.sessions += len(current)
        yield Batch(current, NEW_TURNS, cursor=batch_end)
        position = batch_end
    summary.cursor = position


def history_batch(labels_latest_first: list[str], sessions: list[SessionRow]) -> list[SessionRow]:
    """Of the sessions with history rows in a batch (their reason: ``NEW_HISTORY``), the live ones,
    the latest written first. Pure."""
    order = {label: i for i, label in enumerate(labels_latest_first)}
    return sorted((s for s in sessions if s.status != "deleted"), key=lambda s: order.get(s.label, len(order)))


__all__ = ["HISTORY_ROWS_PER_BATCH", "history_batch", "run_tail"]
