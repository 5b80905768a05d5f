"""The read interface: what search and ``get`` ask of the LanceDB index, from any process.

Re-reads ``active.json`` at every :meth:`Retriever.active_table` call (a stat
when unchanged) and opens tables with ``read_consistency_interval=0``, so every
query sees the latest commit and a rebuild's swap at once. Every SQL string
search needs is made here, from typed values (a scope filter, time ranges).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from exporters.base import SinkError
from exporters.lancedb.location import IndexLocation
from exporters.lancedb.pointer import ACTIVE_FILE, _ActivePointer
from exporters.lancedb.schema import RESULT_COLUMNS, sql_in, sql_str
from exporters.lancedb.store import _connect, _paths_of, _read_doc
from indexer.core.scopes import ScopeFilter

_WORD = re.compile(r"[\w']+", re.UNICODE)


class FtsUnavailable(Exception):
    """The full-text index of a table cannot answer (missing or damaged)."""


class Retriever:
    """Read-only access to the persona tables; thread-safe for queries."""

    def __init__(self, db_dir: Path | str | IndexLocation) -> None:
        self.location = IndexLocation.of(db_dir)
        #: object storage: the scope state the writer published (None on a local folder,
        #: where scopes come from the state DB); see :mod:`exporters.lancedb.objectstore`
        self.published = None
        if self.location.is_local:
            self.db_dir = self.location.path
            self._db = _connect(self.location, reader=True)
            self._pointer = _ActivePointer(self.db_dir / ACTIVE_FILE)
        else:
            from exporters.lancedb.objectstore import open_remote_reader

            self.db_dir = None
            self._db, self._pointer, self.published = open_remote_reader(self.location)
        self._tables: dict[str, Any] = {}
        self._has_seq: dict[str, bool] = {}
        self._lock = threading.Lock()

    # -- tables --

    def personas(self) -> list[str]:
        return sorted(self._pointer.get()["personas"])

    def meta(self, persona: str) -> dict[str, Any] | None:
        entry = self._pointer.get()["personas"].get(persona)
        return dict(entry) if entry else None

    def active_table(self, persona: str):
        """The persona's live ``lancedb.table.Table``, or None when it has no index yet.

        Raises :class:`SinkError` when the pointer names a table that cannot be opened."""
        entry = self._pointer.get()["personas"].get(persona)
        if not entry:
            return None
        name = entry["table"]
        with self._lock:
            tbl = self._tables.get(name)
            if tbl is None:
                try:
                    tbl = self._db.open_table(name)
                except Exception as e:
                    raise SinkError(
                        f"lancedb: the live table {name} of persona {persona!r} cannot be opened: {e}. "
                        f"Run `ledger-indexer reindex --persona {persona}`"
                    ) from e
                live = {e["table"] for e in self._pointer.get()["personas"].values()}
                for old in [n for n in self._tables if n not in live]:
                    del self._tables[old]
                self._tables[name] = tbl
            return tbl

    def close(self) -> None:
        with self._lock:
            self._tables.clear()

    # -- filters --

    @staticmethod
    def where(scope: ScopeFilter) -> str:
        """The SQL prefilter of a scope (the scope's rules, this store's quoting)."""
        return scope.where(sql_str, sql_in)

    @staticmethod
    def within(where: str, ranges: Iterable[tuple[int, int]]) -> str:
        """``where`` narrowed to timestamps in any of the half-open ``[lo, hi)`` ms ranges."""
        spans = " OR ".join(f"(timestamp_ms >= {int(lo)} AND timestamp_ms < {int(hi)})" for lo, hi in ranges)
        return f"({where}) AND ({spans})" if spans else where

    def columns(self, table) -> list[str]:
        """The result columns; ``turn_seq`` only when the table has it (a schema-1 table
        is still served while its rebuild runs). A table name is one generation, whose
        schema never changes: cached by name."""
        has = self._has_seq.get(table.name)
        if has is None:
            try:
                has = self._has_seq[table.name] = "turn_seq" in table.schema.names
            except Exception:
                has = False
        return [c for c in RESULT_COLUMNS if has or c != "turn_seq"]

    # -- queries --

    def nearest(self, table, vector: np.ndarray, where: str, limit: int, columns: list[str]) -> list[dict]:
        """The ``limit`` chunks closest to ``vector`` (cosine) among rows matching ``where``,
        as row dicts with ``_distance``."""
        return (table.search(vector, vector_column_name="vector").distance_type("cosine")
                .where(where, prefilter=True).select([*columns, "_distance"]).limit(limit).to_list())

    def matching(self, table, query: str, where: str, limit: int, columns: list[str], *,
                 with_vectors: bool = False) -> tuple[list[dict], np.ndarray | None]:
        """BM25 hits as row dicts (with ``_score``), and their unit vectors as one matrix when
        ``with_vectors`` (converted column-wise: a Python list per vector would cost more than
        the query). Raises :class:`FtsUnavailable` when the full-text index cannot answer:
        never an empty answer in its place."""
        from lancedb.query import MatchQuery

        text = " ".join(_WORD.findall(query))
        if not text:
            return [], None
        wanted = [*columns, *(["vector"] if with_vectors else []), "_score"]
        try:
            tbl = (table.search(MatchQuery(text, "text"), query_type="fts")
                   .where(where, prefilter=True).select(wanted).limit(limit).to_arrow())
        except Exception as exc:  # a missing or damaged FTS index: never answer as if nothing matched
            raise FtsUnavailable(f"{type(exc).__name__}: {exc}") from exc
        vectors = None
        if "vector" in tbl.column_names:
            col = tbl.column("vector").combine_chunks()
            dim = col.type.list_size
            vectors = col.flatten().to_numpy(zero_copy_only=False).reshape(-1, dim).astype(np.float32, copy=False)
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = vectors / np.where(norms == 0, 1.0, norms)
            tbl = tbl.drop_columns(["vector"])
        return tbl.to_pylist(), vectors

    def read(self, persona: str, path: str) -> str | None:
        """The full text of one document, or None."""
        table = self.active_table(persona)
        return _read_doc(table, path) if table is not None else None

    def paths(self, persona: str) -> set[str]:
        """Every document path of the persona's live table."""
        table = self.active_table(persona)
        return _paths_of(table) if table is not None else set()


def open_retriever(db_dir: Path | str | IndexLocation) -> Retriever:
    return Retriever(db_dir)
