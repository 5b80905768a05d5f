"""Meta rows: the schema version, and the per-persona facts kept as values (cursor, build identity)."""

from __future__ import annotations

import json

from indexer.core.build import BuildIdentity
from indexer.state.schema import GLOBAL

CURSOR_KEY = "memory_sessions_ledger_cursor_v1"
INDEX_META_KEY = "memory_index_meta_v1"


class MetaStore:
    """Part of :class:`indexer.state.db.StateDB` (its ``Meta`` model)."""

    def get_meta(self, key: str, scope: str = GLOBAL) -> str | None:
        row = self.Meta.get_or_none((self.Meta.key == key) & (self.Meta.scope == scope))
        return row.value if row else None

    def set_meta(self, key: str, value: str, scope: str = GLOBAL) -> None:
        self.Meta.replace(key=key, scope=scope, value=value).execute()

    def delete_meta(self, key: str, scope: str = GLOBAL) -> None:
        self.Meta.delete().where((self.Meta.key == key) & (self.Meta.scope == scope)).execute()

    def get_cursor(self, persona: str) -> int | None:
        value = self.get_meta(CURSOR_KEY, persona)
        return int(value) if value is not None else None

    def set_cursor(self, persona: str, cursor: int) -> None:
        self.set_meta(CURSOR_KEY, str(int(cursor)), persona)

    def clear_cursor(self, persona: str) -> None:
        self.delete_meta(CURSOR_KEY, persona)

    def build_identity(self, persona: str) -> BuildIdentity | None:
        """What the persona's index was built with (None before its first complete build)."""
        return BuildIdentity.from_dict(self.get_json(INDEX_META_KEY, persona))

    def set_build_identity(self, persona: str, identity: BuildIdentity) -> None:
        """Record a complete build (with the cursor, in the caller's transaction)."""
        self.set_json(INDEX_META_KEY, identity.as_dict(), persona)

    def meta_scopes(self, key: str) -> list[str]:
        """Every scope (persona) holding a meta row under ``key``."""
        M = self.Meta
        return [scope for (scope,) in M.select(M.scope).where(M.key == key).order_by(M.scope).tuples()]

    def get_json(self, key: str, scope: str = GLOBAL) -> dict | None:
        value = self.get_meta(key, scope)
        return json.loads(value) if value else None

    def set_json(self, key: str, value: dict, scope: str = GLOBAL) -> None:
        self.set_meta(key, json.dumps(value, sort_keys=True), scope)

    def add_counter(self, key: str, scope: str, delta: int) -> None:
        if delta:
            current = int(self.get_meta(key, scope) or 0)
            self.set_meta(key, str(current + delta), scope)

    def counter(self, key: str, scope: str) -> int:
        return int(self.get_meta(key, scope) or 0)
