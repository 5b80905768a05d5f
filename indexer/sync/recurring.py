"""Secrets found in one turn of a session, masked where they recur in its other turns.

The redactor masks a value a rule found (``the db password is X``) wherever it
recurs in the *same* text. A conversation repeats it in other turns (``connect
with X`` three turns later, or before the turn that named it) and in compaction
summaries. This memory holds, per session, the values found anywhere in its
history (its ancestry, inherited turns included), so each of its documents is
redacted with all of them; :mod:`indexer.sync.secret_spread` finds the earlier
documents a new value turns up in (to build again) and gives the value to every
other session holding such a turn (a fork's copy), so all copies of a turn read the same.

Raw values live only in this process's memory: never in the state DB, the index or
a log line. After a restart a session's whole history is read again the first
time a pass touches it.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Final, TypeAlias

import structlog

from redaction import Recurring, Redactor, found_values

__all__ = ["Learnable", "SecretMemory", "StagedMemory", "WAIT", "Wait"]

log = structlog.get_logger("indexer.sync")

class Wait(Enum):
    """The type of ``WAIT``: a sentinel the type checker can tell apart from a text and None."""

    WAIT = "wait"


WAIT: Final = Wait.WAIT
"""A turn's text as given to :meth:`SecretMemory.learn` when it cannot be read yet (still
streaming, a bad row that may be repaired): learned from once it can."""

#: What :meth:`SecretMemory.learn` takes for a turn: its unredacted text, None (no text), or ``WAIT``.
Learnable: TypeAlias = str | None | Wait


@dataclass(slots=True)
class _Session:
    seen: array = field(default_factory=lambda: array("q"))
    """``hash()`` of each ancestry turn id handled so far, in order (8 bytes a turn): where a
    rewritten history diverges, learning starts again."""
    waiting: set[str] = field(default_factory=set)
    """Turns handled but not learned from yet (``WAIT``)."""
    values: dict[str, str] = field(default_factory=dict, repr=False)
    """Secret value → id of the rule that found it."""
    recurring: Recurring | None = field(default=None, repr=False)
    """``values`` ready for the redactor, built on first use after a change."""
    owed: dict[str, str] = field(default_factory=dict, repr=False)
    """Values a session of another persona found in a turn this one holds: its own persona's next
    build takes them (:meth:`SecretMemory.take_owed`) and rewrites the documents holding them."""


class SecretMemory:
    """Per (persona, session): the secret values found in its history. Thread-safe as used: the
    daemon writes only through a staging (:meth:`stage`; the write methods here serve tests and
    single-threaded use), and a staged read may fill a base session's ``recurring`` cache under
    the staging's lock — harmless, as a base session's values never change once merged in.

    A build learns through :meth:`stage`: what it learned takes effect with
    :meth:`StagedMemory.commit`, once the documents it re-rendered are written, so a
    failed write leaves the memory as it was and the next pass learns (and re-renders) again.
    """

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._sessions: dict[tuple[str, str], _Session] = {}
        self._owing: dict[str, set[str]] = {}  # persona -> sessions owed values (see owe)
        self._recovered: set[str] = set()  # personas whose owed sessions recorded before this process were built
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never the values
        return f"{type(self).__name__}({len(self._sessions)} sessions)"

    def stage(self) -> StagedMemory:
        return StagedMemory(self)

    # Where sessions are read and written; StagedMemory keeps its writes apart.
    def _get(self, key: tuple[str, str]) -> _Session | None:
        return self._sessions.get(key)

    def _edit(self, key: tuple[str, str]) -> _Session:
        return self._sessions.setdefault(key, _Session())

    # What a StagedMemory asks of its base.
    def _peek(self, key: tuple[str, str]) -> _Session | None:
        with self._lock:
            return self._sessions.get(key)

    def _copy(self, key: tuple[str, str]) -> _Session:
        with self._lock:
            s = self._sessions.get(key)
            return _Session() if s is None else _Session(array("q", s.seen), set(s.waiting), dict(s.values),
                                                         owed=dict(s.owed))

    def _merge(self, staged: dict[tuple[str, str], _Session]) -> None:
        with self._lock:
            for key, s in staged.items():
                had = self._sessions.get(key)
                if had is not None and any(v not in s.values for v in had.values):
                    for value, rule in had.values.items():
                        s.values.setdefault(value, rule)
                    s.recurring = None
                self._sessions[key] = s
                self._note_owed(key, s)

    def _note_owed(self, key: tuple[str, str], s: _Session) -> None:
        persona, label = key
        if s.owed:
            self._owing.setdefault(persona, set()).add(label)
        else:
            self._owing.get(persona, set()).discard(label)

    def unlearned(self, persona: str, label: str, ancestry: Sequence[str]) -> list[str]:
        """The turns of ``ancestry`` to learn from: those past the point where it leaves the
        history handled so far (all of it the first time; after a rewind or a regenerated
        turn, from there), and those handled earlier that had to wait."""
        with self._lock:
            s = self._get((persona, label))
            if s is None:
                return list(ancestry)
            split = _diverges(s.seen, ancestry)
            return [t for t in ancestry[:split] if t in s.waiting] + list(ancestry[split:])

    def found_in(self, text: str) -> dict[str, str]:
        """The values the rules find in ``text`` (nothing kept). A redactor error finds none."""
        return self._found(text) or {}

    def _found(self, text: str) -> dict[str, str] | None:
        """None: the redactor failed on ``text`` (the build meets the same error and records a bad row)."""
        try:
            return found_values(text, self._redactor.redact(text).findings)
        except Exception as exc:
            log.warning("redaction.learn_failed", error=type(exc).__name__)
            return None

    def learn(self, persona: str, label: str, ancestry: Sequence[str], texts: Mapping[str, Learnable]) -> dict[str, str]:
        """Learn from the unredacted ``texts`` of the turns :meth:`unlearned` named: a text,
        None (nothing to learn: no text), or ``WAIT`` (read it again next time). A text the
        redactor fails on waits too (the build records that turn as a bad row).
        Returns the values this session did not have."""
        found: dict[str, str] = {}
        waiting: set[str] = set()
        for tid, text in texts.items():
            if text is WAIT:
                waiting.add(tid)
                continue
            if text is None:
                continue
            values = self._found(text)
            if values is None:
                waiting.add(tid)
                continue
            for value, rule in values.items():
                found.setdefault(value, rule)
        with self._lock:
            s = self._edit((persona, label))
            split = _diverges(s.seen, ancestry)
            kept = {t for t in ancestry[:split] if t in s.waiting and t not in texts}
            s.waiting = kept | waiting
            del s.seen[split:]
            s.seen.extend(hash(t) for t in ancestry[split:])
            return _add(s, found)

    def add(self, persona: str, label: str, values: Mapping[str, str]) -> dict[str, str]:
        """Give ``label`` values found in another session's copy of a turn it holds.
        Returns the ones it did not have."""
        if not values:
            return {}
        with self._lock:
            s = self._get((persona, label))
            if s is not None and all(v in s.values for v in values):
                return {}
            return _add(self._edit((persona, label)), values)

    def branched(self, persona: str, label: str, ancestry: Sequence[str]) -> bool:
        """Whether ``ancestry`` is not the history handled so far grown at its end: never read in
        this process, or rewound or moved onto another branch (its new turns may be shared with
        sessions whose values it lacks)."""
        with self._lock:
            s = self._get((persona, label))
            return s is None or not s.seen or _diverges(s.seen, ancestry) < len(s.seen)

    def owe(self, persona: str, label: str, values: Mapping[str, str]) -> None:
        """Values for ``label`` found by a session of another persona (which cannot write this
        persona's documents): ``label``'s next build takes them."""
        with self._lock:
            s = self._get((persona, label))
            if s is not None and all(v in s.values or v in s.owed for v in values):
                return
            s = self._edit((persona, label))
            s.owed.update((v, r) for v, r in values.items() if v not in s.values)
            self._note_owed((persona, label), s)

    def take_owed(self, persona: str, label: str) -> dict[str, str]:
        """The values owed to ``label`` (see :meth:`owe`), no longer owed once this is committed."""
        with self._lock:
            s = self._get((persona, label))
            if s is None or not s.owed:
                return {}
            s = self._edit((persona, label))
            owed, s.owed = s.owed, {}
            self._note_owed((persona, label), s)
            return owed

    def owing(self, persona: str) -> list[str]:
        """Sessions of ``persona`` owed values (committed ones)."""
        with self._lock:
            return sorted(self._owing.get(persona, ()))

    def recovered(self, persona: str, done: bool | None = None) -> bool:
        """Whether the sessions recorded as owed values before this process started (the state DB's
        rechecks: labels only) were built; ``done=True`` says they now are. From then on this
        process's own memory (:meth:`owing`) lists every owed session, so a pass skips the read."""
        with self._lock:
            if done:
                self._recovered.add(persona)
            return persona in self._recovered

    def forget_owed(self, persona: str, labels: Sequence[str]) -> None:
        """Sessions gone from the ledger: nothing to write for them."""
        with self._lock:
            for label in labels:
                s = self._sessions.get((persona, label))
                if s is not None:
                    s.owed = {}
                    self._note_owed((persona, label), s)

    def knows(self, persona: str, label: str) -> bool:
        """Whether ``label``'s history was read in this process."""
        with self._lock:
            s = self._get((persona, label))
            return s is not None and len(s.seen) > 0

    def recurring(self, persona: str, label: str) -> Recurring | None:
        """The values to mask in ``label``'s documents (None: none known)."""
        with self._lock:
            s = self._get((persona, label))
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


class StagedMemory(SecretMemory):
    """A :class:`SecretMemory` whose changes stay apart from its base until :meth:`commit`
    (reads see both). Used by one build (or one rebuild's batches) at a time."""

    def __init__(self, base: SecretMemory) -> None:
        super().__init__(base._redactor)
        self._base = base

    def _get(self, key: tuple[str, str]) -> _Session | None:
        s = self._sessions.get(key)
        return s if s is not None else self._base._peek(key)

    def _edit(self, key: tuple[str, str]) -> _Session:
        s = self._sessions.get(key)
        if s is None:
            s = self._sessions[key] = self._base._copy(key)
        return s

    def _note_owed(self, key: tuple[str, str], s: _Session) -> None:
        pass  # the base notes them when this is committed

    def owed_sessions(self) -> dict[str, set[str]]:
        """Per persona, the sessions this staging owes values to (to record, without the values, so
        a restart before their persona's pass does not lose them)."""
        out: dict[str, set[str]] = {}
        for (persona, label), s in self._sessions.items():
            if s.owed:
                out.setdefault(persona, set()).add(label)
        return out

    def commit(self) -> None:
        """Make what was learned take effect in the base: each session's handled turns as this
        staging saw them, its values merged with the base's (only the sync worker commits; a
        restore on the API's thread never does)."""
        staged, self._sessions = self._sessions, {}
        self._base._merge(staged)


def _add(s: _Session, values: Mapping[str, str]) -> dict[str, str]:
    new = {v: r for v, r in values.items() if v not in s.values}
    if new:
        s.values.update(new)
        s.recurring = None
    return new


def _diverges(seen: array, ancestry: Sequence[str]) -> int:
    """The first position where ``ancestry`` differs from the turns ``seen`` (by hash)."""
    n = min(len(seen), len(ancestry))
    # An ancestry is a path from the root: the same turn at the same place means the same path
    # up to it (the usual case, a history that grew).
    if n and seen[n - 1] == hash(ancestry[n - 1]):
        return n
    for i in range(n):
        if seen[i] != hash(ancestry[i]):
            return i
    return n
