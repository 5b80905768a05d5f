"""The session registry's refresh, one step of a pass: every session's ledger status recorded; the
documents of deleted (or vanished) sessions purged, and another persona's of a session the ledger
now gives to this one; the sessions to build that no history row names queued.

:func:`plan_registry` decides all of it as a pure function of (the ledger's sessions, the state):
a :class:`RegistryPlan` that tests assert on directly; :func:`refresh_registry` gathers the facts,
then carries the plan out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import structlog

from indexer.sync.context import Indexer
from indexer.sync.summary import PersonaSummary
from ledger.reader import LedgerReader
from ledger.rows import SessionRow

log = structlog.get_logger("indexer.sync")


class BuildWhy(StrEnum):
    """Why a session is built with no history row naming it."""

    REVIVED = "revived"  # deleted before, live again
    MOVED_HERE = "moved_here"  # another persona's before
    FIRST_SEEN = "first_seen"  # new here, with only older history (moved from a persona not synced)
    QUEUED = "queued"  # found by a pass that failed before building it (the revisit queue)


@dataclass(frozen=True, slots=True)
class RegistryFacts:
    persona: str
    known: Mapping[str, str]  # state: label → ledger status, of this persona's registered sessions
    sessions: Sequence[tuple[str, str, str]]  # ledger: (label, persona, status) of this persona's sessions
    #: ledger: the persona each session that left this one lives under now (looked up for leaving(): once)
    elsewhere: Mapping[str, str] = field(default_factory=dict)
    #: state: the persona each session new here was registered to before
    registered_elsewhere: Mapping[str, str] = field(default_factory=dict)
    synced: frozenset[str] = frozenset()  # personas the config syncs (empty: every one)
    tail: bool = False  # a tail (its history loop builds sessions with new rows); else every session is built
    rebuilding: bool = False  # a forced rebuild: may stop before its switch, then a tail goes on
    with_new_history: frozenset[str] = frozenset()  # ledger: sessions with history rows after the cursor (tail)
    queued: frozenset[str] = frozenset()  # state: sessions queued to build
    pending: Sequence[tuple[str, str]] = ()  # state: turns queued as still streaming


@dataclass(frozen=True, slots=True)
class RegistryPlan:
    register: tuple[tuple[str, str, str], ...]  # (label, persona, status) rows that changed
    deleted: frozenset[str]  # sessions the ledger deleted (or no longer holds)
    revived: tuple[str, ...]
    moved_out: Mapping[str, str]  # label → the persona it lives under now
    unsynced: Mapping[str, str]  # moved out to a persona this index does not sync
    arrived: Mapping[str, str]  # label → the persona whose documents of it go
    build: Mapping[str, BuildWhy]  # sessions to build now, and why
    dropped_pending: tuple[tuple[str, str], ...]  # streaming turns of deleted sessions: nothing to revisit
    purge: Mapping[str, frozenset[str]]  # owner persona → sessions whose documents go

    @property
    def to_build(self) -> list[str]:
        return sorted(self.build)

    def changes_state(self) -> bool:
        return bool(self.register or any(self.purge.values()) or self.moved_out or self.arrived
                    or self.dropped_pending or self.build)


def leaving(known: Mapping[str, str], present: set[str]) -> list[str]:
    """Registered sessions the ledger no longer gives this persona, not deleted before: each may live
    on under another persona (looked up once, when it goes: not for every session long deleted)."""
    return sorted(label for label, status in known.items() if label not in present and status != "deleted")


def first_seen(known: Mapping[str, str], sessions: Sequence[tuple[str, str, str]]) -> set[str]:
    return {label for label, _, status in sessions if label not in known and status != "deleted"}


def plan_registry(f: RegistryFacts) -> RegistryPlan:
    """What the refresh does for ``f.persona``. Pure."""
    persona, known = f.persona, f.known
    present = {label for label, _, _ in f.sessions}
    missing = sorted(label for label in known if label not in present)
    moved_out = {label: other for label, other in f.elsewhere.items() if other != persona and label in missing}
    arrived = {label: other for label, other in f.registered_elsewhere.items()
               if other != persona and label in present and label not in known}
    # gone to a persona this index does not sync: no pass of that persona takes the registry row
    # over, so it goes with the session now, as no longer indexed ("deleted": built again wherever
    # it is synced next — back here, or there once that persona is synced)
    unsynced = {label: other for label, other in moved_out.items() if f.synced and other not in f.synced}
    rows = list(f.sessions)
    rows += [(label, persona, "deleted") for label in missing if label not in moved_out]
    rows += [(label, other, "deleted") for label, other in unsynced.items()]
    register = tuple(r for r in rows if known.get(r[0]) != r[2])
    deleted = frozenset(label for label, _, status in rows if status == "deleted")
    revived = tuple(sorted(label for label, _, status in f.sessions
                           if known.get(label) == "deleted" and status != "deleted"))
    new = first_seen(known, f.sessions)
    build: dict[str, BuildWhy] = {}
    if f.tail:  # those with history rows after the cursor are the history loop's to build
        build.update((label, BuildWhy.QUEUED) for label in f.queued)
        build.update((label, BuildWhy.MOVED_HERE if label in arrived else BuildWhy.FIRST_SEEN)
                     for label in new - f.with_new_history)
        build.update((label, BuildWhy.REVIVED) for label in revived)
    elif f.rebuilding:  # cleared at the rebuild's switch; built by the next tail if it never gets there
        build.update((label, BuildWhy.MOVED_HERE if label in arrived else BuildWhy.FIRST_SEEN) for label in new)
        build.update((label, BuildWhy.REVIVED) for label in revived)
    purge: dict[str, set[str]] = {persona: set(moved_out) | set(deleted)}
    for label, other in arrived.items():
        purge.setdefault(other, set()).add(label)
    return RegistryPlan(register, deleted, revived, moved_out, unsynced, arrived, build,
                        tuple((s, t) for s, t in f.pending if s in deleted),
                        {owner: frozenset(labels) for owner, labels in purge.items()})


def gather(ix: Indexer, reader: LedgerReader, persona: str, sessions: Sequence[SessionRow], *,
           tail_from: int | None, head: int, rebuilding: bool) -> RegistryFacts:
    known = ix.state.session_statuses(persona)
    rows = [(s.label, s.persona, s.status) for s in sessions]
    present = {s.label for s in sessions}
    if len(present) < len(sessions):  # labels that are not valid UTF-8 can read back the same
        seen = Counter(s.label for s in sessions)
        log.warning("ledger.label_collision", persona=persona, sessions=sorted(lb for lb, n in seen.items() if n > 1),
                    action="only one of the sessions each label names is indexed: give the others distinct labels")
    going = leaving(known, present)
    elsewhere = {s.label: s.persona for s in reader.sessions(labels=going)} if going else {}
    new_history: set[str] = set()
    if tail_from is not None and first_seen(known, rows):
        with reader.snapshot():
            new_history = {s.label for s in reader.sessions(history_range=(tail_from, head), persona=persona)}
    return RegistryFacts(
        persona, known, rows, elsewhere=elsewhere,
        registered_elsewhere=ix.state.registered_personas(present - set(known)),
        synced=frozenset(ix.config.ledger.personas), tail=tail_from is not None, rebuilding=rebuilding,
        with_new_history=frozenset(new_history),
        queued=frozenset(ix.state.sessions_to_build(persona)) if tail_from is not None else frozenset(),
        pending=ix.state.pending(persona))


def refresh_registry(ix: Indexer, reader: LedgerReader, persona: str, sessions: Sequence[SessionRow],
                     summary: PersonaSummary, *, rebuilding: bool = False) -> RegistryPlan:
    """Gather, plan and carry out the refresh of ``persona``'s sessions for a pass that builds every
    session (a backfill, a rebuild): none is queued to build, except that a forced ``rebuilding``
    queues the sessions live again or new here — it commits their registry rows now and may fail or
    stop before its switch. (A tail plans it with the rest of its pass: :mod:`indexer.sync.tail_plan`.)"""
    facts = gather(ix, reader, persona, sessions, tail_from=None, head=summary.head, rebuilding=rebuilding)
    plan = plan_registry(facts)
    purged = purge_sinks(ix, persona, facts, plan, summary)
    if writes_state(plan, purged):
        with ix.state.atomic():
            record(ix, persona, plan, purged)
    return plan


def purge_sinks(ix: Indexer, persona: str, facts: RegistryFacts, plan: RegistryPlan,
                summary: PersonaSummary) -> dict[str, set[str]]:
    """Delete from every sink the documents ``plan`` purges (before the state forgets them: a crash in
    between deletes them again); returns them, by owner persona, for :func:`record`."""
    left = {label: ix.state.paths(persona, session=label) for label in plan.moved_out}
    purge = {owner: set().union(*(ix.state.paths(owner, session=label) for label in labels))
             for owner, labels in plan.purge.items()}
    for owner, paths in purge.items():
        if paths:
            for sink in ix.sinks:
                sink.delete(owner, paths)
    summary.documents_deleted += sum(map(len, purge.values()))
    _log(persona, facts, plan, left)
    return purge


def writes_state(plan: RegistryPlan, purged: Mapping[str, set[str]]) -> bool:
    """Whether :func:`record` writes anything (a pass with nothing new writes nothing: every commit
    invalidates the scope-facts memo of every searcher). Sessions queued to build again are queued."""
    return bool(plan.register or any(purged.values()) or plan.moved_out or plan.arrived or plan.dropped_pending)


def record(ix: Indexer, persona: str, plan: RegistryPlan, purged: Mapping[str, set[str]]) -> None:
    """Record ``plan`` in the state DB: call inside the pass's plan transaction, once the sinks no
    longer hold what it purges (:func:`purge_sinks`). Writes nothing when nothing changed."""
    if not writes_state(plan, purged):
        return
    ix.state.register_sessions(plan.register)
    for owner, paths in purged.items():
        ix.state.forget_documents(owner, paths)
    # what the old persona kept of a session that moved (pending, bad, late and empty turns) goes too:
    # revisited there, it would be built as the old persona's
    ix.state.forget_sessions(persona, plan.moved_out)
    for label, other in plan.unsynced.items():  # its record of own turns goes with its row, at once
        ix.state.private.move(label, persona, other)
    for label, other in plan.arrived.items():
        ix.state.forget_sessions(other, [label])
        ix.state.private.move(label, other, persona)
    ix.state.add_sessions_to_build(persona, plan.build)  # cleared once built
    ix.state.clear_pending(persona, plan.dropped_pending)


def _log(persona: str, facts: RegistryFacts, plan: RegistryPlan, left: dict[str, set[str]]) -> None:
    for label, _, status in plan.register:
        # A status change is news; a session seen for the first time is not.
        if label in facts.known or status == "deleted":
            log.info("session.status", persona=persona, session=label, status=status, was=facts.known.get(label))
    for label, other in sorted(plan.moved_out.items()):
        if left[label]:  # its new persona's pass builds it (session.moved)
            log.info("session.left", persona=persona, session=label, to=other, documents_removed=len(left[label]))
    for label, other in sorted(plan.arrived.items()):  # logged once, by the persona that takes it over
        log.info("session.moved", persona=persona, session=label, was=other)
    if plan.dropped_pending:
        log.info("pending.dropped", persona=persona, reason="session_deleted", turns=len(plan.dropped_pending))


__all__ = ["BuildWhy", "RegistryFacts", "RegistryPlan", "gather", "plan_registry", "purge_sinks", "record",
           "refresh_registry"]
