"""Revisits: the sessions and turns a pass builds again with no new history row naming them, each
with its reason — a turn that was still streaming, a turn given a late message, a bad row repaired
in place (or ``--retry-bad``), a session owed secret values by another persona's build — as typed
:class:`Revisit` values decided by pure functions (:func:`turn_revisits`, :func:`repaired`,
:func:`owed_sessions`), then built. Sessions that are live again, moved here or first seen here
are the registry's (:mod:`indexer.sync.registry`); all of them are queued in the state DB's one
revisit queue (``StateDB.revisits``) until built.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from enum import StrEnum

import structlog

from indexer.state.db import now_ms
from indexer.sync import build
from indexer.sync.commit import commit_state
from indexer.sync.context import Indexer
from indexer.sync.progress import Progress
from indexer.sync.quiet import LedgerStamp
from indexer.sync.summary import PersonaSummary, check_stop
from indexer.sync.writes import live_targets, write_in_parts
from ledger.reader import LedgerReader

log = structlog.get_logger("indexer.sync")


class RevisitWhy(StrEnum):
    PENDING_TURN = "pending_turn"  # not done when last built
    LATE_MESSAGE = "late_message"  # built before, given a message since (indexer.sync.late)
    BAD_ROW_REPAIRED = "bad_row_repaired"  # a bad turn whose ledger rows changed in place
    BAD_ROW_REQUESTED = "bad_row_requested"  # sync --retry-bad
    OWED_SECRET = "owed_secret"  # another persona's build found secret values its documents hold


@dataclass(frozen=True, slots=True)
class Revisit:
    session: str
    turn: str  # '' for the whole session
    why: RevisitWhy


def turn_revisits(pending: Iterable[tuple[str, str]], late: Iterable[tuple[str, str]],
                  deleted: Iterable[str]) -> tuple[Revisit, ...]:
    """The turns a tail builds again: those still pending when last built, then those given a late
    message (not pending too), none of a deleted session. Pure."""
    gone = set(deleted)
    out = {(s, t): Revisit(s, t, RevisitWhy.PENDING_TURN) for s, t in pending if s not in gone}
    for s, t in late:
        if s not in gone:
            out.setdefault((s, t), Revisit(s, t, RevisitWhy.LATE_MESSAGE))
    return tuple(out.values())


def repaired(items: Iterable[tuple[str, str, str]], now: Mapping[str, str],
             deleted: Iterable[str]) -> tuple[Revisit, ...]:
    """Of bad (session, turn, fingerprint when it failed), those whose rows' fingerprint is another
    now (``now``: by turn): built again, unless their session was deleted. Pure."""
    gone = set(deleted)
    return tuple(Revisit(s, t, RevisitWhy.BAD_ROW_REPAIRED) for s, t, f in items if now.get(t) != f and s not in gone)


def requested(bad: Iterable[tuple[str, str]], deleted: Iterable[str]) -> tuple[Revisit, ...]:
    """``--retry-bad``: every session holding a bad turn, but deleted ones. Pure."""
    gone = set(deleted)
    return tuple(Revisit(s, "", RevisitWhy.BAD_ROW_REQUESTED) for s in sorted({s for s, _t in bad} - gone))


def owed_sessions(owing: Iterable[str], recorded: Iterable[str]) -> tuple[Revisit, ...]:
    """Sessions owed secret values: this process's (``owing``) and those an earlier one recorded. Pure."""
    return tuple(Revisit(s, "", RevisitWhy.OWED_SECRET) for s in sorted(set(owing) | set(recorded)))


BAD_CHECKS_PER_PASS = 200  # bad turns whose rows are compared per pass (least recently compared first)


def bad_rows_changed(ix: Indexer, reader: LedgerReader, persona: str, deleted: Set[str],
                      stamp: LedgerStamp | None) -> list[str]:
    """Sessions holding a bad turn whose ledger rows changed since it failed
    (repaired in place: no history row says so). Compares at most
    BAD_CHECKS_PER_PASS fingerprints a pass, rotating through a longer list;
    when they all fit, a pass writes nothing. Once every bad turn was compared
    with the ledger files as they are (``stamp``), passes skip the comparison
    until the files change (:mod:`indexer.sync.quiet`)."""
    if ix.quiet.unchanged("bad", persona, stamp):
        return []
    started = ix.quiet.rotation_start_ms(persona, stamp, now_ms())
    items = ix.state.bad_to_check(persona, BAD_CHECKS_PER_PASS)
    if not items:
        ix.quiet.ran("bad", persona, stamp)
        return []
    with reader.snapshot():
        now = reader.turn_fingerprints(t for _s, t, _f in items)
    if len(items) == BAD_CHECKS_PER_PASS:
        with ix.state.atomic():  # later than `started`: what was compared before it stays older
            ix.state.mark_bad_checked(persona, [(s, t) for s, t, _f in items], at=max(now_ms(), started + 1))
        if (ix.state.oldest_bad_check(persona) or 0) > started:  # a whole rotation at this stamp
            ix.quiet.ran("bad", persona, stamp)
    else:
        ix.quiet.ran("bad", persona, stamp)
    return sorted({r.session for r in repaired(items, now, deleted)})


def rebuild_bad(ix: Indexer, reader: LedgerReader, persona: str, summary: PersonaSummary, labels: Sequence[str],
               why: str, stop: threading.Event | None, progress: Progress | None) -> None:
    """Build the sessions holding bad turns again, now (their bad turns included)."""
    if not labels:
        return
    before = ix.state.bad_count(persona)
    build_now(ix, reader, persona, summary, labels, stop, progress)
    summary.bad_retried += len(labels)
    log.info("sync.bad_retried", persona=persona, why=why, sessions=len(labels),
             still_bad=ix.state.bad_count(persona), were_bad=before)


def build_now(ix: Indexer, reader: LedgerReader, persona: str, summary: PersonaSummary, labels: Sequence[str],
               stop: threading.Event | None, progress: Progress | None) -> None:
    """Build ``labels`` (live sessions of ``persona``) now: every turn not indexed for them yet,
    and their bad turns. In batches of SESSIONS_PER_BATCH (a whole persona may arrive at once)."""
    labels = sorted(set(labels))
    size = build.SESSIONS_PER_BATCH
    for start in range(0, len(labels), size):
        check_stop(stop)
        with reader.snapshot():
            current = [s for s in reader.sessions(labels=labels[start:start + size], persona=persona)
                       if s.status != "deleted"]
            built = build.build_sessions(ix, reader, persona, current, only_new=True)
        write_in_parts(ix, persona, built.docs, live_targets(ix, persona), summary, skip_unchanged=True,
                       stop=stop, progress=progress)
        commit_state(ix, persona, summary, built, set(), None)


def write_owed(ix: Indexer, reader: LedgerReader, persona: str, summary: PersonaSummary, deleted: Set[str],
                stop: threading.Event | None, progress: Progress | None) -> None:
    """Sessions a build of another persona found secret values for (in turns they hold: a
    subagent's fork and its parent): build them, so their documents holding one are rewritten."""
    if ix.secrets is None:
        return
    # Recorded in the state DB by a build of an earlier process (this one's are in its memory too):
    # read until this process has built them once.
    recovering = not ix.secrets.recovered(persona)
    recheck = ix.state.secret_rechecks(persona) if recovering else set()
    owed = [r.session for r in owed_sessions(ix.secrets.owing(persona), recheck)]
    if not owed:
        if recovering:
            ix.secrets.recovered(persona, True)
        return
    with reader.snapshot():
        current = [s for s in reader.sessions(labels=owed, persona=persona) if s.status != "deleted"]
        built = build.build_sessions(ix, reader, persona, current, only_new=True, recheck=owed)
    gone = sorted(set(owed) - {s.label for s in current} | (set(owed) & deleted))
    ix.secrets.forget_owed(persona, gone)
    built.rechecked = sorted(set(built.rechecked) | set(gone))
    write_in_parts(ix, persona, built.docs, live_targets(ix, persona), summary, skip_unchanged=True, stop=stop,
                   progress=progress)
    commit_state(ix, persona, summary, built, set(), None)
    ix.secrets.recovered(persona, True)
