"""The files table: every indexed document's hash, and the turns and sessions it holds."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from peewee import chunked, fn

from indexer.core.types import Document
from indexer.state.schema import IN_LIMIT, now_ms
from indexer.state.store_base import StoreBase


@dataclass(frozen=True, slots=True)
class FileRecord:
    persona: str
    path: str
    source: str
    session: str | None
    turn_id: str | None
    kind: str
    content_hash: str
    updated_at: int



class DocumentStore(StoreBase):
    """Part of :class:`indexer.state.db.StateDB` (its ``File`` model)."""

    def hashes(self, persona: str, paths: Iterable[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        F = self.File
        for part in chunked(sorted(set(paths)), 500):
            q = F.select(F.path, F.content_hash).where((F.persona == persona) & F.path.in_(part))
            out.update(dict(q.tuples()))
        return out

    def paths(self, persona: str, *, session: str | None = None, source: str | None = None) -> set[str]:
        F = self.File
        q = F.select(F.path).where(F.persona == persona)
        if session is not None:
            q = q.where(F.session_label == session)
        if source is not None:
            q = q.where(F.source == source)
        return {p for (p,) in q.tuples()}

    def record_documents(self, docs: Sequence[Document]) -> None:
        stamp = now_ms()
        rows = [
            {
                "persona": d.persona, "path": d.path, "source": d.source.value, "session_label": d.session,
                "turn_id": d.turn_id, "kind": d.kind.value, "content_hash": d.content_hash, "updated_at": stamp,
            }
            for d in docs
        ]
        for part in chunked(rows, 200):
            self.File.replace_many(part).execute()

    def forget_documents(self, persona: str, paths: Iterable[str]) -> None:
        F = self.File
        for part in chunked(sorted(set(paths)), 500):
            F.delete().where((F.persona == persona) & F.path.in_(part)).execute()

    def record_truncated(self, persona: str, cut: Iterable[str], whole: Iterable[str], *, fresh: bool = False) -> None:
        """Documents holding a message cut at ledger.max_message_bytes (``cut``) and not (``whole``);
        ``fresh``: ``cut`` is every one."""
        T = self.TruncatedDocument
        if fresh:
            T.delete().where(T.persona == persona).execute()
        for part in chunked(sorted(set(cut)), 300):
            T.insert_many([{"persona": persona, "path": p} for p in part]).on_conflict_ignore().execute()
        whole = sorted(set(whole))
        if whole and not fresh and T.select().where(T.persona == persona).exists():
            for part in chunked(whole, 500):
                T.delete().where((T.persona == persona) & T.path.in_(part)).execute()

    def truncated_paths(self, persona: str) -> list[str]:
        T = self.TruncatedDocument
        return [p for (p,) in T.select(T.path).where(T.persona == persona).order_by(T.path).tuples()]

    def file(self, persona: str, path: str) -> FileRecord | None:
        F = self.File
        r = F.get_or_none((F.persona == persona) & (F.path == path))
        if r is None:
            return None
        return FileRecord(r.persona, r.path, r.source, r.session_label, r.turn_id, r.kind, r.content_hash,
                          r.updated_at)

    def document_count(self, persona: str) -> int:
        return self.File.select().where(self.File.persona == persona).count()

    def has_documents(self, persona: str) -> bool:
        """Whether any document of ``persona`` is recorded (one index probe: asked every pass)."""
        return self.File.select(self.File.path).where(self.File.persona == persona).limit(1).exists()

    def indexed_turn_counts(self, persona: str, sessions: Iterable[str]) -> dict[str, int]:
        """Per session label: how many of its turns have a document (for progress plans)."""
        F = self.File
        out: dict[str, int] = {}
        for part in chunked(sorted(set(sessions)), 500):
            q = (F.select(F.session_label, fn.COUNT(F.turn_id))
                 .where((F.persona == persona) & F.session_label.in_(part) & F.turn_id.is_null(False))
                 .group_by(F.session_label))
            out.update((label, int(n)) for label, n in q.tuples())
        return out

    def session_documents(self, persona: str, session: str) -> list[tuple[str, str | None]]:
        """(path, turn id) of every document of ``session``."""
        F = self.File
        return list(F.select(F.path, F.turn_id).where((F.persona == persona) & (F.session_label == session)).tuples())

    def indexed_turns(self, persona: str, session: str) -> set[str]:
        F = self.File
        q = F.select(F.turn_id).where((F.persona == persona) & (F.session_label == session))
        return {t for (t,) in q.tuples() if t}

    def paths_of_turns(self, persona: str, turns: Iterable[str], *, except_sessions: Iterable[str] = ()) -> set[str]:
        """Every document path of ``persona`` whose turn is one of ``turns`` (every session's copy but
        those of ``except_sessions``)."""
        F = self.File
        skip = set(except_sessions)
        out: set[str] = set()
        for part in chunked(sorted(set(turns)), 500):
            q = F.select(F.path, F.session_label).where((F.persona == persona) & F.turn_id.in_(part))
            out.update(p for p, label in q.tuples() if label not in skip)
        return out

    def sessions_of_turns(self, persona: str, turns: Iterable[str]) -> set[str]:
        """The sessions whose indexed history holds any of ``turns``."""
        return {label for labels in self.turn_holders(persona, turns).values() for label in labels if label}

    def session_turns(self, persona: str, sessions: Iterable[str]) -> dict[str, set[str]]:
        """Per session of ``sessions``, the turn ids of its indexed documents (one statement)."""
        labels = sorted(set(sessions))
        if not labels:
            return {}
        rows = self._rows_in("SELECT session_label, turn_id FROM files WHERE persona = ? AND turn_id IS NOT NULL"
                             " AND session_label IN ({marks})", persona, labels)
        out: dict[str, set[str]] = {label: set() for label in labels}
        for label, turn in rows:
            out[label].add(turn)
        return out

    def turn_holders(self, persona: str, turns: Iterable[str]) -> dict[str, set[str]]:
        """Per turn of ``turns``, the sessions whose indexed history holds it (by the index on turns).
        Plain SQL, not peewee: lists run to a private session's every own turn, and peewee's IN lists
        of 500 cost ~4 ms of interpreter time each."""
        ids = sorted(set(turns))
        if not ids:
            return {}
        rows = self._rows_in("SELECT turn_id, session_label FROM files WHERE persona = ? AND turn_id IN ({marks})",
                             persona, ids)
        out: dict[str, set[str]] = {}
        for turn, label in rows:
            out.setdefault(turn, set()).add(label)
        return out

    def _rows_in(self, sql: str, persona: str, values: Sequence[str]) -> list[tuple]:
        """``sql`` (``persona = ?`` first, then ``IN ({marks})``) over ``values``, IN_LIMIT at a time,
        each bound as a parameter: labels and ids may hold any character (SQLite's JSON functions cut a
        string at NUL)."""
        out: list[tuple] = []
        for part in chunked(values, IN_LIMIT):
            out.extend(self.db.execute_sql(sql.format(marks=",".join("?" * len(part))), (persona, *part)).fetchall())
        return out

    def turns_of(self, persona: str, sessions: Iterable[str]) -> set[str]:
        """Every turn id in the indexed history of ``sessions`` (their documents' turns)."""
        labels = sorted(set(sessions))
        if not labels:
            return set()
        F = self.File
        out: set[str] = set()
        for part in chunked(labels, 500):
            q = F.select(F.turn_id).where((F.persona == persona) & F.session_label.in_(part)
                                          & F.turn_id.is_null(False)).distinct()
            out.update(t for (t,) in q.tuples())
        return out

    def personas_indexed(self) -> list[str]:
        F = self.File
        return [p for (p,) in F.select(F.persona).distinct().tuples()]
