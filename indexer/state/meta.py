"""Where each persona's passes stand (its cursor, a typed :class:`Position`), what its index was built
with, and the few global values of ``meta`` (schema version, the ledger's identity)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from indexer.core.build import BuildIdentity
from indexer.state.schema import GLOBAL
from indexer.state.store_base import StoreBase

#: the identity of the ledger file the cursors are positions in (global: one ledger per index)
LEDGER_IDENTITY_KEY = "ledger_identity_v1"


@dataclass(frozen=True, slots=True)
class Position:
    """How far a persona's passes have read ``session_history``: every row up to ``history_id`` was
    processed; ``row`` is the digest of the row at ``history_id`` when it was (a pass that finds
    another row there knows ids were reused below the cursor), None until recorded."""

    history_id: int
    row: str | None = None

    def valid_at(self, head: int) -> bool:
        """Whether a tail can go on from here: the ledger was not rewound below it."""
        return self.history_id <= head


@dataclass(frozen=True, slots=True)
class PersonaRecord:
    """A persona's row as a pass plans from it, read in one lookup: where its passes stand, what its
    index was built with, and why its next pass must walk every session (None: it need not)."""

    position: Position | None
    build_identity: BuildIdentity | None
    backfill_due: str | None


class MetaStore(StoreBase):
    """Part of :class:`indexer.state.db.StateDB` (its ``Meta`` and ``PersonaState`` models)."""

    def get_meta(self, key: str, scope: str = GLOBAL) -> str | None:
        row = self.Meta.get_or_none((self.Meta.key == key) & (self.Meta.scope == scope))
        return row.value if row else None

    def set_meta(self, key: str, value: str, scope: str = GLOBAL) -> None:
        self.Meta.replace(key=key, scope=scope, value=value).execute()

    def delete_meta(self, key: str, scope: str = GLOBAL) -> None:
        self.Meta.delete().where((self.Meta.key == key) & (self.Meta.scope == scope)).execute()

    def ledger_identity(self) -> str | None:
        return self.get_meta(LEDGER_IDENTITY_KEY)

    def set_ledger_identity(self, identity: str) -> None:
        self.set_meta(LEDGER_IDENTITY_KEY, identity)

    # -- per persona -----------------------------------------------------------------

    def _persona_row(self, persona: str):
        return self.PersonaState.get_or_none(self.PersonaState.persona == persona)

    def _set_persona(self, persona: str, **values) -> None:
        P = self.PersonaState
        P.insert(persona=persona, **values).on_conflict(conflict_target=[P.persona], update=values).execute()

    def persona_record(self, persona: str) -> PersonaRecord:
        row = self._persona_row(persona)
        if row is None:
            return PersonaRecord(None, None, None)
        return PersonaRecord(
            Position(row.cursor, row.cursor_row) if row.cursor is not None else None,
            BuildIdentity.from_dict(json.loads(row.build_identity)) if row.build_identity else None,
            row.backfill_due)

    def position(self, persona: str) -> Position | None:
        row = self._persona_row(persona)
        return Position(row.cursor, row.cursor_row) if row is not None and row.cursor is not None else None

    def get_cursor(self, persona: str) -> int | None:
        position = self.position(persona)
        return position.history_id if position else None

    def set_cursor(self, persona: str, cursor: int) -> None:
        """Move the cursor; the row digest kept for the old one no longer applies."""
        before = self.position(persona)
        if before is None or before.history_id != int(cursor):
            self._set_persona(persona, cursor=int(cursor), cursor_row=None)

    def set_cursor_row(self, persona: str, position: Position) -> None:
        """Record the digest of the row at the cursor (only while the cursor is still there)."""
        if self.position(persona) != position:
            P = self.PersonaState
            P.update(cursor_row=position.row).where((P.persona == persona)
                                                   & (P.cursor == position.history_id)).execute()

    def clear_cursor(self, persona: str) -> None:
        P = self.PersonaState
        P.update(cursor=None, cursor_row=None).where(P.persona == persona).execute()

    def build_identity(self, persona: str) -> BuildIdentity | None:
        """What the persona's index was built with (None before its first complete build)."""
        row = self._persona_row(persona)
        return BuildIdentity.from_dict(json.loads(row.build_identity)) if row and row.build_identity else None

    def set_build_identity(self, persona: str, identity: BuildIdentity) -> None:
        """Record a complete build (with the cursor, in the caller's transaction)."""
        self._set_persona(persona, build_identity=json.dumps(identity.as_dict(), sort_keys=True))

    def built_personas(self) -> list[str]:
        """Every persona with a complete build recorded."""
        P = self.PersonaState
        return [p for (p,) in P.select(P.persona).where(P.build_identity.is_null(False)).order_by(P.persona).tuples()]

    def backfill_due(self, persona: str) -> str | None:
        """Why the next pass of ``persona`` must walk every session (None: it need not)."""
        row = self._persona_row(persona)
        return row.backfill_due if row else None

    def set_backfill_due(self, persona: str, why: str | None) -> None:
        if why is not None or self.backfill_due(persona) is not None:
            self._set_persona(persona, backfill_due=why)

    def forget_persona_state(self, persona: str) -> None:
        self.PersonaState.delete().where(self.PersonaState.persona == persona).execute()

    # -- late messages (indexer.sync.late) ---------------------------------------------------

    def late_mark(self, persona: str) -> tuple[tuple[int, str | None, str | None], ...] | None:
        """The rows of ``messages`` the persona's passes had read, oldest first (rowid, message id,
        keyed row digest); None: none recorded."""
        C = self.LateCheckpoint
        q = C.select(C.row, C.message_id, C.row_key).where(C.persona == persona).order_by(C.position)
        return tuple(q.tuples()) or None

    def set_late_mark(self, persona: str, checkpoints) -> None:
        C = self.LateCheckpoint
        C.delete().where(C.persona == persona).execute()
        C.insert_many([{"persona": persona, "position": i, "row": r, "message_id": m, "row_key": k}
                       for i, (r, m, k) in enumerate(checkpoints)]).execute()

