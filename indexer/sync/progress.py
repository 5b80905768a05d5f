"""Progress of a sync pass, in documents: the work is counted before any of it is done.

A pass first *plans* every persona it will work on (how many turns it will
consider: every turn of every session for a backfill or a rebuild, the turns
not indexed yet of the sessions that moved for a tail), then *advances* as
each part is written. One unit, one total known from the start: a bar's rate
and ETA are honest from its first second (a bar created late, in sessions,
showed 83 % at once and rates of millions per second).

Pure: no I/O. :class:`ProgressTotals` is what the daemon's reindex job and the
CLI bar read; the engine only calls the :class:`Progress` methods.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol


class Progress(Protocol):
    """What :func:`indexer.sync.engine.sync_once` reports. Never raises into the pass."""

    def planned(self, documents: Mapping[str, int]) -> None:
        """Once, before any work of the pass: per persona, how many turns it will consider."""

    def advanced(self, persona: str, documents: int) -> None:
        """``documents`` more turns were considered (written, unchanged, skipped or left
        pending). ``0`` is a heartbeat: the pass is alive."""

    def finished(self, persona: str) -> None:
        """``persona``'s work in this pass is complete (its total becomes what was done)."""


@dataclass(frozen=True)
class PersonaProgress:
    done: int
    total: int

    @property
    def fraction(self) -> float:
        return 1.0 if self.total == 0 else min(1.0, self.done / self.total)


class ProgressTotals:
    """A :class:`Progress` that keeps the counts: per persona and overall.

    ``snapshot()`` returns a mapping that is replaced, never mutated (copy on
    write), so a reader on another thread holds one consistent state.
    ``on_change`` is called (outside the lock) after every update, with the
    new snapshot. A count is never above its total: a plan that came out
    low (a session that grew while the pass ran) is raised to what was done.
    """

    def __init__(self, on_change: Callable[[Mapping[str, PersonaProgress]], None] | None = None):
        self._lock = threading.Lock()
        self._state: dict[str, PersonaProgress] = {}
        self._on_change = on_change

    def snapshot(self) -> Mapping[str, PersonaProgress]:
        return self._state

    @property
    def done(self) -> int:
        return sum(p.done for p in self._state.values())

    @property
    def total(self) -> int:
        return sum(p.total for p in self._state.values())

    def _update(self, personas: Iterable[str], fn: Callable[[str, PersonaProgress], PersonaProgress]) -> None:
        with self._lock:
            state = dict(self._state)
            for persona in personas:
                state[persona] = fn(persona, state.get(persona, PersonaProgress(0, 0)))
            self._state = state
        if self._on_change is not None:
            self._on_change(state)

    def planned(self, documents: Mapping[str, int]) -> None:
        self._update(documents, lambda persona, p: PersonaProgress(
            p.done, max(p.done, p.total + max(0, documents[persona]))))

    def advanced(self, persona: str, documents: int) -> None:
        def step(_persona: str, p: PersonaProgress) -> PersonaProgress:
            done = p.done + max(0, documents)
            return PersonaProgress(done, max(p.total, done))

        self._update([persona], step)

    def finished(self, persona: str) -> None:
        self._update([persona], lambda _persona, p: PersonaProgress(p.done, p.done))
