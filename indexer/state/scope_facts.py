"""Scope facts (what a search may see), read from the state and kept per thread while it is unchanged."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TypeVar

from indexer.state.store_base import StoreBase

#: Scope facts kept per thread between state changes ((persona, session) pairs).
FACTS_MEMO_ENTRIES = 4096
#: A caller's label longer than this is kept in the memo as its digest: a label may be of any length,
#: and a client asking with thousands of distinct long ones must not make every thread's memo hold them.
MEMO_LABEL_CHARS = 256

T = TypeVar("T")


def _memo_label(session: str | None) -> str | bytes | None:
    if session is None or len(session) <= MEMO_LABEL_CHARS:
        return session
    return hashlib.sha256(session.encode("utf-8", "surrogatepass")).digest()



class ScopeFactsMemo(StoreBase):
    """Part of :class:`indexer.state.db.StateDB`: reads its registry, files and private turns."""

    def scope_facts(self, persona: str, session: str | None):
        """Everything scope resolution needs, read in one short transaction.

        Reused while the state DB is unchanged (every search asks; peewee's three queries cost
        about a millisecond of interpreter time a search, under the GIL). "Unchanged" is exact,
        per connection: SQLite's ``data_version`` moves on every commit of another connection,
        ``total_changes`` on every write of this one; both are read inside the read transaction,
        before the facts, so a commit in between can only make the kept facts newer than their
        stamp, never older. Inside a caller's own transaction (whose writes may still roll back)
        nothing is kept or reused."""
        if self.db.connection().in_transaction:  # the caller's transaction holds the reads together already
            return self._read_facts(persona, session)
        with self.db.atomic():
            memo = self._current_memo()
            key = (persona, _memo_label(session))
            facts = memo.entries.get(key)
            if facts is None:
                facts = self._read_facts(persona, session, memo.copies)
                if len(memo.entries) >= FACTS_MEMO_ENTRIES:
                    memo.entries.clear()
                memo.entries[key] = facts
            return facts

    def hidden_copies(self, persona: str) -> dict[str, set[str]]:
        """``private.copies(persona)``, reused while the state DB is unchanged (as ``scope_facts``:
        every export write and pass asks)."""
        return self._per_state(persona, lambda: self.private.copies(persona))

    def _per_state(self, key: object, compute: Callable[[], T]) -> T:
        """``compute()``, kept in this thread's memo until the state DB changes (not inside a
        caller's transaction, whose writes may still roll back)."""
        if self.db.connection().in_transaction:
            return compute()
        with self.db.atomic():
            memo = self._current_memo()
            if key not in memo.copies:
                memo.copies[key] = compute()
            return memo.copies[key]

    def _current_memo(self):
        """This thread's memo of scope facts, emptied when the state DB changed. Call in a read
        transaction: the stamp is read in it, before what the caller then reads."""
        conn = self.db.connection()
        (version,) = conn.execute("PRAGMA data_version").fetchone()
        stamp = (conn, version, conn.total_changes)
        memo = self._facts
        if getattr(memo, "stamp", None) != stamp:
            memo.stamp, memo.entries, memo.copies = stamp, {}, {}
        return memo

    def others_private_turns(self, persona: str) -> set[str]:
        """Every own turn of other personas' private sessions (as ``PrivateTurns.copies`` counts them):
        any copy of one in ``persona`` is a fork's (a subagent's), recorded or still being written.
        Reused while the state DB is unchanged."""
        return self._per_state(("others", persona), lambda: self.private.others_own_turns(persona))

    def _read_facts(self, persona: str, session: str | None, copies: dict | None = None):
        """``copies``: private sessions' hidden turns per persona, shared by every caller's facts at
        one state (one read per persona and state, not per caller)."""
        from indexer.core.scopes import ScopeFacts

        private = self.private_sessions(persona)
        per_label = copies.get(persona) if copies is not None else None
        if per_label is None:
            per_label = self.private.copies(persona, private=private)
            if copies is not None:
                copies[persona] = per_label
        hidden = set().union(*(ids for label, ids in per_label.items() if label != session))
        if hidden and session:  # a turn in the caller's own history is no secret to it: its copies stay visible
            hidden -= self.turns_of(persona, [session])
        return ScopeFacts(
            private=frozenset(private),
            deleted=frozenset(self.deleted_sessions(persona)),
            project_peers=frozenset(self.project_peers(session)) if session else frozenset(),
            hidden_turns=frozenset(hidden),
        )

    def scope_state(self) -> dict:
        """Every fact scope resolution reads, for every persona, in one transaction: what the
        writer publishes beside the tables on object storage for reader machines
        (``{"personas": {p: {"private", "deleted", "build", "private_turns"}}, "projects": {name: [labels]}}``)."""
        S = self.SessionReg
        with self.db.atomic():
            personas: dict[str, dict] = {}
            for persona in sorted({p for (p,) in S.select(S.persona).distinct().tuples()}
                                  | set(self.personas_indexed())
                                  | set(self.built_personas())):
                identity = self.build_identity(persona)
                private = self.private_sessions(persona)
                personas[persona] = {"private": sorted(private),
                                     "deleted": sorted(self.deleted_sessions(persona)),
                                     "build": identity.as_dict() if identity else None,
                                     "private_turns": {label: sorted(ids) for label, ids
                                                       in self.private.copies(persona, private=private).items()}}
            return {"personas": personas, "projects": self.projects()}
