"""Revisits: the sessions and turns a tail builds again with no new history row naming them, each
with its reason — a turn that was still streaming, a turn given a late message, a bad row repaired
in place (or ``--retry-bad``), a session owed secret values by another persona's build — as typed
:class:`~indexer.sync.work.Revisit` values decided by pure functions (:func:`turn_revisits`,
:func:`repaired`, :func:`requested`, :func:`owed_sessions`), which the tail's plan
(:mod:`indexer.sync.tail_plan`) gathers. Sessions that are live again, moved here or first seen here
are the registry's (:mod:`indexer.sync.registry`). What must outlive the pass waits in the state DB's
one revisit queue (``StateDB.revisits``) until built.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from indexer.state.db import now_ms
from indexer.sync.context import Indexer
from indexer.sync.quiet import LedgerStamp
from indexer.sync.work import Revisit, RevisitWhy
from ledger.reader import LedgerReader


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


def compare_bad(ix: Indexer, reader: LedgerReader, persona: str,
                stamp: LedgerStamp | None) -> tuple[list[tuple[str, str, str]], dict[str, str]]:
    """(bad turns compared this pass: (session, turn, digest when it failed); their digests now), for
    :func:`repaired` (a bad turn repaired in place: no history row says so). Compares at most
    BAD_CHECKS_PER_PASS a pass, rotating through a longer list; when they all fit, a pass writes
    nothing. Once every bad turn was compared with the ledger files as they are (``stamp``), passes
    skip the comparison until the files change (:mod:`indexer.sync.quiet`)."""
    if ix.quiet.unchanged("bad", persona, stamp):
        return [], {}
    started = ix.quiet.rotation_start_ms(persona, stamp, now_ms())
    items = ix.state.bad_to_check(persona, BAD_CHECKS_PER_PASS)
    if not items:
        ix.quiet.ran("bad", persona, stamp)
        return [], {}
    with reader.snapshot():
        now = reader.turn_fingerprints(t for _s, t, _f in items)
    if len(items) == BAD_CHECKS_PER_PASS:
        with ix.state.atomic():  # later than `started`: what was compared before it stays older
            ix.state.mark_bad_checked(persona, [(s, t) for s, t, _f in items], at=max(now_ms(), started + 1))
        if (ix.state.oldest_bad_check(persona) or 0) > started:  # a whole rotation at this stamp
            ix.quiet.ran("bad", persona, stamp)
    else:
        ix.quiet.ran("bad", persona, stamp)
    return items, now


__all__ = ["BAD_CHECKS_PER_PASS", "Revisit", "RevisitWhy", "compare_bad", "owed_sessions", "repaired", "requested",
           "turn_revisits"]
