"""The revisit queue: sessions and turns a later pass comes back to, one table with a reason
(:class:`~indexer.state.schema.RevisitReason`) — turns still streaming, turns given a late message,
bad rows, sessions owed secret values, sessions to build that no history row names — and the turns done with no text
(built again when a message reaches them: :mod:`indexer.sync.late`)."""

from __future__ import annotations

from collections.abc import Iterable

from peewee import chunked, fn

from indexer.state.schema import IN_LIMIT, RevisitReason, now_ms
from indexer.state.store_base import StoreBase

PENDING, BAD, OWED, TO_BUILD, LATE = (RevisitReason.PENDING_TURN.value, RevisitReason.BAD_ROW.value,
                                      RevisitReason.OWED_SECRET.value, RevisitReason.TO_BUILD.value,
                                      RevisitReason.LATE_MESSAGE.value)


class RevisitStore(StoreBase):
    """Part of :class:`indexer.state.db.StateDB` (its ``Revisit`` and ``EmptyTurn`` models)."""

    # -- the queue, by reason -------------------------------------------------------------

    def _queued(self, persona: str, reason: str):
        R = self.Revisit
        return (R.persona == persona) & (R.reason == reason)

    def revisits(self, persona: str) -> dict[str, list[tuple[str, str]]]:
        """Every queued (session, turn) of ``persona`` by reason (turn ``''``: the whole session)."""
        R = self.Revisit
        out: dict[str, list[tuple[str, str]]] = {}
        q = R.select(R.reason, R.session_label, R.turn_id).where(R.persona == persona).order_by(
            R.reason, R.session_label, R.turn_id)
        for reason, label, turn in q.tuples():
            out.setdefault(reason, []).append((label, turn))
        return out

    def _labels(self, persona: str, reason: str) -> set[str]:
        R = self.Revisit
        return {label for (label,) in R.select(R.session_label).where(self._queued(persona, reason)).tuples()}

    def _add_labels(self, persona: str, reason: str, labels: Iterable[str]) -> None:
        rows = [{"persona": persona, "reason": reason, "session_label": label, "turn_id": "", "seen_at": now_ms()}
                for label in sorted(set(labels))]
        for part in chunked(rows, 200):
            self.Revisit.insert_many(part).on_conflict_ignore().execute()

    def _clear_labels(self, persona: str, reason: str, labels: Iterable[str] | None) -> None:
        R = self.Revisit
        if labels is None:
            R.delete().where(self._queued(persona, reason)).execute()
            return
        for part in chunked(sorted(set(labels)), 500):
            R.delete().where(self._queued(persona, reason) & R.session_label.in_(part)).execute()

    def secret_rechecks(self, persona: str) -> set[str]:
        return self._labels(persona, OWED)

    def add_secret_rechecks(self, persona: str, labels: Iterable[str]) -> None:
        self._add_labels(persona, OWED, labels)

    def clear_secret_rechecks(self, persona: str, labels: Iterable[str]) -> None:
        self._clear_labels(persona, OWED, labels)

    def sessions_to_build(self, persona: str) -> set[str]:
        return self._labels(persona, TO_BUILD)

    def add_sessions_to_build(self, persona: str, labels: Iterable[str]) -> None:
        self._add_labels(persona, TO_BUILD, labels)

    def clear_sessions_to_build(self, persona: str, labels: Iterable[str] | None = None) -> None:
        """``labels`` built (None: every one, after a pass that built every session)."""
        self._clear_labels(persona, TO_BUILD, labels)

    # -- pending turns, turns given a late message --------------------------------------------

    def _turns(self, persona: str, reason: str) -> list[tuple[str, str]]:
        R = self.Revisit
        return list(R.select(R.session_label, R.turn_id).where(self._queued(persona, reason)).tuples())

    def pending(self, persona: str) -> list[tuple[str, str]]:
        return self._turns(persona, PENDING)

    def late_queued(self, persona: str) -> list[tuple[str, str]]:
        """Turns found given a late message by a pass that had not built them again yet."""
        return self._turns(persona, LATE)

    def queue_late(self, persona: str, items: Iterable[tuple[str, str]]) -> None:
        stamp = now_ms()
        rows = [{"persona": persona, "reason": LATE, "session_label": s, "turn_id": t, "seen_at": stamp}
                for s, t in sorted(set(items))]
        for part in chunked(rows, 200):
            self.Revisit.insert_many(part).on_conflict_ignore().execute()

    def clear_late(self, persona: str, items: Iterable[tuple[str, str]] | None = None) -> None:
        """``items`` built again (None: every one, after a pass that built every turn)."""
        if items is None:
            self.Revisit.delete().where(self._queued(persona, LATE)).execute()
        else:
            self._clear_turns(persona, LATE, items)

    def pending_count(self, persona: str) -> int:
        return self.Revisit.select().where(self._queued(persona, PENDING)).count()

    def set_pending(self, persona: str, items: Iterable[tuple[str, str]]) -> None:
        stamp = now_ms()
        rows = [{"persona": persona, "reason": PENDING, "session_label": s, "turn_id": t, "seen_at": stamp}
                for s, t in items]
        for part in chunked(rows, 200):
            self.Revisit.insert_many(part).on_conflict_ignore().execute()

    def clear_pending(self, persona: str, items: Iterable[tuple[str, str]]) -> None:
        self._clear_turns(persona, PENDING, items)

    def _clear_turns(self, persona: str, reason: str, items: Iterable[tuple[str, str]]) -> int:
        R = self.Revisit
        n = 0
        for session, turn in set(items):
            n += R.delete().where(self._queued(persona, reason) & (R.session_label == session)
                                  & (R.turn_id == turn)).execute()
        return n

    # -- empty turns --------------------------------------------------------------------------

    def record_empty(self, persona: str, empty: Iterable[tuple[str, str]], filled: Iterable[tuple[str, str]]) -> None:
        """(session, turn) pairs done with no text (``empty``), and pairs that made a document (``filled``)."""
        T = self.EmptyTurn
        rows = [{"persona": persona, "session_label": s, "turn_id": t} for s, t in set(empty)]
        for part in chunked(rows, 300):
            T.insert_many(part).on_conflict_ignore().execute()
        filled = sorted(set(filled))
        if filled and T.select().where(T.persona == persona).exists():  # a statement a part, not one a pair
            for pairs in chunked(filled, IN_LIMIT // 2):
                self.db.execute_sql(
                    "DELETE FROM empty_turns WHERE persona = ? AND (session_label, turn_id) IN"
                    f" (VALUES {','.join(['(?, ?)'] * len(pairs))})", (persona, *(v for pair in pairs for v in pair)))

    def forget_empty(self, persona: str) -> None:
        self.EmptyTurn.delete().where(self.EmptyTurn.persona == persona).execute()

    def holders_of_late(self, persona: str, turns: Iterable[str]) -> list[tuple[str, str]]:
        """(session, turn) of ``turns`` indexed in ``persona`` (a document each) or done with no text."""
        ids = sorted(set(turns))
        if not ids:
            return []
        pairs = {(s, t) for t, sessions in self.turn_holders(persona, ids).items() for s in sessions if s}
        rows = self._rows_in("SELECT session_label, turn_id FROM empty_turns WHERE persona = ? AND turn_id IN ({marks})",
                             persona, ids)
        return sorted(pairs | set(rows))

    # -- what goes with a session or a source -----------------------------------------------

    def forget_sessions(self, persona: str, labels: Iterable[str]) -> None:
        """Drop what ``persona`` keeps of ``labels`` besides documents: pending, bad and empty turns
        (the sessions left the persona)."""
        R = self.Revisit
        for part in chunked(sorted(set(labels)), 500):
            R.delete().where((R.persona == persona) & R.reason.in_([PENDING, BAD, LATE])
                             & R.session_label.in_(part)).execute()
            self.EmptyTurn.delete().where((self.EmptyTurn.persona == persona)
                                          & self.EmptyTurn.session_label.in_(part)).execute()

    def forget_source(self, persona: str) -> None:
        """Drop every per-source fact of ``persona`` (cursor, queued revisits, derived sets): the
        ledger they described is gone."""
        with self.db.atomic():
            self.Revisit.delete().where(self.Revisit.persona == persona).execute()
            self.forget_persona_state(persona)
            self.forget_empty(persona)
            for model in (self.LateCheckpoint, self.PrivateOwnTurn, self.CopyInFlight, self.TruncatedDocument,
                          self.UnscopedHidden):
                model.delete().where(model.persona == persona).execute()

    # -- bad rows ------------------------------------------------------------------------------

    def record_bad(self, persona: str, items: Iterable[tuple[str, str, str, str]],
                   fingerprints: dict[str, str] | None = None, *, sessions_built: Iterable[str] = ()) -> int:
        """Record (session, turn_id, reason, detail) as bad, with the fingerprint
        of the turn's rows (by turn id). ``sessions_built``: sessions whose every
        unindexed turn was just built again, so their bad rows not in ``items``
        are resolved (built fine, or no longer in the session's history).
        Returns how many (session, turn) pairs are newly bad."""
        stamp = now_ms()
        R = self.Revisit
        fingerprints = fingerprints or {}
        items = list({(i[0], i[1]): i for i in items}.values())
        known = set(self.bad_items(persona))
        still = {(i[0], i[1]) for i in items}
        by_session: dict[str, list[str]] = {}
        for s, t in known:
            if (s, t) not in still:
                by_session.setdefault(s, []).append(t)
        for label in set(sessions_built):
            for turns in chunked(by_session.get(label, []), 500):
                R.delete().where(self._queued(persona, BAD) & (R.session_label == label) & R.turn_id.in_(turns)).execute()
        rows = [{"persona": persona, "reason": BAD, "session_label": session, "turn_id": turn, "skip": reason,
                 "detail": detail[:500], "seen_at": stamp, "fingerprint": fingerprints.get(turn, ""),
                 "checked_at": stamp} for session, turn, reason, detail in items]
        for part in chunked(rows, 200):
            R.replace_many(part).execute()  # a turn still bad: its reason and fingerprint are refreshed
        return len(still - known)

    def bad_to_check(self, persona: str, limit: int) -> list[tuple[str, str, str]]:
        """Up to ``limit`` bad (session, turn_id, fingerprint), least recently compared first."""
        R = self.Revisit
        q = (R.select(R.session_label, R.turn_id, R.fingerprint).where(self._queued(persona, BAD))
             .order_by(R.checked_at, R.session_label, R.turn_id).limit(limit))
        return list(q.tuples())

    def oldest_bad_check(self, persona: str) -> int | None:
        """When the least recently compared bad turn of ``persona`` was compared (ms; None: no bad turn)."""
        R = self.Revisit
        return R.select(fn.MIN(R.checked_at)).where(self._queued(persona, BAD)).scalar()

    def mark_bad_checked(self, persona: str, items: Iterable[tuple[str, str]], at: int | None = None) -> None:
        R = self.Revisit
        stamp = now_ms() if at is None else at
        for session, turn in items:
            R.update(checked_at=stamp).where(self._queued(persona, BAD) & (R.session_label == session)
                                             & (R.turn_id == turn)).execute()

    def bad_count(self, persona: str) -> int:
        return self.Revisit.select().where(self._queued(persona, BAD)).count()

    def clear_bad_turns(self, persona: str, items: Iterable[tuple[str, str]]) -> int:
        """Forget (session, turn_id) entries that built fine on a retry."""
        return self._clear_turns(persona, BAD, items)

    def bad_items(self, persona: str) -> list[tuple[str, str]]:
        R = self.Revisit
        return list(R.select(R.session_label, R.turn_id).where(self._queued(persona, BAD)).tuples())

    def bad_list(self, persona: str, limit: int = 50) -> list[dict]:
        """The skipped turns with their reasons, newest first (for status)."""
        R = self.Revisit
        q = (R.select(R.session_label, R.turn_id, R.skip, R.detail, R.seen_at).where(self._queued(persona, BAD))
             .order_by(R.seen_at.desc(), R.session_label, R.turn_id).limit(limit))
        return [{"session": s, "turn_id": t, "reason": r, "detail": d, "seen_at_ms": at} for s, t, r, d, at in q.tuples()]

    def clear_bad(self, persona: str) -> None:
        self.Revisit.delete().where(self._queued(persona, BAD)).execute()
