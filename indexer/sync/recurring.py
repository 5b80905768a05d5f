"""Secrets found in one turn of a session, masked where they recur in its other turns.

The redactor masks a value a rule found (``the db password is X``) wherever it
recurs in the *same* text. A conversation repeats it in other turns (``connect
with X`` three turns later, or before the turn that named it) and in compaction
summaries. This memory holds, per session, the values found anywhere in its
history (its ancestry, inherited turns included), so each of its documents is
redacted with all of them; :mod:`indexer.sync.build` re-renders the earlier
documents a new value turns up in, and gives the value to every other session
holding such a turn (a fork's copy), so all copies of a turn read the same.

Raw values live only in this process's memory: never in the state DB, the index or
a log line. After a restart a session's whole history is read again the first
time a pass touches it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from redaction import Recurring, Redactor, found_values

__all__ = ["SecretMemory"]


@dataclass(slots=True)
class _Session:
    covered: int = 0
    """How many turns at the start of the ancestry were learned from."""
    last: str | None = None
    """The turn id at ``covered - 1``: another id there means the history was rewritten."""
    values: dict[str, str] = field(default_factory=dict)
    """Secret value → id of the rule that found it."""
    recurring: Recurring | None = None
    """``values`` ready for the redactor, built on first use after a change."""


class SecretMemory:
    """Per (persona, session): the secret values found in its history. Thread-safe."""

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._sessions: dict[tuple[str, str], _Session] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never the values
        return f"SecretMemory({len(self._sessions)} sessions)"

    def unlearned(self, persona: str, label: str, ancestry: Sequence[str]) -> list[str]:
        """The turns of ``ancestry`` not learned from yet: the tail past what was covered, or
        every turn when the covered part is no longer a prefix (a rewound history)."""
        with self._lock:
            s = self._sessions.get((persona, label))
        if s is None or s.covered == 0:
            return list(ancestry)
        if s.covered <= len(ancestry) and ancestry[s.covered - 1] == s.last:
            return list(ancestry[s.covered:])
        return list(ancestry)

    def learn(self, persona: str, label: str, ancestry: Sequence[str], texts: Mapping[str, str],
              pending: set[str]) -> dict[str, str]:
        """Learn from the unredacted ``texts`` of turns of ``ancestry`` (the ones
        :meth:`unlearned` named that have text). The covered prefix stops at the first
        ``pending`` turn: its text may still change, so it is read again next time.
        Returns the values this session did not have."""
        found: dict[str, str] = {}
        for text in texts.values():
            for value, rule in found_values(text, self._redactor.redact(text).findings).items():
                found.setdefault(value, rule)
        start = len(ancestry) - len(self.unlearned(persona, label, ancestry))
        stop = next((i for i in range(start, len(ancestry)) if ancestry[i] in pending), len(ancestry))
        with self._lock:
            s = self._sessions.setdefault((persona, label), _Session())
            if stop > 0:
                s.covered, s.last = stop, ancestry[stop - 1]
            return self._add(s, found)

    def add(self, persona: str, label: str, values: Mapping[str, str]) -> dict[str, str]:
        """Give ``label`` values found in another session's copy of a turn it holds.
        Returns the ones it did not have."""
        with self._lock:
            return self._add(self._sessions.setdefault((persona, label), _Session()), values)

    def knows(self, persona: str, label: str) -> bool:
        """Whether any of ``label``'s history was learned from in this process."""
        with self._lock:
            s = self._sessions.get((persona, label))
            return s is not None and s.covered > 0

    def recurring(self, persona: str, label: str) -> Recurring | None:
        """The values to mask in ``label``'s documents (None: none known)."""
        with self._lock:
            s = self._sessions.get((persona, label))
            if s is None or not s.values:
                return None
            if s.recurring is None:
                s.recurring = Recurring(s.values)
            return s.recurring

    def redact(self, persona: str, label: str):
        """The redaction function for ``label``'s documents."""
        recurring = self.recurring(persona, label)
        redactor = self._redactor
        return lambda text: redactor.redact(text, recurring=recurring).text

    @staticmethod
    def _add(s: _Session, values: Mapping[str, str]) -> dict[str, str]:
        new = {v: r for v, r in values.items() if v not in s.values}
        if new:
            s.values.update(new)
            s.recurring = None
        return new
