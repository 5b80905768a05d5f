"""The plan of a tail pass as one value: which sessions it builds, leaves, purges or revisits, and
why, decided by a pure function (:func:`make_plan`) of what one read of the ledger and the state gave
(:class:`TailChanges`, read by :func:`read_changes`) before anything is built.

The engine then carries the plan out in this order (:mod:`indexer.sync.engine`): the sinks drop what
it purges, and one state transaction records the registry's changes, queues what it will build with
no history row naming it (sessions live again or moved here; turns given a late message) and keeps the
late-message mark; then each build step — sessions, owed sessions, turns, the history rows in
batches — is built, written to the sinks and committed (hashes, queue rows cleared, cursor) in one
transaction. A kill anywhere leaves the queue and the cursor saying what is still to do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from indexer.sync.context import Indexer
from indexer.sync.late import LateMark, late_turns
from indexer.sync.quiet import LedgerStamp
from indexer.sync.registry import RegistryFacts, RegistryPlan, gather, plan_registry
from indexer.sync.revisit import compare_bad, owed_sessions, repaired, requested, turn_revisits
from indexer.sync.work import BAD_ROW_REASONS, Revisit, RevisitWhy
from ledger.reader import LedgerReader


@dataclass(frozen=True, slots=True)
class TailChanges:
    """What a tail's plan depends on: one read of the ledger (its sessions, the bad rows' digests, the
    messages after the late mark) and of the state (queue, registry), before anything is built."""

    persona: str
    cursor: int
    head: int
    #: the registry's facts and plan; None when the ledger files are as when they were last read
    #: (nothing can have moved: no pending turn finished, no message arrived either)
    registry: tuple[RegistryFacts, RegistryPlan] | None = None
    deleted: frozenset[str] = frozenset()  # state: sessions deleted (read when the registry is not)
    retry_bad: bool = False
    bad: tuple[tuple[str, str], ...] = ()  # state: every bad (session, turn) (read for --retry-bad)
    bad_compared: tuple[tuple[str, str, str], ...] = ()  # bad (session, turn, digest then) compared now
    bad_now: Mapping[str, str] = field(default_factory=dict)  # ledger: their digests now, by turn
    owing: tuple[str, ...] = ()  # this process: sessions owed secret values
    owed_recorded: tuple[str, ...] = ()  # state: sessions an earlier process recorded as owed
    pending: tuple[tuple[str, str], ...] = ()  # queue: turns still streaming when built
    late_queued: tuple[tuple[str, str], ...] = ()  # queue: turns found given a late message, not built yet
    late: tuple[tuple[str, str], ...] = ()  # ledger: turns built before given a message since
    late_mark: LateMark | None = None  # where the next pass reads messages from


@dataclass(frozen=True, slots=True)
class TailPlan:
    """What a tail pass does for one persona, in the order it does it. Every build is a
    :class:`Revisit` with its reason; the history rows after the cursor are read in batches
    (``history``), each building its sessions' new turns (reason ``NEW_HISTORY``)."""

    persona: str
    cursor: int
    head: int
    registry: RegistryPlan | None  # sessions registered, deleted, revived, moved (None: not refreshed)
    deleted: frozenset[str]  # deleted sessions: nothing of them is built
    leave: Mapping[str, str]  # label → the persona a session moved to (its documents here go)
    purge: Mapping[str, frozenset[str]]  # owner persona → sessions whose documents go
    sessions: tuple[Revisit, ...]  # whole sessions to build now: live again, moved here, queued, bad rows
    owed: tuple[Revisit, ...]  # sessions to build again for owed secret values (OWED_SECRET)
    turns: tuple[Revisit, ...]  # turns to build again: still pending, or given a late message
    history: tuple[int, int] | None  # (cursor, head): history rows to read in batches; None when none
    queue_late: tuple[tuple[str, str], ...]  # late turns to queue in the plan's transaction
    drop_late: tuple[tuple[str, str], ...]  # queued late turns of sessions gone: nothing to revisit
    late_mark: LateMark | None  # kept in the plan's transaction (None: not read this pass)

    @property
    def revisits(self) -> tuple[Revisit, ...]:
        """Everything built with no new history row naming it, in the order it is built."""
        return self.sessions + self.owed + self.turns

    def why(self, session: str, turn: str = "") -> RevisitWhy | None:
        """The reason ``session`` (or one of its turns) is built with no new history row, if it is."""
        return next((r.why for r in self.revisits if r.session == session and r.turn == turn), None)

    def bad_sessions(self) -> list[str]:
        return [r.session for r in self.sessions if r.why in BAD_ROW_REASONS]

    def has_work(self) -> bool:
        """Whether anything is built, or the ledger files changed (their checks are marked done)."""
        return bool(self.revisits or self.history is not None or self.registry is not None)

    def writes_plan(self) -> bool:
        """Whether the plan's own transaction has anything to record before the builds."""
        return bool(self.registry is not None or self.queue_late or self.drop_late or self.late_mark is not None)


def make_plan(c: TailChanges) -> TailPlan:
    """The plan of ``c.persona``'s tail. Pure: its inputs are what the ledger and the state said."""
    registry = c.registry[1] if c.registry is not None else None
    deleted = registry.deleted if registry is not None else c.deleted
    leave = dict(registry.moved_out) if registry is not None else {}
    gone = set(deleted) | set(leave)  # nothing of them is built here (a moved session: by its new persona)
    sessions: dict[str, Revisit] = {}
    if registry is not None:
        for label, why in sorted(registry.build.items()):
            sessions[label] = Revisit(label, "", RevisitWhy(why.value))
    bad = requested(c.bad, gone) if c.retry_bad else _by_session(repaired(c.bad_compared, c.bad_now, gone))
    for r in bad:
        sessions.setdefault(r.session, r)
    owed = owed_sessions(c.owing, c.owed_recorded)
    late_now = [p for p in c.late if p[0] not in gone]
    turns = turn_revisits(c.pending, [*c.late_queued, *late_now], gone) if c.registry is not None else ()
    return TailPlan(
        c.persona, c.cursor, c.head, registry, frozenset(deleted), leave,
        registry.purge if registry is not None else {},
        tuple(sessions.values()), owed, turns,
        (c.cursor, c.head) if c.cursor < c.head else None,
        queue_late=tuple(sorted(set(late_now) - set(c.late_queued))),
        drop_late=tuple(sorted(p for p in c.late_queued if p[0] in gone)),
        late_mark=c.late_mark)


def _by_session(revisits: tuple[Revisit, ...]) -> tuple[Revisit, ...]:
    """A bad turn's whole session is built again (its other unindexed turns with it): one each."""
    return tuple(Revisit(s, "", RevisitWhy.BAD_ROW_REPAIRED) for s in sorted({r.session for r in revisits}))


def read_changes(ix: Indexer, reader: LedgerReader, persona: str, cursor: int, head: int, *,
                 retry_bad: bool = False, stamp: LedgerStamp | None = None) -> TailChanges:
    """One read of what ``persona``'s tail plans from. With the ledger files as they were when the
    sessions were last read (:mod:`indexer.sync.quiet`), neither the sessions, the pending turns nor
    the messages are read again: a no-op pass stays a few primary-key lookups."""
    quiet = not retry_bad and ix.quiet.unchanged("sessions", persona, stamp)
    registry = None
    late_pairs: list[tuple[str, str]] = []
    mark = None
    pending: list[tuple[str, str]] = []
    late_queued: list[tuple[str, str]] = []
    if not quiet:
        with reader.snapshot():
            sessions = reader.sessions(persona=persona)
        facts = gather(ix, reader, persona, sessions, tail_from=cursor, head=head, rebuilding=False)
        registry = (facts, plan_registry(facts))
        late_pairs, mark = late_turns(ix, reader, persona)
        pending, late_queued = ix.state.pending(persona), ix.state.late_queued(persona)
    compared, now = ((), {}) if retry_bad else compare_bad(ix, reader, persona, stamp)
    recovering = ix.secrets is not None and not ix.secrets.recovered(persona)
    return TailChanges(
        persona, cursor, head, registry,
        deleted=frozenset(ix.state.deleted_sessions(persona)) if quiet else frozenset(),
        retry_bad=retry_bad, bad=tuple(ix.state.bad_items(persona)) if retry_bad else (),
        bad_compared=tuple(compared), bad_now=now,
        owing=tuple(ix.secrets.owing(persona)) if ix.secrets is not None else (),
        owed_recorded=tuple(sorted(ix.state.secret_rechecks(persona))) if recovering else (),
        pending=tuple(pending), late_queued=tuple(late_queued), late=tuple(late_pairs), late_mark=mark)


__all__ = ["TailChanges", "TailPlan", "make_plan", "read_changes"]
