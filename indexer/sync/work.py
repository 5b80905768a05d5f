"""The units of work a pass plans, as values: a :class:`Revisit` (a session or one turn, and why it is
built) and a :class:`Step` (what one call of :func:`indexer.sync.build.build_sessions` builds).

Nothing here reads or writes: :mod:`indexer.sync.tail_plan` decides these, the engine carries them out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class RevisitWhy(StrEnum):
    """Why a tail builds a session or a turn (every mechanism that brings work back, one enum)."""

    NEW_HISTORY = "new_history"  # a session_history row after the cursor names the session
    REVIVED = "revived"  # deleted before, live again (no history row says so)
    MOVED_HERE = "moved_here"  # another persona's before
    FIRST_SEEN = "first_seen"  # new here, with only older history (moved from a persona not synced)
    QUEUED = "queued"  # queued by a pass that stopped before building it (the revisit queue)
    BAD_ROW_REPAIRED = "bad_row_repaired"  # a bad turn whose ledger rows changed in place
    BAD_ROW_REQUESTED = "bad_row_requested"  # sync --retry-bad
    OWED_SECRET = "owed_secret"  # another persona's build found secret values its documents hold
    PENDING_TURN = "pending_turn"  # not done when last built
    LATE_MESSAGE = "late_message"  # built before, given a message since (indexer.sync.late)


#: reasons kept as ``to_build`` rows of the revisit queue until their session is built
TO_BUILD_REASONS = frozenset({RevisitWhy.REVIVED, RevisitWhy.MOVED_HERE, RevisitWhy.FIRST_SEEN, RevisitWhy.QUEUED})
BAD_ROW_REASONS = frozenset({RevisitWhy.BAD_ROW_REPAIRED, RevisitWhy.BAD_ROW_REQUESTED})


@dataclass(frozen=True, slots=True)
class Revisit:
    session: str
    turn: str  # '' for the whole session
    why: RevisitWhy


class StepKind(StrEnum):
    """Which turns one build step considers."""

    NEW_TURNS = "new_turns"  # of the sessions given, the turns not indexed yet (bad ones again too)
    EVERY_TURN = "every_turn"  # of the sessions given, every turn (a backfill, a rebuild, a visibility change)


@dataclass(frozen=True, slots=True)
class Step:
    """What one build considers, besides the sessions it is given: the turns to build again
    (:class:`Revisit` with a turn), and the sessions to read again for owed secret values."""

    kind: StepKind
    revisits: tuple[Revisit, ...] = ()

    @property
    def turns(self) -> list[tuple[str, str]]:
        """(session, turn) pairs to build again, whatever the kind."""
        return [(r.session, r.turn) for r in self.revisits if r.turn]

    @property
    def recheck(self) -> list[str]:
        """Sessions owed values found in another persona: they take them and read their co-holders again."""
        return [r.session for r in self.revisits if r.why is RevisitWhy.OWED_SECRET and not r.turn]

    @property
    def only_new(self) -> bool:
        return self.kind is StepKind.NEW_TURNS


NEW_TURNS = Step(StepKind.NEW_TURNS)
EVERY_TURN = Step(StepKind.EVERY_TURN)


def sessions_of(revisits: Iterable[Revisit]) -> list[str]:
    """The sessions named, sorted, once each."""
    return sorted({r.session for r in revisits})


__all__ = ["BAD_ROW_REASONS", "EVERY_TURN", "NEW_TURNS", "TO_BUILD_REASONS", "Revisit", "RevisitWhy", "Step",
           "StepKind", "sessions_of"]
