"""Batched, read-only queries over the ledger, returning typed rows.

Every method takes a list of ids and issues a fixed number of queries for it
(``IN`` lists of at most :data:`IN_LIMIT`), never one per turn. Call the
methods inside :meth:`LedgerReader.snapshot` so that one batch reads one
consistent state and the read transaction stays short.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from peewee import Case, Cast, SqliteDatabase, Value, fn

from ledger.connection import RAW, open_ledger
from ledger.models import BoundModels
from ledger.rows import (
    CompactionRow,
    HistoryRow,
    MessageRow,
    SessionRow,
    ThreadRow,
    TurnRow,
)

IN_LIMIT = 500
# Messages above this size are not loaded; the sync skips their document.
DEFAULT_MAX_MESSAGE_BYTES = 1_000_000


def _integer(value) -> int | None:
    """An integer column's value, or None when it holds something else (text, a blob, a fraction):
    SQLite keeps whatever a writer stored, whatever the declared type."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _lenient_int(value) -> int:
    """For fields no document is made of (when a session or history row changed): 0 when unreadable."""
    return _integer(value) or 0


def row_digest(key) -> str | None:
    """The digest kept of a ``messages`` row's key (``LedgerReader._ROW_KEY``): the key holds the
    message's first and last bytes, which the state DB must never store."""
    if key is None:
        return None
    return hashlib.sha256(str(key).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _raw(column, name: str):
    """``column`` read as stored (bytes stay bytes: ``ledger.connection.text_row``)."""
    return column.alias(RAW + name)


def _wrong(column: str, value) -> str:
    """What is wrong, never the value itself (status shows it; a ledger field may hold anything)."""
    if isinstance(value, (bytes, bytearray)):
        what = f"a blob of {len(value)} bytes"
    elif isinstance(value, str):
        what = f"text of {len(value)} characters"
    else:
        what = f"a {type(value).__name__}"
    return f"{column} is not an integer ({what})"


def _stored_forms(texts: Iterable[str]) -> list:
    """Each text as SQL compares it to a stored value: as text, and as the BLOB of its UTF-8 bytes
    (a runtime that binds bytes stores a BLOB, which equals no text). Both forms use the index."""
    texts = list(texts)
    return texts + [Value(t.encode("utf-8", "surrogatepass"), converter=False) for t in texts]


def _chunks(ids: Sequence[str], size: int = IN_LIMIT) -> Iterator[list[str]]:
    for start in range(0, len(ids), size):
        yield list(ids[start : start + size])


class LedgerReader:
    def __init__(self, db: SqliteDatabase, *, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES):
        self.db = db
        self.m = BoundModels(db)
        self.max_message_bytes = max_message_bytes
        tables = {r[0] for r in db.execute_sql("SELECT name FROM sqlite_master WHERE type='table'")}
        self.has_compactions = "compactions" in tables

    @classmethod
    def open(cls, path: str | Path, **kwargs) -> LedgerReader:
        return cls(open_ledger(path), **kwargs)

    def close(self) -> None:
        self.db.close()

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[LedgerReader]:
        """One short read transaction: every query inside sees the same state."""
        with self.db.atomic():
            yield self

    # -- session_history --------------------------------------------------

    def head_id(self) -> int:
        value = self.m.SessionHistory.select(fn.MAX(self.m.SessionHistory.id)).scalar()
        return int(value or 0)

    def identity(self) -> str | None:
        """A fingerprint of the ledger's first history row: it changes when the
        file is replaced by another ledger, even one with a longer history."""
        h = self.m.SessionHistory
        # as stored: a label bound as bytes keeps the fingerprint it always had
        row = (h.select(h.id, _raw(h.session_label, "label"), _raw(h.thread_id, "thread"), h.changed_at)
               .order_by(h.id).limit(1).tuples().first())
        if row is None:
            return None
        return hashlib.sha256(repr(tuple(row)).encode("utf-8", "surrogatepass")).hexdigest()[:24]

    def history_row_fingerprint(self, row_id: int) -> str | None:
        """A digest of the history row ``row_id`` (None if there is none): if it
        changes, rows at or below that id were deleted and the id reused."""
        h = self.m.SessionHistory
        row = (h.select(_raw(h.session_label, "label"), _raw(h.thread_id, "thread"), h.changed_at)
               .where(h.id == row_id).tuples().first())
        if row is None:
            return None
        return hashlib.sha256(repr(tuple(row)).encode("utf-8", "surrogatepass")).hexdigest()[:24]

    def history_after(
        self, cursor: int, *, upto: int, persona: str | None = None, limit: int = 2000
    ) -> list[HistoryRow]:
        """Rows with ``cursor < id <= upto`` in id order (of ``persona``'s sessions)."""
        h = self.m.SessionHistory
        query = h.select(h.id, h.session_label, h.thread_id, h.changed_at)
        if persona is not None:
            query = query.join(self.m.Session, on=(self.m.Session.label == h.session_label)).where(
                self.m.Session.persona_id == persona
            )
        query = query.where((h.id > cursor) & (h.id <= upto)).order_by(h.id).limit(limit)
        return [HistoryRow(int(i), lbl, tid, _lenient_int(ts)) for i, lbl, tid, ts in query.tuples()]

    #: what tells a ``messages`` row apart beyond its id: a row deleted and written anew at the same rowid
    #: under the same id, or edited in place, differs in its time, length or ends. It holds bytes of the
    #: message itself (any role, unredacted): only its digest (:func:`row_digest`) leaves the reader.
    _ROW_KEY = ("ifnull(created_at, '') || '|' || ifnull(length(CAST(content AS BLOB)), -1) || '|' || "
                "ifnull(hex(substr(CAST(content AS BLOB), 1, 64)), '') || '|' || "
                "ifnull(hex(substr(CAST(content AS BLOB), -64)), '')")

    def messages_checkpoints(self, back: Sequence[int] = (0,)) -> list[tuple[int, str | None, str | None]]:
        """(rowid, id, key) of the newest ``messages`` row and of the rows ``back`` places before it
        (those that exist), oldest first; ``[(0, None, None)]`` for an empty table."""
        out = []
        for offset in sorted(set(back), reverse=True):
            row = self.db.execute_sql(f"SELECT rowid, id, {self._ROW_KEY} FROM messages ORDER BY rowid DESC "
                                      "LIMIT 1 OFFSET ?", (offset,)).fetchone()
            if row is not None:
                out.append((int(row[0]), row[1], row_digest(row[2])))
        return list(dict.fromkeys(out)) or [(0, None, None)]

    def message_at(self, rowid: int) -> tuple[str | None, str | None]:
        """(id, key) of the ``messages`` row at ``rowid`` ((None, None): none there)."""
        row = self.db.execute_sql(f"SELECT id, {self._ROW_KEY} FROM messages WHERE rowid = ?", (rowid,)).fetchone()
        return (row[0], row_digest(row[1])) if row else (None, None)

    def late_messages(self, after: int, upto: int) -> set[str]:
        """The turns of the user/assistant messages at rowids ``after < rowid <= upto``: a rowid range
        of the table's own b-tree, so only those rows are read."""
        rows = self.db.execute_sql(
            "SELECT DISTINCT turn_id FROM messages WHERE rowid > ? AND rowid <= ? AND role IN ('user', 'assistant')",
            (after, upto)).fetchall()
        return {turn for (turn,) in rows}

    # -- sessions, threads, turns -------------------------------------------

    def personas(self) -> list[str]:
        q = self.m.Session.select(self.m.Session.persona_id).distinct().order_by(self.m.Session.persona_id)
        return [p for (p,) in q.tuples() if p is not None]

    def sessions(
        self, *, persona: str | None = None, labels: Iterable[str] | None = None,
        history_range: tuple[int, int] | None = None,
    ) -> list[SessionRow]:
        """Sessions by persona, by label, or those with a history row in
        ``history_range`` (cursor, upto]. The last matches labels in SQL, on
        the stored values. A label that is not valid UTF-8 reads back altered
        (lenient decoding: U+FFFD) and matches no stored value, so ``labels``
        holding one are also compared as read back, over the persona's sessions."""
        s = self.m.Session
        fields = (s.label, s.thread_id, s.persona_id, s.status, s.created_at, s.updated_at)
        named = s.label.is_null(False)  # a TEXT primary key admits NULL: a session no row can name
        out: list[SessionRow] = []
        if history_range is not None:
            h = self.m.SessionHistory
            moved = h.select(h.session_label).where((h.id > history_range[0]) & (h.id <= history_range[1]))
            q = s.select(*fields).where(s.label.in_(moved) & named)
            if persona is not None:
                q = q.where(s.persona_id == persona)
            batches = [q.order_by(s.label)]
        elif labels is None:
            q = s.select(*fields).where(named)
            if persona is not None:
                q = q.where(s.persona_id == persona)
            batches = [q.order_by(s.label)]
        else:
            batches = []
            wanted = set(labels)
            for part in _chunks(sorted(wanted)):
                q = s.select(*fields).where(s.label.in_(_stored_forms(part)))
                if persona is not None:
                    q = q.where(s.persona_id == persona)
                batches.append(q)
            if any("\ufffd" in label for label in wanted):
                # read back from bytes that are not UTF-8: no stored value equals it; compare read back
                q = s.select(*fields).where(named)
                batches.append(q.where(s.persona_id == persona) if persona is not None else q)
        seen: set[tuple] = set()
        for q in batches:
            for row in q.tuples():
                label, thread_id, persona_id, status, created, updated = row
                if labels is not None and (label not in wanted or row in seen):
                    continue
                seen.add(row)
                out.append(
                    SessionRow(
                        label=label,
                        thread_id=thread_id,
                        persona=persona_id,
                        status=status or "active",
                        created_at=_lenient_int(created),
                        updated_at=_lenient_int(updated),
                    )
                )
        return out

    def ancestry_lengths(self, persona: str, *, history_range: tuple[int, int] | None = None) -> dict[str, int]:
        """Per session of ``persona`` that is not deleted (only those with a history row in
        ``history_range`` when given): how many distinct turns its head's ancestry names.
        One query, counted by SQLite's JSON functions without loading the ancestries: what a
        progress bar needs before the work starts. A session whose ancestry is not a JSON
        array counts 0 (the sync skips it); a missing one counts 1 (the head alone)."""
        sql = (
            "SELECT s.label, CASE WHEN t.ancestry IS NULL THEN 1"
            " WHEN json_valid(t.ancestry) AND json_type(t.ancestry) = 'array'"
            " THEN max(1, (SELECT count(DISTINCT j.value) FROM json_each(t.ancestry) AS j)) ELSE 0 END"
            " FROM sessions AS s JOIN threads AS t ON t.turn_id = s.thread_id"
            " WHERE s.persona_id = ? AND s.status IS NOT 'deleted' AND s.label IS NOT NULL"
        )
        params: list = [persona]
        if history_range is not None:
            sql += " AND s.label IN (SELECT session_label FROM session_history WHERE id > ? AND id <= ?)"
            params += [history_range[0], history_range[1]]
        return {label: int(n or 0) for label, n in self.db.execute_sql(sql, params).fetchall()}

    def threads(self, turn_ids: Iterable[str]) -> dict[str, ThreadRow]:
        out: dict[str, ThreadRow] = {}
        t = self.m.Thread
        for part in _chunks(sorted(set(turn_ids))):
            q = t.select(t.turn_id, t.ancestry, t.persona_id).where(t.turn_id.in_(part))
            for turn_id, ancestry, persona in q.tuples():
                out[turn_id] = ThreadRow(turn_id, ancestry, persona)
        return out

    def parent_chain(self, turn_id: str, *, limit: int = 100_000) -> list[str] | None:
        """The history ending at ``turn_id`` read from ``turns.parent_turn_id`` (root first), for a
        thread row whose ancestry is NULL (the column allows it). None when the chain is broken: a
        parent that is not in ``turns``, a cycle, or longer than ``limit``."""
        parents = dict(self._chain_rows(turn_id, limit))
        chain, at = [], turn_id
        while at is not None:
            if at not in parents or len(chain) > limit:
                return None  # missing, a parent not there, a cycle (visited once: its end is missing)
            chain.append(at)
            at = parents.pop(at)
        return chain[::-1]

    def reachable_parents(self, turn_id: str, *, limit: int = 100_000) -> list[str]:
        """Every turn up the parents from ``turn_id`` (itself included) as far as they lead, however
        the chain ends: for a session whose head cannot be read, what its history may hold."""
        return [i for i, _p in self._chain_rows(turn_id, limit)]

    def history_heads(self, label: str) -> list[str]:
        """Every turn a ``session_history`` row of session ``label`` pointed it at (its heads over time)."""
        h = self.m.SessionHistory
        q = h.select(h.thread_id).where(h.session_label.in_(_stored_forms([label])))
        return sorted({t for (t,) in q.tuples()})

    def _chain_rows(self, turn_id: str, limit: int = 100_000) -> list[tuple[str, str | None]]:
        """(id, parent) of every turn up the parents from ``turn_id``, each once (UNION: a cycle ends
        where it closes). One recursive query."""
        rows = self.db.execute_sql(
            "WITH RECURSIVE chain(id, parent) AS ("
            " SELECT id, parent_turn_id FROM turns WHERE id = ?"
            " UNION SELECT t.id, t.parent_turn_id FROM turns t JOIN chain c ON t.id = c.parent)"
            " SELECT id, parent FROM chain LIMIT ?", (turn_id, limit + 1)).fetchall()
        return [(i, p) for i, p in rows]

    def turns(self, turn_ids: Iterable[str]) -> dict[str, TurnRow]:
        out: dict[str, TurnRow] = {}
        t = self.m.Turn
        for part in _chunks(sorted(set(turn_ids))):
            q = t.select(
                t.id, t.parent_turn_id, t.turn_type, t.status, t.started_at,
                t.completed_at, t.model, t.provider,
            ).where(t.id.in_(part))
            for row in q.tuples():
                tid, parent, ttype, status, started, completed, model, provider = row
                problem = None
                if started is not None and _integer(started) is None:
                    problem = _wrong("turns.started_at", started)
                elif completed is not None and _integer(completed) is None:
                    problem = _wrong("turns.completed_at", completed)
                out[tid] = TurnRow(
                    id=tid,
                    parent_turn_id=parent,
                    turn_type=ttype or "normal",
                    status=status or "pending",
                    started_at=_integer(started) or 0,
                    completed_at=_integer(completed) if completed is not None else None,
                    model=model,
                    provider=provider,
                    problem=problem,
                )
        return out

    def messages(self, turn_ids: Iterable[str]) -> dict[str, list[MessageRow]]:
        """User and assistant messages per turn, in ``sequence`` order.

        System and tool messages are filtered in SQL: they never leave the
        ledger. Oversized content is not transferred (``content`` None,
        ``length`` set) so one 5 MB paste cannot bloat a batch.
        """
        out: dict[str, list[MessageRow]] = defaultdict(list)
        msg = self.m.Message
        length, capped = self._capped(msg.content)
        for part in _chunks(sorted(set(turn_ids))):
            q = (
                msg.select(msg.id, msg.turn_id, msg.role, capped, length, msg.sequence)
                .where(msg.turn_id.in_(part) & msg.role.in_(("user", "assistant")))
                .order_by(msg.turn_id, msg.sequence, msg.id)
            )
            for mid, tid, role, content, size, seq in q.tuples():
                text, cut = self._text(content, size)
                problem = _wrong("messages.sequence", seq) if seq is not None and _integer(seq) is None else None
                out[tid].append(MessageRow(mid, tid, role, text,
                                           int(size) if size is not None else None, _integer(seq) or 0, cut, problem))
        return dict(out)

    def _capped(self, column):
        """(byte length, content) select expressions. ``length()`` of TEXT
        counts characters and stops at a NUL; of a BLOB it counts bytes. Over
        the limit only the first ``limit + 3`` bytes are transferred (enough
        to cut on a character boundary)."""
        size = fn.length(Cast(column, "BLOB"))
        head = fn.substr(Cast(column, "BLOB"), 1, self.max_message_bytes + 3)
        return size, _raw(Case(None, [(size > self.max_message_bytes, head)], column), "text")

    def _text(self, content, size) -> tuple[str | None, int]:
        if not isinstance(content, (bytes, bytearray)):
            return content, 0
        limit = self.max_message_bytes
        if len(content) <= limit:  # a BLOB stored whole (not a cut head): its bytes as text
            return bytes(content).decode("utf-8", "replace"), 0
        cut = limit
        while cut > 0 and (content[cut] & 0xC0) == 0x80:
            cut -= 1  # back to the start of the character the limit falls in
        return bytes(content[:cut]).decode("utf-8", "replace"), int(size) - cut

    def turn_fingerprints(self, turn_ids: Iterable[str]) -> dict[str, str]:
        """A digest of every ledger row a turn's document is built from (its
        threads row, turns row, user/assistant messages and compaction), per turn
        id, absent rows included. Four batched queries per IN_LIMIT ids. Text is
        digested by byte length, first and last 64 bytes: enough to notice a row
        repaired in place without reading megabytes for it."""
        ids = sorted(set(turn_ids))
        parts: dict[str, list] = {t: [] for t in ids}
        th, tu, msg = self.m.Thread, self.m.Turn, self.m.Message

        def text_digest(column):
            blob = Cast(column, "BLOB")
            return (fn.length(blob), _raw(fn.substr(blob, 1, 64), "head"), _raw(fn.substr(blob, -64), "tail"))

        for part in _chunks(ids):
            for row in th.select(th.turn_id, *text_digest(th.ancestry)).where(th.turn_id.in_(part)).tuples():
                parts[row[0]].append(("thread", row[1:]))
                if row[1] is None:  # a NULL ancestry is read from the parents: mending one of them counts
                    parts[row[0]].append(("chain", tuple(self._chain_rows(row[0]))))
            q = (tu.select(tu.id, tu.turn_type, tu.status, tu.started_at, tu.completed_at, tu.parent_turn_id)
                 .where(tu.id.in_(part)))
            for row in q.tuples():
                parts[row[0]].append(("turn", row[1:]))
            q = (msg.select(msg.turn_id, msg.id, msg.role, msg.sequence, *text_digest(msg.content))
                 .where(msg.turn_id.in_(part) & msg.role.in_(("user", "assistant")))
                 .order_by(msg.turn_id, msg.sequence, msg.id))
            for row in q.tuples():
                parts[row[0]].append(("message", row[1:]))
            if self.has_compactions:
                c = self.m.Compaction
                for row in c.select(c.turn_id, *text_digest(c.summary)).where(c.turn_id.in_(part)).tuples():
                    parts[row[0]].append(("compaction", row[1:]))
        return {t: hashlib.sha256(repr(rows).encode("utf-8", "surrogatepass")).hexdigest()[:24]
                for t, rows in parts.items()}

    def compactions(self, turn_ids: Iterable[str]) -> dict[str, CompactionRow]:
        if not self.has_compactions:
            return {}
        out: dict[str, CompactionRow] = {}
        c = self.m.Compaction
        length, capped = self._capped(c.summary)
        for part in _chunks(sorted(set(turn_ids))):
            q = c.select(c.turn_id, capped, length, c.model, c.provider).where(c.turn_id.in_(part))
            for tid, summary, size, model, provider in q.tuples():
                text, cut = self._text(summary, size)
                out[tid] = CompactionRow(tid, text, int(size) if size is not None else None, model, provider, cut)
        return out
