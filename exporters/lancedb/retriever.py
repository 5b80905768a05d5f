"""The read interface: what search and ``get`` ask of the LanceDB index, from any process.

Re-reads ``active.json`` at every :meth:`Retriever.active_table` call (a stat
when unchanged) and opens tables with ``read_consistency_interval=0``, so every
query sees the latest commit and a rebuild's swap at once. Every SQL string
search needs is made here, from typed values (a scope filter, time ranges):
a :class:`Where` carries the SQL and whether it admits the whole table.

Vector queries are routed per filter (:meth:`Retriever.nearest`): a table
without a vector index, or a filter matching at most ``FLAT_MAX_ROWS`` rows (a
session, a project, a date window), is searched exactly
(``bypass_vector_index``); a broad filter on an indexed table (persona scope)
goes through the IVF_SQ index, probing a third of its partitions (at least
``MIN_NPROBES``, more when they hold too few rows that pass the filter) and
re-scoring the candidates on the stored vectors, so ``_distance`` is always the
exact cosine distance. The filter is always a prefilter: no row outside it is
ever returned, by either route. Rows added since the index was trained are
searched exactly beside it until maintenance folds them in.
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from exporters.base import SinkError
from exporters.lancedb.location import IndexLocation
from exporters.lancedb.pointer import ACTIVE_FILE, _ActivePointer
from exporters.lancedb.schema import (
    DETAIL_COLUMNS,
    FLAT_MAX_ROWS,
    RESULT_COLUMNS,
    refine_factor,
    sql_in,
    sql_str,
    vector_nprobes,
)
from exporters.lancedb.store import _connect, _paths_of, _read_doc
from indexer.core.scopes import ScopeFilter

_WORD = re.compile(r"[\w']+", re.UNICODE)


#: How long a filter's row count is reused for routing (a hint: it only picks exact vs index).
COUNT_TTL_S = 60.0
COUNT_CACHE_SIZE = 1024


class FtsUnavailable(Exception):
    """The full-text index of a table cannot answer (missing or damaged)."""


@dataclass(frozen=True, slots=True)
class Where:
    """A prefilter: its SQL, and whether it admits every row of the table (the persona
    scope over both sources, no session excluded), which routes without counting."""

    sql: str
    whole: bool = False

    def __str__(self) -> str:
        return self.sql


def _as_where(where: Where | str) -> Where:
    return where if isinstance(where, Where) else Where(str(where))


def _needs_details(columns: list[str]) -> bool:
    """Rows queried without the detail columns carry ``_rowid`` for :meth:`Retriever.details`."""
    return any(c not in columns for c in DETAIL_COLUMNS)


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
        self._counts: OrderedDict[tuple[str, str], tuple[int, float]] = OrderedDict()
        self._lock = threading.Lock()
        #: False: every vector query is an exact scan (the benchmark's "without the index").
        self.use_vector_index = True

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
            self._counts.clear()

    # -- filters --

    @staticmethod
    def where(scope: ScopeFilter) -> Where:
        """The prefilter of a scope (the scope's rules, this store's quoting)."""
        whole = scope.include_sessions and scope.include_memory and scope.allowed is None and not scope.excluded
        return Where(scope.where(sql_str, sql_in), whole=whole)

    @staticmethod
    def within(where: Where | str, ranges: Iterable[tuple[int, int]]) -> Where:
        """``where`` narrowed to timestamps in any of the half-open ``[lo, hi)`` ms ranges."""
        where = _as_where(where)
        spans = " OR ".join(f"(timestamp_ms >= {int(lo)} AND timestamp_ms < {int(hi)})" for lo, hi in ranges)
        return Where(f"({where.sql}) AND ({spans})") if spans else where

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

    def rank_columns(self, table) -> list[str]:
        """The result columns ranking and the scope check read: query candidates with these,
        then :meth:`details` for the results shown."""
        return [c for c in self.columns(table) if c not in DETAIL_COLUMNS]

    def details(self, table, rows: list[dict]) -> list[dict]:
        """``rows`` (candidates queried with :meth:`rank_columns`) with the other result
        columns filled in, in place, by one read; a row gone since (deleted by a write in
        between) is left out of the list returned."""
        if not rows:
            return []
        wanted = [c for c in self.columns(table) if any(c not in row for row in rows)]
        if not wanted:
            return list(rows)
        ids = [row["id"] for row in rows]
        got: dict[str, dict] = {}
        rowids = [row.get("_rowid") for row in rows]
        if all(r is not None for r in rowids):  # a take by row address: no index lookup
            got = {x["id"]: x for x in table.take_row_ids(rowids).select(["id", *wanted]).to_list()}
        if set(got) != set(ids):  # a compaction moved rows between the two reads: by key
            got = {x["id"]: x for x in table.search().where(sql_in("id", ids)).select(["id", *wanted])
                   .limit(len(ids)).to_list()}
        out = []
        for row in rows:
            found = got.get(row["id"])
            if found is not None:
                row.update({c: found[c] for c in wanted})
                out.append(row)
        return out

    # -- queries --

    def nearest(self, table, vector: np.ndarray, where: Where | str, limit: int, columns: list[str]) -> list[dict]:
        """The ``limit`` chunks closest to ``vector`` (cosine) among rows matching ``where``,
        as row dicts with ``_distance`` (the exact cosine distance, by either route)."""
        where = _as_where(where)

        def knn():  # a fresh builder each time: lancedb's builders change in place
            return (table.search(vector, vector_column_name="vector").distance_type("cosine")
                    .where(where.sql, prefilter=True).select([*columns, "_distance"])
                    .with_row_id(_needs_details(columns)).limit(limit))

        nprobes = self.vector_route(table, where)
        if nprobes is None:
            return knn().bypass_vector_index().to_list()
        rows = knn().nprobes(nprobes).refine_factor(refine_factor(limit)).to_list()
        if len(rows) < limit and len(rows) < self.count(table, where.sql):
            # The probed partitions held fewer rows passing the filter than exist: never answer
            # with fewer rows than exist, search exactly (lance's adaptive ``maximum_nprobes``
            # is no cheaper: set at all, it probes every partition).
            return knn().bypass_vector_index().to_list()
        return rows

    def vector_route(self, table, where: Where | str) -> int | None:
        """How :meth:`nearest` searches ``table`` under ``where``: the partitions to probe on
        its vector index, or None for an exact scan (no index recorded for the table, or a
        filter matching at most ``FLAT_MAX_ROWS`` rows)."""
        if not self.use_vector_index:
            return None
        index = self.vector_index(table.name)
        if not index or not index.get("partitions"):
            return None
        where = _as_where(where)
        if not where.whole and self.count(table, where.sql) <= FLAT_MAX_ROWS:
            return None
        return vector_nprobes(int(index["partitions"]))

    def vector_index(self, table_name: str) -> dict[str, Any] | None:
        """The vector index the writer recorded for a live table (partitions, trained rows), or None."""
        for entry in self._pointer.get()["personas"].values():
            if entry.get("table") == table_name:
                return entry.get("vector_index")
        return None

    def count(self, table, sql: str) -> int:
        """Rows matching ``sql``; reused for ``COUNT_TTL_S`` (it only routes a query)."""
        key = (table.name, sql)
        now = time.monotonic()
        with self._lock:
            hit = self._counts.get(key)
            if hit is not None and now - hit[1] < COUNT_TTL_S:
                return hit[0]
        n = int(table.count_rows(sql))
        with self._lock:
            self._counts[key] = (n, now)
            self._counts.move_to_end(key)
            while len(self._counts) > COUNT_CACHE_SIZE:
                self._counts.popitem(last=False)
        return n

    def matching(self, table, query: str, where: Where | str, limit: int, columns: list[str], *,
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
                   .where(_as_where(where).sql, prefilter=True).select(wanted)
                   .with_row_id(_needs_details(columns)).limit(limit).to_arrow())
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
