"""Turns and sessions a later pass comes back to: pending, bad and empty turns, owed secrets,
sessions to build."""

from __future__ import annotations

from collections.abc import Iterable

from peewee import chunked, fn

from indexer.state.schema import IN_LIMIT, now_ms

# Sessions a build of another persona found secret values for (the labels only, never a value):
# their persona's next pass reads them again (indexer.sync.secret_spread).
SECRET_RECHECK_KEY = "secret_recheck_v1"
# Sessions a tail pass found to build with no history row saying so (live again, moved here, first
# seen here with older history): recorded with the registry change, cleared once built — a pass that
# failed between the two would otherwise never build them.
SESSIONS_TO_BUILD_KEY = "sessions_to_build_v1"


class RevisitStore:
    """Part of :class:`indexer.state.db.StateDB` (its ``PendingTurn``, ``BadRow`` and ``EmptyTurn`` models)."""

    def secret_rechecks(self, persona: str) -> set[str]:
        return self._labels(SECRET_RECHECK_KEY, persona)

    def add_secret_rechecks(self, persona: str, labels: Iterable[str]) -> None:
        self._add_labels(SECRET_RECHECK_KEY, persona, labels)

    def clear_secret_rechecks(self, persona: str, labels: Iterable[str]) -> None:
        self._clear_labels(SECRET_RECHECK_KEY, persona, labels)

    def sessions_to_build(self, persona: str) -> set[str]:
        return self._labels(SESSIONS_TO_BUILD_KEY, persona)

    def add_sessions_to_build(self, persona: str, labels: Iterable[str]) -> None:
        self._add_labels(SESSIONS_TO_BUILD_KEY, persona, labels)

    def clear_sessions_to_build(self, persona: str, labels: Iterable[str] | None = None) -> None:
        """``labels`` built (None: every one, after a pass that built every session)."""
        if labels is None:
            self.delete_meta(SESSIONS_TO_BUILD_KEY, persona)
        else:
            self._clear_labels(SESSIONS_TO_BUILD_KEY, persona, labels)

    def _labels(self, key: str, persona: str) -> set[str]:
        return set(self.get_json(key, persona) or [])

    def _add_labels(self, key: str, persona: str, labels: Iterable[str]) -> None:
        labels, now = set(labels), self._labels(key, persona)
        if not labels <= now:
            self.set_json(key, sorted(now | labels), persona)

    def _clear_labels(self, key: str, persona: str, labels: Iterable[str]) -> None:
        labels, now = set(labels), self._labels(key, persona)
        if now & labels:
            self.set_json(key, sorted(now - labels), persona)

    def pending(self, persona: str) -> list[tuple[str, str]]:
        P = self.PendingTurn
        return list(P.select(P.session_label, P.turn_id).where(P.persona == persona).tuples())

    def record_empty(self, persona: str, empty: Iterable[tuple[str, str]], filled: Iterable[tuple[str, str]]) -> None:
        """(session, turn) pairs done with no text (``empty``), and pairs that made a document (``filled``)."""
        T = self.EmptyTurn
        rows = [{"persona": persona, "session_label": s, "turn_id": t} for s, t in set(empty)]
        for part in chunked(rows, 300):
            T.insert_many(part).on_conflict_ignore().execute()
        filled = sorted(set(filled))
        if filled and T.select().where(T.persona == persona).exists():  # a statement a part, not one a pair
            for part in chunked(filled, IN_LIMIT // 2):
                self.db.execute_sql(
                    "DELETE FROM empty_turns WHERE persona = ? AND (session_label, turn_id) IN"
                    f" (VALUES {','.join(['(?, ?)'] * len(part))})", (persona, *(v for pair in part for v in pair)))

    def forget_empty(self, persona: str) -> None:
        self.EmptyTurn.delete().where(self.EmptyTurn.persona == persona).execute()

    def forget_sessions(self, persona: str, labels: Iterable[str]) -> None:
        """Drop what ``persona`` keeps of ``labels`` besides documents: pending, bad and empty turns
        (the sessions left the persona)."""
        for part in chunked(sorted(set(labels)), 500):
            for table in (self.PendingTurn, self.BadRow, self.EmptyTurn):
                table.delete().where((table.persona == persona) & table.session_label.in_(part)).execute()

    def holders_of_late(self, persona: str, turns: Iterable[str]) -> list[tuple[str, str]]:
        """(session, turn) of ``turns`` indexed in ``persona`` (a document each) or done with no text."""
        ids = sorted(set(turns))
        if not ids:
            return []
        pairs = {(s, t) for t, sessions in self.turn_holders(persona, ids).items() for s in sessions if s}
        rows = self._rows_in("SELECT session_label, turn_id FROM empty_turns WHERE persona = ? AND turn_id IN ({marks})",
                             persona, ids)
        return sorted(pairs | set(rows))

    def pending_count(self, persona: str) -> int:
        return self.PendingTurn.select().where(self.PendingTurn.persona == persona).count()

    def set_pending(self, persona: str, items: Iterable[tuple[str, str]]) -> None:
        stamp = now_ms()
        rows = [{"persona": persona, "session_label": s, "turn_id": t, "seen_at": stamp} for s, t in items]
        for part in chunked(rows, 200):
            self.PendingTurn.insert_many(part).on_conflict_ignore().execute()

    def clear_pending(self, persona: str, items: Iterable[tuple[str, str]]) -> None:
        P = self.PendingTurn
        for session, turn in items:
            P.delete().where((P.persona == persona) & (P.session_label == session) & (P.turn_id == turn)).execute()

    def forget_source(self, persona: str) -> None:
        """Drop every per-source fact of ``persona`` (cursor, pending turns, bad
        rows, derived sets): the ledger they described is gone."""
        P, B, M = self.PendingTurn, self.BadRow, self.Meta
        with self.db.atomic():
            P.delete().where(P.persona == persona).execute()
            B.delete().where(B.persona == persona).execute()
            M.delete().where(M.scope == persona).execute()
            self.forget_empty(persona)

    # -- bad rows ------------------------------------------------------------------------

    def record_bad(self, persona: str, items: Iterable[tuple[str, str, str, str]],
                   fingerprints: dict[str, str] | None = None, *, sessions_built: Iterable[str] = ()) -> int:
        """Record (session, turn_id, reason, detail) as bad, with the fingerprint
        of the turn's rows (by turn id). ``sessions_built``: sessions whose every
        unindexed turn was just built again, so their bad rows not in ``items``
        are resolved (built fine, or no longer in the session's history).
        Returns how many (session, turn) pairs are newly bad."""
        stamp = now_ms()
        B = self.BadRow
        fingerprints = fingerprints or {}
        items = list({(i[0], i[1]): i for i in items}.values())
        known = {
            (s, t) for s, t in B.select(B.session_label, B.turn_id).where(B.persona == persona).tuples()
        }
        still = {(i[0], i[1]) for i in items}
        by_session: dict[str, list[str]] = {}
        for s, t in known:
            if (s, t) not in still:
                by_session.setdefault(s, []).append(t)
        for label in set(sessions_built):
            for part in chunked(by_session.get(label, []), 500):
                B.delete().where((B.persona == persona) & (B.session_label == label) & B.turn_id.in_(part)).execute()
        rows = [{"persona": persona, "session_label": session, "turn_id": turn, "reason": reason,
                 "detail": detail[:500], "seen_at": stamp, "fingerprint": fingerprints.get(turn, ""),
                 "checked_at": stamp} for session, turn, reason, detail in items]
        for part in chunked(rows, 200):
            B.replace_many(part).execute()  # a turn still bad: its reason and fingerprint are refreshed
        return len(still - known)

    def bad_to_check(self, persona: str, limit: int) -> list[tuple[str, str, str]]:
        """Up to ``limit`` bad (session, turn_id, fingerprint), least recently compared first."""
        B = self.BadRow
        q = (B.select(B.session_label, B.turn_id, B.fingerprint).where(B.persona == persona)
             .order_by(B.checked_at, B.session_label, B.turn_id).limit(limit))
        return list(q.tuples())

    def oldest_bad_check(self, persona: str) -> int | None:
        """When the least recently compared bad turn of ``persona`` was compared (ms; None: no bad turn)."""
        B = self.BadRow
        return B.select(fn.MIN(B.checked_at)).where(B.persona == persona).scalar()

    def mark_bad_checked(self, persona: str, items: Iterable[tuple[str, str]], at: int | None = None) -> None:
        B = self.BadRow
        stamp = now_ms() if at is None else at
        for session, turn in items:
            B.update(checked_at=stamp).where((B.persona == persona) & (B.session_label == session)
                                             & (B.turn_id == turn)).execute()

    def bad_count(self, persona: str) -> int:
        return self.BadRow.select().where(self.BadRow.persona == persona).count()

    def clear_bad_turns(self, persona: str, items: Iterable[tuple[str, str]]) -> int:
        """Forget (session, turn_id) entries that built fine on a retry."""
        B = self.BadRow
        n = 0
        for session, turn in set(items):
            n += B.delete().where((B.persona == persona) & (B.session_label == session)
                                  & (B.turn_id == turn)).execute()
        return n

    def bad_items(self, persona: str) -> list[tuple[str, str]]:
        B = self.BadRow
        return list(B.select(B.session_label, B.turn_id).where(B.persona == persona).tuples())

    def bad_list(self, persona: str, limit: int = 50) -> list[dict]:
        """The skipped turns with their reasons, newest first (for status)."""
        B = self.BadRow
        q = (B.select(B.session_label, B.turn_id, B.reason, B.detail, B.seen_at).where(B.persona == persona)
             .order_by(B.seen_at.desc(), B.session_label, B.turn_id).limit(limit))
        return [{"session": s, "turn_id": t, "reason": r, "detail": d, "seen_at_ms": at} for s, t, r, d, at in q.tuples()]

    def clear_bad(self, persona: str) -> None:
        self.BadRow.delete().where(self.BadRow.persona == persona).execute()
