"""Where a secret found in one turn must also be masked: one step of a build.

:class:`SecretSpread` learns the secret values of a batch's unlearned turns
(:mod:`indexer.sync.recurring`) and finds every turn already indexed that must be built
again to mask a value its session did not know. A value goes wherever a turn holding it
goes:

- **pull**: a session read for the first time in this process (a restart, a new fork)
  takes the values its co-holders (sessions sharing a turn with it) found in those turns;
- **push**: a new value re-renders every turn of the session it occurs in, and is given to
  every other session holding such a turn (the state DB's ``turn_holders``, plus the
  sessions built earlier in this pass but not recorded yet), which then does the same.

Sessions outside the batch are read from the ledger as they are reached. Sessions of
another persona (a subagent forked from one of this persona's) cannot be written by this
persona's build: a value found for one is owed to it (``SecretMemory.owe``; the state DB
records the session's label, never the value, so a restart does not lose it) and its own
persona's next pass rewrites it; a session first read pulls from them too. Limits: only
personas in the state DB's session registry are looked at (a persona left out of
``[ledger] personas`` is not); a deleted session's values are known only while the process
that learned them runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import structlog

from indexer.sync.context import Indexer
from indexer.sync.recurring import StagedMemory
from indexer.sync.turn_rows import TurnRows, session_histories, turn_positions
from ledger.reader import LedgerReader
from redaction import Recurring

log = structlog.get_logger("indexer.sync")


@dataclass
class Respread:
    """Turns to build again, per session; and the positions of those whose session's own
    history could not be read (its thread row is broken)."""

    again: dict[str, list[str]] = field(default_factory=dict)
    positions: dict[str, dict[str, int]] = field(default_factory=dict)
    took: set[str] = field(default_factory=set)  # sessions that took values owed to them


class SecretSpread:
    def __init__(self, ix: Indexer, reader: LedgerReader, persona: str, memory: StagedMemory, rows: TurnRows,
                 histories: dict[str, list[str]], pass_holders: dict[str, set[str]] | None) -> None:
        """``histories``: the batch's sessions' ancestries (gains those of sessions reached
        outside it). ``pass_holders``: turn → sessions built earlier in this pass and not in the
        state DB yet (a rebuild's), gains this batch's; None: none."""
        self.ix, self.reader, self.persona, self.memory, self.rows = ix, reader, persona, memory, rows
        self.histories = histories
        self.pass_holders = pass_holders if pass_holders is not None else {}
        self.noted = False
        self.unreachable: dict[str, str] = {}  # label -> "gone" / "unreadable" (session_histories)
        self.gained: dict[str, dict[str, str]] = {}
        self.others: list[str] | None = None  # the other personas in the session registry, read once
        self.elsewhere: dict[tuple[str, str], Recurring | None] = {}  # values of other personas' sessions
        if pass_holders is not None:  # later batches of the pass need this batch's
            self._note_all()

    def run(self, learn: dict[str, list[str]], recheck: Sequence[str] = ()) -> Respread:
        """``learn``: per session of the batch, the turns it has not learned from. ``recheck``:
        sessions a build of another persona found values for (maybe in a process since gone):
        they take what is owed and pull from their whole history again."""
        branched = [label for label in learn
                    if self.memory.branched(self.persona, label, self.histories[label])]
        for label, tids in learn.items():
            self._gain(label, self._learn(label, tids))
        took: set[str] = set()
        for label in set(learn) | set(recheck):
            # what a session of another persona found in turns this one holds
            owed = self.memory.take_owed(self.persona, label)
            if owed:
                took.add(label)
                self._gain(label, self.memory.add(self.persona, label, owed))
        for label in branched:
            self._pull(label, learn[label])
        for label in sorted(set(recheck) - set(branched)):
            if label in self.histories:
                self._pull(label, self.histories[label])
        out = self._push()
        out.took = took
        if out.again:
            log.info("redaction.recurring", persona=self.persona, sessions=len(out.again),
                     turns=sum(len(t) for t in out.again.values()))
        return out

    # -- the steps ---------------------------------------------------------------------------

    def _pull(self, label: str, tids: Sequence[str]) -> None:
        """``label``'s history gained ``tids`` (all of it when first read): take what the other
        sessions holding them found in them — of this persona (read now, in one query, if this
        process never did) or another (a subagent's fork and its parent: see :meth:`_values_of`)."""
        shared = self._holders(list(dict.fromkeys(tids)))
        others = sorted({h for hs in shared.values() for h in hs} - {(self.persona, label)})
        self._reach_all([o for p, o in others if p == self.persona and not self.memory.knows(p, o)])
        for other in others:
            theirs = self._values_of(*other)
            if theirs is None:
                continue
            for tid, hs in shared.items():
                if other in hs and (text := self.rows.text(tid)) is not None:
                    self._gain(label, self.memory.add(self.persona, label, theirs.values_in(text)))

    def _push(self) -> Respread:
        out = Respread()
        while self.gained:
            label, new = self.gained.popitem()
            if self._reach(label):
                new = {**new, **self.gained.pop(label, {})}  # reaching it may have learned more
                history = self.histories[label]
            elif self.unreachable[label] == "unreadable":  # its thread row is broken: its indexed copies
                history = sorted(self.ix.state.turns_of(self.persona, [label]))
            else:  # deleted or gone: its documents are being removed, never written again
                continue
            self.rows.read(history)
            recurring = Recurring(new)
            found = {t: v for t in dict.fromkeys(history)
                     if (text := self.rows.text(t)) is not None and (v := recurring.values_in(text))}
            if not found:
                continue
            # and the turn after each: it opens with that turn's first words (documents.turn_context)
            after = [t for t in dict.fromkeys(history) if t not in found
                     and (row := self.rows.turns.get(t)) is not None and row.parent_turn_id in found]
            again = out.again.setdefault(label, [])
            again.extend(t for t in [*found, *after] if t not in again)
            if label not in self.histories:
                out.positions.setdefault(label, {}).update(turn_positions(self.reader, [*found, *after]))
            for tid, hs in self._holders(list(found)).items():
                for persona, holder in sorted(hs - {(self.persona, label)}):
                    if persona == self.persona:
                        self._gain(holder, self.memory.add(persona, holder, found[tid]))
                    else:  # its own persona's next build writes them
                        self.memory.owe(persona, holder, found[tid])
        return out

    # -- helpers ---------------------------------------------------------------------------------

    def _gain(self, label: str, values: dict[str, str]) -> None:
        if values:
            self.gained.setdefault(label, {}).update(values)

    def _learn(self, label: str, tids: Sequence[str]) -> dict[str, str]:
        self.rows.read(tids)
        return self.memory.learn(self.persona, label, self.histories[label],
                                 {t: self.rows.learnable(t) for t in dict.fromkeys(tids)})

    def _reach(self, label: str) -> bool:
        """Make ``label``'s history known (read from the ledger and learned from, if outside the
        batch). False: it has none to read (deleted, gone, or its thread row unreadable)."""
        self._reach_all([label])
        return label in self.histories

    def _reach_all(self, labels: Sequence[str]) -> None:
        new = [label for label in labels if label not in self.histories and label not in self.unreachable]
        for label, history in session_histories(self.reader, self.persona, new).items():
            if not isinstance(history, list):
                self.unreachable[label] = history
                continue
            self.histories[label] = history
            if self.noted:
                self._note(label, history)
        unlearned = {label: self.memory.unlearned(self.persona, label, self.histories[label])
                     for label in new if label in self.histories}
        self.rows.read(t for tids in unlearned.values() for t in tids)
        for label, tids in unlearned.items():
            self._gain(label, self._learn(label, tids))

    def _holders(self, tids: Sequence[str]) -> dict[str, set[tuple[str, str]]]:
        """Per turn, the (persona, session) pairs holding it: of this persona recorded in the state
        DB or built in this pass; of the others, recorded."""
        self._note_all()
        out = {t: {(self.persona, h) for h in hs} for t, hs in self.ix.state.turn_holders(self.persona, tids).items()}
        for t in tids:
            out.setdefault(t, set()).update((self.persona, h) for h in self.pass_holders.get(t, ()))
        for persona in self._other_personas():
            for t, labels in self.ix.state.turn_holders(persona, tids).items():
                out[t].update((persona, label) for label in labels)
        return out

    def _values_of(self, persona: str, label: str) -> Recurring | None:
        """A co-holder's values (None: none). This persona's: its memory. Another's: its memory when
        this process read it, else found in its history now (kept for this build only: its own
        persona's passes learn for themselves)."""
        if persona == self.persona:
            return self.memory.recurring(persona, label)
        key = (persona, label)
        if key not in self.elsewhere:
            if self.memory.knows(persona, label):
                self.elsewhere[key] = self.memory.recurring(persona, label)
            else:
                history = session_histories(self.reader, persona, [label])[label]
                found: dict[str, str] = {}
                if isinstance(history, list):
                    self.rows.read(history)
                    for tid in dict.fromkeys(history):
                        if (text := self.rows.text(tid)) is not None:
                            found.update(self.memory.found_in(text))
                self.elsewhere[key] = Recurring(found) if found else None
        return self.elsewhere[key]

    def _other_personas(self) -> list[str]:
        if self.others is None:
            self.others = sorted(self.ix.state.session_personas() - {self.persona})
        return self.others

    def _note_all(self) -> None:
        # Only once holders are asked for: a plain tail pass (nothing new learned) never is.
        if not self.noted:
            self.noted = True
            for label, history in self.histories.items():
                self._note(label, history)

    def _note(self, label: str, history: Sequence[str]) -> None:
        # Only what the state DB does not record for the session: a rebuild of an index already
        # built holds only the sessions new since (a first build holds them all).
        recorded = self.ix.state.indexed_turns(self.persona, label)
        for tid in history:
            if tid not in recorded:
                self.pass_holders.setdefault(tid, set()).add(label)
