"""The plan of a pass, per persona: which mode it runs in and why, decided by a pure function of
what the ledger and the state say (:class:`PersonaFacts`), before any of it is done.

``gather`` reads the facts (a few primary-key lookups: a no-op pass stays free); :func:`decide`
turns them into a :class:`PersonaPlan` that tests can assert on directly; :func:`log_plan` says
what an operator must know about it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

import structlog

from indexer.state.db import Position
from indexer.sync.context import Indexer
from ledger.reader import LedgerReader

log = structlog.get_logger("indexer.sync")


class PassMode(StrEnum):
    TAIL = "tail"  # the history rows after the cursor, and the revisit queue
    BACKFILL = "backfill"  # every session of the persona (unchanged documents skipped by hash)
    REBUILD = "rebuild"  # every session, into a new generation of every sink, switched in when complete


class Why(StrEnum):
    """Why a persona's pass runs in its mode."""

    CURSOR = "cursor"  # a tail from a cursor that holds
    FORCED = "forced"  # reindex asked for it
    BUILD_CHANGED = "build_changed"  # redaction, embedding model, chunking or sinks differ from the index's
    SINK_WANTS_REBUILD = "sink_wants_rebuild"  # a sink's own layout changed
    SINK_LOST = "sink_lost"  # the state lists documents a sink no longer holds at all
    NO_CURSOR = "no_cursor"  # first pass of the persona
    LEDGER_REPLACED = "ledger_replaced"  # another ledger file sits at the path: its ids mean nothing here
    BACKFILL_DUE = "backfill_due"  # recorded by an earlier pass (the ledger's messages renumbered)
    LEDGER_REWOUND = "ledger_rewound"  # the head is below the cursor
    IDS_REUSED = "ids_reused"  # the row at the cursor is another one: ids below it were reused


@dataclass(frozen=True, slots=True)
class PersonaFacts:
    """What the plan of one persona depends on, read before anything is done."""

    persona: str
    head: int  # the ledger's newest session_history id
    position: Position | None  # the state's cursor
    force: bool = False
    ledger_replaced: bool = False
    build_changed: tuple[str, ...] = ()  # what differs from the index's build identity (nothing before one)
    sink_wants_rebuild: bool = False
    sinks_lost: tuple[str, ...] = ()  # why, per sink that no longer holds the persona at all
    backfill_due: str | None = None
    row_at_cursor: str | None = None  # digest of the ledger's row at the cursor now (read when one is kept)


@dataclass(frozen=True, slots=True)
class PersonaPlan:
    """What a pass will do for one persona, decided before any of it is done."""

    persona: str
    mode: PassMode
    why: Why
    cursor: int | None
    head: int
    cursor_row: Position | None = None  # the cursor's position found intact (tail only)
    detail: tuple[str, ...] = ()  # what changed (BUILD_CHANGED), which sinks were lost (SINK_LOST)


def decide(f: PersonaFacts) -> PersonaPlan:
    """The mode of ``f.persona``'s pass, and why. Pure."""
    cursor = f.position.history_id if f.position is not None else None

    def plan(mode: PassMode, why: Why, detail: tuple[str, ...] = (), intact: Position | None = None) -> PersonaPlan:
        return PersonaPlan(f.persona, mode, why, cursor, f.head, intact, detail)

    if f.force:
        return plan(PassMode.REBUILD, Why.FORCED)
    if f.sinks_lost:
        return plan(PassMode.REBUILD, Why.SINK_LOST, f.sinks_lost)
    if f.sink_wants_rebuild:
        return plan(PassMode.REBUILD, Why.SINK_WANTS_REBUILD)
    if cursor is not None and f.build_changed:
        return plan(PassMode.REBUILD, Why.BUILD_CHANGED, f.build_changed)
    if f.position is None:  # (exactly when cursor is None)
        return plan(PassMode.BACKFILL, Why.LEDGER_REPLACED if f.ledger_replaced else Why.NO_CURSOR)
    if f.backfill_due:
        return plan(PassMode.BACKFILL, Why.BACKFILL_DUE, (f.backfill_due,))
    if not f.position.valid_at(f.head):
        return plan(PassMode.BACKFILL, Why.LEDGER_REWOUND)
    if f.position.row is not None and f.row_at_cursor != f.position.row:
        return plan(PassMode.BACKFILL, Why.IDS_REUSED)
    return plan(PassMode.TAIL, Why.CURSOR, intact=f.position if f.position.row is not None else None)


def gather(ix: Indexer, reader: LedgerReader, persona: str, *, force: bool, ledger_replaced: bool) -> PersonaFacts:
    """The facts :func:`decide` needs. The ledger's row at the cursor is read only when the plan
    can get as far as comparing it (one primary-key lookup a tail)."""
    record = ix.state.persona_record(persona)  # one lookup: a no-op pass asks every pass
    position = record.position
    head = reader.head_id()
    lost: tuple[str, ...] = ()
    if not force and position is not None and ix.state.has_documents(persona):
        # The state DB lists documents a sink no longer holds at all (its folder deleted, another
        # index location configured): hash skips would write nothing and search would stay empty.
        lost = tuple(why for sink in ix.sinks if (why := sink.missing(persona)))
    facts = PersonaFacts(
        persona, head, position, force=force, ledger_replaced=ledger_replaced,
        build_changed=tuple(ix.build_identity.differences(record.build_identity)),
        sink_wants_rebuild=any(sink.needs_rebuild(persona) for sink in ix.sinks), sinks_lost=lost,
        backfill_due=record.backfill_due if position is not None else None)
    if decide(facts).why is Why.IDS_REUSED:  # not read yet: the plan got as far as comparing it
        assert position is not None  # decide() reaches IDS_REUSED only from a kept position
        facts = replace(facts, row_at_cursor=reader.history_row_fingerprint(position.history_id))
    return facts


def log_plan(plan: PersonaPlan) -> None:
    """The events an operator reads for a plan that is not a plain tail or first backfill."""
    p = plan.persona
    if plan.why is Why.SINK_LOST:
        log.warning("index.lost", persona=p, sinks=list(plan.detail), action="rebuilding the persona from the ledger")
    elif plan.why is Why.BUILD_CHANGED:
        log.info("index.build_changed", persona=p, changed=list(plan.detail))
    elif plan.why is Why.BACKFILL_DUE:
        log.info("index.backfill_due", persona=p, why=plan.detail[0])
    elif plan.why is Why.LEDGER_REWOUND:
        log.warning("ledger.rewound", persona=p, cursor=plan.cursor, head=plan.head)
    elif plan.why is Why.IDS_REUSED:
        log.warning("ledger.ids_reused", persona=p, cursor=plan.cursor, head=plan.head)


__all__ = ["PassMode", "PersonaFacts", "PersonaPlan", "Why", "decide", "gather", "log_plan"]
