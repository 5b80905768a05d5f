"""The session registry (each session's persona, ledger status and visibility) and projects."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from peewee import chunked

from indexer.state.private_turns import Visibility
from indexer.state.schema import now_ms
from indexer.state.store_base import StoreBase


@dataclass(frozen=True, slots=True)
class SessionRecord:
    label: str
    persona: str
    ledger_status: str
    visibility: str



class SessionRegistry(StoreBase):
    """Part of :class:`indexer.state.db.StateDB` (its ``SessionReg`` and ``ProjectMember`` models)."""

    def register_sessions(self, rows: Iterable[tuple[str, str, str]]) -> None:
        """Upsert (label, persona, ledger_status); visibility is kept."""
        stamp = now_ms()
        S = self.SessionReg
        for label, persona, status in rows:
            S.insert(label=label, persona=persona, ledger_status=status, visibility=Visibility.SHARED,
                     first_seen=stamp, updated_at=stamp).on_conflict(
                conflict_target=[S.label],
                update={S.persona: persona, S.ledger_status: status, S.updated_at: stamp},
            ).execute()

    def session_statuses(self, persona: str) -> dict[str, str]:
        S = self.SessionReg
        return dict(S.select(S.label, S.ledger_status).where(S.persona == persona).tuples())

    def registered_personas(self, labels: Iterable[str]) -> dict[str, str]:
        """The registered persona of each of ``labels`` that is registered."""
        S = self.SessionReg
        out: dict[str, str] = {}
        for part in chunked(sorted(set(labels)), 500):
            out.update(S.select(S.label, S.persona).where(S.label.in_(part)).tuples())
        return out

    def session(self, label: str) -> SessionRecord | None:
        r = self.SessionReg.get_or_none(self.SessionReg.label == label)
        return SessionRecord(r.label, r.persona, r.ledger_status, r.visibility) if r else None

    def set_visibility(self, label: str, visibility: str) -> bool:
        if visibility not in (Visibility.SHARED, Visibility.PRIVATE):
            raise ValueError(f"visibility must be 'shared' or 'private', not {visibility!r}")
        S = self.SessionReg
        return S.update(visibility=visibility, updated_at=now_ms()).where(S.label == label).execute() > 0

    # -- projects --------------------------------------------------------------------

    def project_add(self, project: str, labels: Iterable[str]) -> None:
        stamp = now_ms()
        rows = [{"project": project, "session_label": lbl, "added_at": stamp} for lbl in labels]
        for part in chunked(rows, 200):
            self.ProjectMember.insert_many(part).on_conflict_ignore().execute()

    def project_remove(self, project: str, labels: Iterable[str]) -> int:
        P = self.ProjectMember
        return P.delete().where((P.project == project) & P.session_label.in_(list(labels))).execute()

    def projects(self) -> dict[str, list[str]]:
        P = self.ProjectMember
        out: dict[str, list[str]] = {}
        for project, label in P.select(P.project, P.session_label).order_by(P.project, P.session_label).tuples():
            out.setdefault(project, []).append(label)
        return out

    def project_peers(self, label: str) -> set[str]:
        """Every session sharing a project with ``label`` (itself included)."""
        P = self.ProjectMember
        mine = P.select(P.project).where(P.session_label == label)
        peers = {lbl for (lbl,) in P.select(P.session_label).where(P.project.in_(mine)).tuples()}
        return peers | {label}

    def hidden_sessions(self, persona: str) -> set[str]:
        """Sessions of ``persona`` that other sessions must never see: private or deleted."""
        S = self.SessionReg
        q = S.select(S.label).where(
            (S.persona == persona) & ((S.visibility == Visibility.PRIVATE) | (S.ledger_status == "deleted"))
        )
        return {lbl for (lbl,) in q.tuples()}

    def session_personas(self) -> set[str]:
        """Personas with a session in the registry (a small table: cheaper than ``personas_indexed``)."""
        S = self.SessionReg
        return {p for (p,) in S.select(S.persona).distinct().tuples()}

    def personas_with_live_sessions(self) -> set[str]:
        """Personas with a registered session the ledger did not delete (every pass asks: reused while
        the state DB is unchanged)."""
        S = self.SessionReg
        return set(self._per_state(("live personas",), lambda: {
            p for (p,) in S.select(S.persona).where(S.ledger_status != "deleted").distinct().tuples()}))

    def personas_with_private_sessions(self) -> set[str]:
        S = self.SessionReg
        return {p for (p,) in S.select(S.persona).where(S.visibility == Visibility.PRIVATE).distinct().tuples()}

    def private_sessions(self, persona: str) -> set[str]:
        S = self.SessionReg
        q = S.select(S.label).where((S.persona == persona) & (S.visibility == Visibility.PRIVATE))
        return {lbl for (lbl,) in q.tuples()}

    def deleted_sessions(self, persona: str) -> set[str]:
        S = self.SessionReg
        q = S.select(S.label).where((S.persona == persona) & (S.ledger_status == "deleted"))
        return {lbl for (lbl,) in q.tuples()}

    # -- what sinks without scopes were brought in line with (indexer.sync.visibility) ------------

    def unscoped_applied(self, persona: str) -> tuple[set[str], set[str]] | None:
        """(hidden sessions, hidden turns) last applied to sinks without scopes; None: never applied."""
        row = self.PersonaState.get_or_none(self.PersonaState.persona == persona)
        if row is None or not row.unscoped_applied:
            return None
        U = self.UnscopedHidden
        out: dict[str, set[str]] = {"session": set(), "turn": set()}
        for kind, value in U.select(U.kind, U.value).where(U.persona == persona).tuples():
            out[kind].add(value)
        return out["session"], out["turn"]

    def set_unscoped_applied(self, persona: str, sessions: set[str], turns: set[str]) -> None:
        U = self.UnscopedHidden
        before = self.unscoped_applied(persona) or (set(), set())
        with self.db.atomic():
            for kind, now, was in (("session", sessions, before[0]), ("turn", turns, before[1])):
                for values in chunked(sorted(was - now), 500):
                    U.delete().where((U.persona == persona) & (U.kind == kind) & U.value.in_(values)).execute()
                rows = [{"persona": persona, "kind": kind, "value": v} for v in sorted(now - was)]
                for part in chunked(rows, 300):
                    U.insert_many(part).on_conflict_ignore().execute()
            self._set_persona(persona, unscoped_applied=1)

