"""Private sessions' own turns and the copies of them forks hold: what every scope must hide.

A private session is visible only to itself, and so are the turns it said itself wherever a fork
copied them (a subagent of another persona included) and a compaction a fork made of them. The
state DB records each private session's own turns (table ``private_own_turns``) and the copies a pass
is writing before the files table records them (``copies_in_flight``); :meth:`PrivateTurns.copies`
turns both into the turns to hide per private session. Reached as ``StateDB.private``; the queries
it needs are the state DB's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from peewee import chunked

from indexer.core.types import DocKind, Document

if TYPE_CHECKING:
    from indexer.state.db import StateDB

#: the kinds of ``copies_in_flight`` rows, as :meth:`PrivateTurns.in_flight` groups them
IN_FLIGHT_KINDS = {"copies": "copy", "compactions": "compaction"}


class Visibility:
    SHARED = "shared"
    PRIVATE = "private"


class PrivateTurns:
    def __init__(self, state: StateDB) -> None:
        self.state = state

    def in_flight(self, persona: str) -> dict:
        """The copies (and compactions) a pass noted as being written (:meth:`note_in_flight`):
        ``{"copies": {turn: [sessions]}, "compactions": {turn: [sessions]}}``, empty kinds left out."""
        C = self.state.CopyInFlight
        kinds = {kind: plural for plural, kind in IN_FLIGHT_KINDS.items()}
        out: dict[str, dict[str, list[str]]] = {}
        q = C.select(C.kind, C.turn_id, C.session_label).where(C.persona == persona).order_by(
            C.kind, C.turn_id, C.session_label)
        for kind, turn, label in q.tuples():
            out.setdefault(kinds[kind], {}).setdefault(turn, []).append(label)
        return out

    def _set_in_flight(self, persona: str, notes: dict) -> None:
        C = self.state.CopyInFlight
        C.delete().where(C.persona == persona).execute()
        rows = [{"persona": persona, "kind": IN_FLIGHT_KINDS[plural], "turn_id": t, "session_label": s}
                for plural, entries in notes.items() for t, sessions in entries.items() for s in sessions]
        for part in chunked(rows, 200):
            C.insert_many(part).execute()

    def _stored_own(self, persona: str) -> dict[str, list[str]]:
        """Per private session of ``persona``: its own turns as recorded."""
        Own = self.state.PrivateOwnTurn
        out: dict[str, list[str]] = {}
        q = Own.select(Own.session_label, Own.turn_id).where(Own.persona == persona).order_by(Own.session_label, Own.turn_id)
        for label, turn in q.tuples():
            ids = out.setdefault(label, [])
            if turn:  # '': the session's row saying it was recorded (with no own turn, maybe)
                ids.append(turn)
        return out

    def _store_own(self, persona: str, own: dict[str, list[str]]) -> None:
        Own = self.state.PrivateOwnTurn
        Own.delete().where(Own.persona == persona).execute()
        rows = [{"persona": persona, "session_label": label, "turn_id": t} for label, ids in own.items()
                for t in ("", *ids)]
        for part in chunked(rows, 300):
            Own.insert_many(part).on_conflict_ignore().execute()

    def copies(self, persona: str, *, private: set[str] | None = None) -> dict[str, set[str]]:
        """Per private session: its own turns that another session of ``persona`` holds (a fork's
        copies) — what must be hidden in every copy in ``persona``'s index. ``private``: the
        persona's own private sessions (default all of them); private sessions of other personas
        count too (a subagent of another persona forked from one). A session whose own turns were
        never recorded (made private while the ledger could not be read) counts every turn of its
        indexed history as its own until the next pass records them. Copies a pass is writing
        (:meth:`note_in_flight`) count as held."""
        private = self.state.private_sessions(persona) if private is None else private
        out: dict[str, set[str]] = {}
        by_persona = self._by_persona(persona, private)
        flight = self.in_flight(persona) if by_persona else {}
        for owner, label, own in self._own(by_persona):
            holders = self.state.turn_holders(persona, own)
            for turn in own.intersection(flight.get("copies", ())):  # being written: held already
                holders.setdefault(turn, set()).update(flight["copies"][turn])
            if owner == persona:
                # held by another session (a fork's copy), or recorded nowhere yet: a pass writes the
                # sinks before it records the files, so a copy being written is already searchable
                hidden = {t for t in own if holders.get(t, {label}) - {label} or t not in holders}
            else:  # another persona's session: every copy here is a fork's (a subagent's), and one
                # of a turn its own persona has not recorded yet may be being written right now
                recorded = self.state.turn_holders(owner, own)
                hidden = set(holders) | {t for t in own if t not in recorded}
            forks = set().union(*(holders.get(t, set()) for t in hidden)) - {label}
            if hidden:
                out[label] = hidden | self._fork_compactions(persona, forks, label, flight.get("compactions", {}))
            elif owner == persona:
                out[label] = set()
        return out

    def note_in_flight(self, persona: str, docs: Sequence[Document]) -> bool:
        """Call before a pass writes ``docs`` to any sink (``indexer.sync.in_flight``). The files table
        records a document only after the sinks hold it, so a fork's new copy of a private session's
        already-indexed own turn (or a compaction made in a session holding such copies) would be
        searchable until then. Record, in its own commit, which of ``docs`` are such copies:
        :meth:`copies` counts them as held. Entries the files table records are dropped on the
        next call, and so are those of a session of ``persona`` deleted since (a write that failed,
        then the fork was deleted: searches hide it); one whose write failed stays (it only hides a private
        session's own turn) until the copy is recorded. True when the record changed."""
        turn_docs = [d for d in docs if d.turn_id and d.session]
        if not turn_docs:
            return False
        by_persona = self._by_persona(persona, self.state.private_sessions(persona))
        before = self.in_flight(persona)
        if not by_persona:  # no private session anywhere: nothing to hide, nothing kept
            if before:
                with self.state.db.atomic():
                    self._set_in_flight(persona, {})
            return bool(before)
        entries = {kind: {(t, s) for t, sessions in before.get(kind, {}).items() for s in sessions}
                   for kind in ("copies", "compactions")}
        # every turn_doc has a turn id and a session: the ``if`` restates it for the type checker
        compacting = {d.session for d in turn_docs if d.kind is DocKind.COMPACTION and d.session}
        held = self.state.session_turns(persona, compacting)  # do these sessions hold copies already?
        owners = self._owners(persona, by_persona, {d.turn_id for d in turn_docs if d.turn_id}.union(*held.values()))
        copies = {(d.turn_id, d.session) for d in turn_docs if d.turn_id in owners
                  and d.session not in owners[d.turn_id]}
        forks = {s for _, s in copies | entries["copies"]}
        forks |= {s for s, turns in held.items() if any(t in owners and s not in owners[t] for t in turns)}
        entries["copies"] |= copies
        entries["compactions"] |= {(d.turn_id, d.session) for d in turn_docs
                                   if d.kind is DocKind.COMPACTION and d.session in forks}
        # a copy the files table holds is counted from there: a rewrite of one adds nothing here
        recorded = self.state.turn_holders(persona, {t for pairs in entries.values() for t, _ in pairs})
        S = self.state.SessionReg
        # a deleted session of this persona is hidden from every search anyway (not one that moved: a
        # copy the files table never recorded stays in this persona's sinks, and only this note hides it)
        gone = {label for label, owner, status in S.select(S.label, S.persona, S.ledger_status).where(
            S.label.in_(sorted({s for pairs in entries.values() for _, s in pairs}))).tuples()
            if owner == persona and status == "deleted"}
        after = {}
        for kind, pairs in entries.items():
            grouped: dict[str, list[str]] = {}
            for t, s in sorted(pairs):
                if s not in recorded.get(t, ()) and s not in gone:
                    grouped.setdefault(t, []).append(s)
            if grouped:
                after[kind] = grouped
        if after == before:
            return False
        with self.state.db.atomic():
            self._set_in_flight(persona, after)
        return True

    def remember(self, persona: str, own: dict[str, set[str]] | None = None) -> None:
        """Record, per private session, the turns it said itself (``own``: from the ledger, those
        started after the session was created — not the history a fork inherited), added to what
        was recorded before and kept while the session stays private: its own documents may leave
        the index (deleted, rewound) while forks keep copies. A session shared again is forgotten."""
        private = self.state.private_sessions(persona)
        before = self._stored_own(persona)
        stored = {label: set(ids) for label, ids in before.items() if label in private}
        for label, ids in (own or {}).items():
            if label in private:
                stored[label] = stored.get(label, set()) | set(ids)
        after = {label: sorted(ids) for label, ids in stored.items()}
        if after != before:
            self._store_own(persona, after)

    def move(self, label: str, old: str, new: str) -> None:
        """Session ``label`` moved from persona ``old`` to ``new``: its recorded own turns go with it
        (a private session's copies in forks stay hidden while it moves). Call in the transaction
        that moves its registry row."""
        Own = self.state.PrivateOwnTurn
        ids = [t for (t,) in Own.select(Own.turn_id).where((Own.persona == old) & (Own.session_label == label)).tuples()]
        if not ids:
            return
        Own.delete().where((Own.persona == old) & (Own.session_label == label)).execute()
        for part in chunked([{"persona": new, "session_label": label, "turn_id": t} for t in ids], 300):
            Own.insert_many(part).on_conflict_ignore().execute()

    def others_own_turns(self, persona: str) -> set[str]:
        return set().union(*(own for _, _, own in self._own(self._by_persona(persona, set()))))

    def _own(self, by_persona: dict[str, set[str]]):
        """(owner persona, label, own turns) of each private session of ``by_persona``, by label."""
        for owner, labels in by_persona.items():
            stored = self._stored_own(owner)
            for label in sorted(labels):
                yield owner, label, self._own_turns(owner, label, stored)

    def _own_turns(self, persona: str, label: str, stored: dict) -> set[str]:
        """A private session's own turns as recorded (``stored``: its persona's record), else every
        turn of its indexed history (made private while the ledger could not be read)."""
        own = stored.get(label)
        return set(own) if own is not None else self.state.turns_of(persona, [label])

    def _owners(self, persona: str, by_persona: dict[str, set[str]], turns: set[str]) -> dict[str, set[str]]:
        """Of ``turns``, those a private session (``by_persona``: of ``persona`` or another) said
        itself, each with the labels a copy of it in ``persona`` may carry without being a fork's (the
        owner's own; none for another persona's session: every copy here is a subagent's)."""
        out: dict[str, set[str]] = {}
        for owner, label, own in self._own(by_persona):
            for turn in turns.intersection(own):
                out.setdefault(turn, set()).update({label} if owner == persona else ())
        return out

    def _by_persona(self, persona: str, private: set[str]) -> dict[str, set[str]]:
        """``persona``'s private sessions and every other persona's, by persona (one query)."""
        S = self.state.SessionReg
        out: dict[str, set[str]] = {persona: set(private)} if private else {}
        q = S.select(S.persona, S.label).where((S.visibility == Visibility.PRIVATE) & (S.persona != persona))
        for owner, label in q.tuples():
            out.setdefault(owner, set()).add(label)
        return out

    def _fork_compactions(self, persona: str, forks: set[str], label: str,
                          in_flight: dict[str, list[str]] | None = None) -> set[str]:
        """Compactions made in ``forks`` (sessions holding copies of ``label``'s own turns) and held
        by no other session: they summarise the private history they carry. ``in_flight``: compactions
        a pass is writing (turn → sessions), not in the files table yet."""
        if not forks:
            return set()
        F = self.state.File
        found: set[str] = set()
        writing = {t for t, sessions in (in_flight or {}).items() if forks.intersection(sessions)}
        for part in chunked(sorted(forks), 500):
            q = F.select(F.turn_id).where((F.persona == persona) & F.session_label.in_(part)
                                          & (F.kind == "compaction") & F.turn_id.is_null(False))
            found.update(t for (t,) in q.tuples())
        holders = self.state.turn_holders(persona, found)
        return {t for t in found if holders.get(t, set()) <= forks | {label}} | writing


__all__ = ["IN_FLIGHT_KINDS", "PrivateTurns", "Visibility"]
