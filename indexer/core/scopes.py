"""Who may see what: scope resolution for ``memory_search`` and ``memory_get``.

Pure: facts about sessions come in as :class:`ScopeFacts` (read from the state
DB at query time), a :class:`ScopeFilter` goes out. The filter is applied
twice: as a LanceDB prefilter (speed) and again on every returned row
(:meth:`ScopeFilter.allows`), so a mistake in one layer cannot leak memory.

Rules (ARCHITECTURE.md "Search and scopes"):

- persona isolation is physical (one table per persona) and checked per row;
- ``session`` scope: only the caller's session;
- ``project`` scope: every session sharing a project with the caller; a
  session in no project sees only itself;
- ``persona`` scope (default): every session of the persona;
- a ``private`` session is only ever visible to itself — the turns it said itself too, under any
  other session's label (a fork, of this persona or another, copies its history): hidden from
  every other caller in every copy, unless the turn is in the caller's own history too; the
  history a private fork inherited stays its parent's;
- ``deleted`` sessions are never visible;
- the ``memory`` source (workspace memory files) is shared by every session
  of the persona, in every scope.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass


class Scope(str, enum.Enum):
    PERSONA = "persona"
    PROJECT = "project"
    SESSION = "session"


class ScopeError(ValueError):
    """The request's scope cannot be resolved (e.g. ``session`` scope without a session)."""


@dataclass(frozen=True, slots=True)
class ScopeFacts:
    """What the state DB knows, for one persona, at query time."""

    private: frozenset[str]
    deleted: frozenset[str]
    project_peers: frozenset[str]  # sessions sharing a project with the caller (caller included)
    #: own turns of private sessions other than the caller (``PrivateTurns.copies``): hidden in every copy
    hidden_turns: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class ScopeFilter:
    persona: str
    include_sessions: bool
    include_memory: bool
    # None: every session except ``excluded``; otherwise only these (minus ``excluded``).
    allowed: frozenset[str] | None
    excluded: frozenset[str]
    #: the caller's session (its own copies of hidden turns stay visible to it)
    caller: str | None = None
    hidden_turns: frozenset[str] = frozenset()

    def allows(self, row: Mapping) -> bool:
        if row.get("persona") != self.persona:
            return False
        source = row.get("source")
        if source == "memory":
            return self.include_memory
        if source != "sessions" or not self.include_sessions:
            return False
        session = row.get("session")
        if session is None or session in self.excluded:
            return False
        if session != self.caller and row.get("turn_id") in self.hidden_turns:
            return False
        return self.allowed is None or session in self.allowed

    def allows_nothing(self) -> bool:
        sessions_empty = not self.include_sessions or (self.allowed is not None and not (self.allowed - self.excluded))
        return sessions_empty and not self.include_memory

    def where(self, sql_str, sql_in) -> str | None:
        """The LanceDB prefilter, built with the sink's quoting helpers."""
        parts = []
        if self.include_memory:
            parts.append("source = 'memory'")
        if self.include_sessions:
            clause = "source = 'sessions' AND session IS NOT NULL"
            if self.allowed is not None:
                allowed = sorted(self.allowed - self.excluded)
                clause += " AND " + sql_in("session", allowed) if allowed else " AND false"
            elif self.excluded:
                clause += f" AND NOT ({sql_in('session', sorted(self.excluded))})"
            if self.hidden_turns:
                hidden = sql_in("turn_id", sorted(self.hidden_turns))
                own = f" AND session <> {sql_str(self.caller)}" if self.caller is not None else ""
                clause += f" AND NOT (turn_id IS NOT NULL AND {hidden}{own})"
            parts.append(f"({clause})")
        if not parts:
            return "false"
        return " OR ".join(f"({p})" for p in parts)


def resolve(persona: str, scope: Scope, session: str | None, sources: frozenset[str], facts: ScopeFacts) -> ScopeFilter:
    # A private session is visible only to itself; a deleted one to nobody.
    excluded = set(facts.deleted) | {s for s in facts.private if s != session}
    allowed: frozenset[str] | None = None
    if scope in (Scope.SESSION, Scope.PROJECT):
        if not session:
            raise ScopeError(f"scope '{scope.value}' needs the caller's session label in 'session'")
        allowed = frozenset({session}) if scope is Scope.SESSION else frozenset(facts.project_peers | {session})
    return ScopeFilter(
        persona=persona,
        include_sessions="sessions" in sources,
        include_memory="memory" in sources,
        allowed=allowed,
        excluded=frozenset(excluded),
        caller=session,
        hidden_turns=facts.hidden_turns,
    )
