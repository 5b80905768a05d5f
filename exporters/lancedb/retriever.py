"""The read interface: what search and ``get`` ask of the LanceDB index, from any process.

Re-reads ``active.json`` at every :meth:`Retriever.active_table` call (a stat
when unchanged) and opens tables with ``read_consistency_interval=0``, so every
query sees the latest commit and a rebuild's swap at once. Every SQL string
search needs is made here, from typed values (a scope filter, time ranges):
a :class:`Where` carries the SQL and whether it admits the whole table.

Vector queries are routed per filter (:meth:`Retriever.nearest`): a filter naming one
session (:attr:`Where.few`) is first read whole — its rows' vectors, up to one more row than
the query asks for — and ranked here, exactly, without a nearest-neighbour query (measured
in bench/RESULTS.md "API under load", fourth session); a filter that turns out to hold more
rows is remembered for ``COUNT_TTL_S`` and routed as any other. A table
without a vector index is searched exactly (``bypass_vector_index``); so is a
filter matching at most ``FLAT_MAX_ROWS`` rows (a session, a project, a date
window) when the index has more partitions than a query probes. Any other
filter on an indexed table goes through the IVF_SQ index, probing half of its partitions (at least
``MIN_NPROBES``; an exact scan when they hold too few rows that pass the filter)
and re-scoring the rows it ranks first on the stored vectors, so ``_distance`` is
always the exact cosine distance. The filter is always a prefilter: no row outside it is
ever returned, by either route. Rows added since the index was trained are
searched exactly beside it until maintenance folds them in.

Candidates queried with :meth:`Retriever.rank_columns` take those columns from memory
(:mod:`exporters.lancedb.rank_cache`, when ``rank_cache_bytes`` is set): the queries
return row addresses and scores only.

The search path's calls (vector and full-text queries, the take of the shown rows, the
version and routing counts) are awaited on the calling thread's own event loop
(:mod:`exporters.lancedb.direct`), not queued on lancedb's one background loop thread; where the
installed lancedb lacks the private handle this needs, through its synchronous API.
Tables of a local folder are read through io_uring where the kernel allows it
(:mod:`exporters.lancedb.local_reads`).
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import structlog

from exporters.base import SinkError
from exporters.lancedb import direct, local_reads
from exporters.lancedb.local_reads import LocalReads
from exporters.lancedb.location import IndexLocation
from exporters.lancedb.pointer import ACTIVE_FILE, _ActivePointer
from exporters.lancedb.rank_cache import RankCaches, RankCacheStale
from exporters.lancedb.schema import (
    DETAIL_COLUMNS,
    FLAT_MAX_ROWS,
    RESULT_COLUMNS,
    refine_factor,
    sql_in,
    sql_str,
    vector_nprobes,
)
from exporters.lancedb.store import _connect, _paths_of, _read_doc, new_session
from exporters.lancedb.where import Where, _as_where, _needs_details, _sent
from indexer.core.scopes import ScopeFilter

_WORD = re.compile(r"[\w']+", re.UNICODE)
log = structlog.get_logger("indexer.lancedb")


#: How long a filter's row count is reused for routing (a hint: it only picks exact vs index).
COUNT_TTL_S = 60.0
COUNT_CACHE_SIZE = 1024


class FtsUnavailable(Exception):
    """The full-text index of a table cannot answer (missing or damaged)."""


class Retriever:
    """Read-only access to the persona tables; thread-safe for queries."""

    def __init__(self, db_dir: Path | str | IndexLocation, *, rank_cache_bytes: int = 0) -> None:
        """``rank_cache_bytes``: memory for the rank columns of live tables (0: read them from
        the tables at every query; worth it only in a process that answers many queries)."""
        self.location = IndexLocation.of(db_dir)
        #: object storage: the scope state the writer published (None on a local folder,
        #: where scopes come from the state DB); see :mod:`exporters.lancedb.objectstore`
        self.published = None
        #: how the table files are read (a local folder; None on object storage)
        self.reads: LocalReads | None = None
        if self.location.is_local:
            self.db_dir = self.location.path
            self.reads = local_reads.choose(self.location.local_reads)
            self._db = _connect(self.location, reader=True)
            self._pointer = _ActivePointer(self.db_dir / ACTIVE_FILE)
        else:
            from exporters.lancedb.objectstore import open_remote_reader

            self.db_dir = None
            self.session = new_session(reader=True, index_cache_bytes=self.location.cache_memory_bytes)
            self._db, self._pointer, self.published = open_remote_reader(self.location, self.session)
        self._tables: dict[str, Any] = {}
        self._has_seq: dict[str, bool] = {}
        self._counts: OrderedDict[tuple[str, str], tuple[int, float]] = OrderedDict()
        #: ``few`` filters that held more rows than a query asked for, and when (not read whole again
        #: for ``COUNT_TTL_S``)
        self._crowded: OrderedDict[tuple[str, str], float] = OrderedDict()
        #: vector queries answered by reading a ``few`` filter whole, and those it held too many rows for
        self.whole_reads = 0
        self.whole_overflows = 0
        self._lock = threading.Lock()
        self.session = getattr(self, "session", None)
        #: False: every vector query is an exact scan (the benchmark's "without the index").
        self.use_vector_index = True
        self.rank_caches = RankCaches(rank_cache_bytes, read_all=_read_all, read_rows=_read_rows)
        #: object storage: local copies of the live tables, kept current in the background
        #: (:mod:`exporters.lancedb.reader_cache`); None: every query reads the store
        self.cache = None
        if not self.location.is_local:
            from exporters.lancedb.pointer import TablePointer
            from exporters.lancedb.reader_cache import ReaderCache

            def tables(pointer) -> set[str]:
                return {e["table"] for e in pointer.get()["personas"].values()}

            # the prefetch at start reads the pointer once on its own (it must not start the queries'
            # pointer's refresh clock before the writer's first tables exist); later passes share the
            # queries' pointer: one read of it per refresh, as without the cache
            first = TablePointer(self._db, reader=True, where=f"{self.location.describe()}/_active")
            self.cache = ReaderCache.maybe(self.location, self.session, warmed=self._warmed,
                                           first_live=lambda: tables(first), live=lambda: tables(self._pointer))

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
        if self.cache is not None:
            local = self.cache.table(name)  # the local copy once complete (no object read)
            if local is not None:
                return local
        with self._lock:
            tbl = self._tables.get(name)
            if tbl is None:
                try:
                    tbl = self._open_table(name)
                except Exception as e:
                    raise SinkError(
                        f"lancedb: the live table {name} of persona {persona!r} cannot be opened: {e}. "
                        f"Run `ledger-indexer reindex --persona {persona}`"
                    ) from e
                live = {e["table"] for e in self._pointer.get()["personas"].values()}
                for old in [n for n in self._tables if n not in live]:
                    del self._tables[old]
                self.rank_caches.keep_only(live)
                self._tables[name] = tbl
            return tbl

    def _open_table(self, name: str):
        """Open table ``name`` for reading (through io_uring when chosen: :func:`local_reads.open_table`)."""
        if self.reads is None:
            return self._db.open_table(name)
        table, self.reads = local_reads.open_table(self._db, self.db_dir, name, self.reads, self.location.local_reads)
        return table

    def warm(self, persona: str) -> bool:
        """Load the rank columns of ``persona``'s live table into memory now (a daemon's start);
        False when there is no table, no cache, or it does not fit."""
        if self.cache is not None and not self.cache.ready:
            return False  # the cache's refresher loads them from the local copy after its prefetch
        table = self.active_table(persona)
        return table is not None and self.rank_caches.load(table, self.rank_columns(table))

    def _warmed(self, name: str, table) -> None:
        """A live table's local copy is complete at start-up: its rank columns into memory."""
        if self.rank_caches.enabled:
            self.rank_caches.load(table, self.rank_columns(table))

    def memory_bytes(self) -> int:
        """Memory held by this reader's caches: LanceDB's session (indexes, metadata) and the rank columns."""
        held = self.rank_caches.nbytes
        if self.session is not None:
            held += int(self.session.size_bytes)  # a property
        return held

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()
        self.rank_caches.close()
        with self._lock:
            self._tables.clear()
            self._counts.clear()

    # -- filters --

    @staticmethod
    def where(scope: ScopeFilter) -> Where:
        """The prefilter of a scope (the scope's rules, this store's quoting)."""
        whole = (scope.include_sessions and scope.include_memory and scope.allowed is None and not scope.excluded
                 and not scope.hidden_turns)
        few = scope.allowed is not None and len(scope.allowed - scope.excluded) <= 1
        return Where(scope.where(sql_str, sql_in), whole=whole, few=few)

    @staticmethod
    def within(where: Where | str, ranges: Iterable[tuple[int, int]]) -> Where:
        """``where`` narrowed to timestamps in any of the half-open ``[lo, hi)`` ms ranges."""
        where = _as_where(where)
        spans = " OR ".join(f"(timestamp_ms >= {int(lo)} AND timestamp_ms < {int(hi)})" for lo, hi in ranges)
        return Where(f"({where.sql}) AND ({spans})", few=where.few) if spans else where

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
            taken = direct.reads(table).take(rowids, ["id", *wanted]).to_pylist()
            by_address = {x["_rowid"]: x["id"] for x in taken}
            if any(by_address.get(row["_rowid"], row["id"]) != row["id"] for row in rows):
                # an address holds another row than the candidate said: never show it
                self.rank_caches.drop(table.name)
                raise RankCacheStale(f"lancedb: table {table.name}: a row address holds another row "
                                     "than the rank columns in memory said")
            got = {x["id"]: x for x in taken}
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
        as row dicts with ``_distance`` (the exact cosine distance, by every route)."""
        where = _as_where(where)
        if where.few:
            rows = self._read_whole(table, vector, where, limit, columns)
            if rows is not None:
                return rows
        nprobes = self.vector_route(table, where)
        reads = direct.reads(table)

        def knn(select: list[str], with_row_id: bool):
            return reads.knn(vector, _sent(where), select, with_row_id, limit, nprobes, refine_factor(limit))

        rows = self._rows(table, knn, columns, ["_distance"])[0]
        if (nprobes is not None and len(rows) < limit
                and nprobes < int(self.vector_index(table.name)["partitions"])
                and len(rows) < self.count(table, where.sql)):
            # The probed partitions held fewer rows passing the filter than exist: never answer
            # with fewer rows than exist, search exactly (lance's adaptive ``maximum_nprobes``
            # is no cheaper: set at all, it probes every partition). With every partition probed
            # the answer is complete already: no count.
            nprobes = None
            rows = self._rows(table, knn, columns, ["_distance"])[0]
        return rows

    def _read_whole(self, table, vector: np.ndarray, where: Where, limit: int, columns: list[str]) -> list[dict] | None:
        """Every row of ``where`` ranked by exact cosine distance to ``vector``, when there are at
        most ``limit`` of them: one read of their vectors (a nearest-neighbour query over the same
        rows costs more: planning, and at 4 searches in flight ~1–2 ms of CPU more a query). None
        when the filter holds more rows (remembered: the next queries route as any filter)."""
        key = (table.name, where.sql)
        now = time.monotonic()
        with self._lock:
            seen = self._crowded.get(key)
            if seen is not None and now - seen < COUNT_TTL_S:
                return None
        reads = direct.reads(table)

        def scan(select: list[str], with_row_id: bool):
            return reads.scan(where.sql, select, with_row_id, limit + 1)

        rows, tbl = self._rows(table, scan, columns, ["vector"])
        if len(rows) > limit:
            with self._lock:
                self.whole_overflows += 1
                self._crowded[key] = now
                self._crowded.move_to_end(key)
                while len(self._crowded) > COUNT_CACHE_SIZE:
                    self._crowded.popitem(last=False)
            return None
        with self._lock:
            self.whole_reads += 1
        if not rows:
            return []
        query = np.asarray(vector, dtype=np.float32)
        # LanceDB's cosine distance: 1 - cos, both vectors' norms divided out
        distances = 1.0 - _unit_rows(tbl) @ (query / (np.linalg.norm(query) or 1.0))
        order = np.argsort(distances, kind="stable")
        out = []
        for i in order.tolist():
            row = rows[i]
            row["_distance"] = float(distances[i])
            out.append(row)
        return out

    def _rows(self, table, query, columns: list[str], extra: list[str]) -> tuple[list[dict], pa.Table]:
        """Run ``query(select, with_row_id)`` for ``columns`` and the ``extra`` columns it computes
        (scores, vectors): the rank columns from memory when they are the ones asked for, else
        from the table. Returns the rows (without ``vector``) and the Arrow result (for ``extra``)."""
        if self.rank_caches.enabled and columns == self.rank_columns(table):
            tbl = query(extra, True)
            rows = self.rank_caches.rows(table, tbl.column("_rowid").to_pylist(), columns)
            if rows is not None:
                for name in extra:
                    if name != "vector":
                        for row, value in zip(rows, tbl.column(name).to_pylist()):
                            row[name] = value
                return rows, tbl
        tbl = query([*columns, *extra], _needs_details(columns))
        return tbl.drop_columns([c for c in ("vector",) if c in tbl.column_names]).to_pylist(), tbl

    def vector_route(self, table, where: Where | str) -> int | None:
        """How :meth:`nearest` searches ``table`` under ``where``: the partitions to probe on
        its vector index, or None for an exact scan (no index recorded for the table, or a
        filter matching at most ``FLAT_MAX_ROWS`` rows while not every partition is probed)."""
        if not self.use_vector_index:
            return None
        index = self.vector_index(table.name)
        if not index or not index.get("partitions"):
            return None
        where = _as_where(where)
        partitions = int(index["partitions"])
        nprobes = vector_nprobes(partitions)
        # Every partition probed (up to MIN_NPROBES of them): the quantised scan sees every row
        # that passes the filter, so even a selective one loses nothing and reads fewer vectors
        # (100k, a 5,000-row project: 8.6 vs 15.4 ms, recall@10 1.0). Otherwise a selective
        # filter could fall outside the probed partitions: searched exactly.
        if nprobes < partitions and not where.whole and self.count(table, where.sql) <= FLAT_MAX_ROWS:
            return None
        return nprobes

    def vector_index(self, table_name: str) -> dict[str, Any] | None:
        """The vector index the writer recorded for a live table (partitions, trained rows), or None."""
        for entry in self._pointer.get()["personas"].values():
            if entry.get("table") == table_name:
                return entry.get("vector_index")
        return None

    def version(self, table) -> int:
        """The table's latest version (a check of the table's manifest; awaited directly)."""
        return direct.reads(table).version()

    def count(self, table, sql: str) -> int:
        """Rows matching ``sql``; reused for ``COUNT_TTL_S`` (it only routes a query)."""
        key = (table.name, sql)
        now = time.monotonic()
        with self._lock:
            hit = self._counts.get(key)
            if hit is not None and now - hit[1] < COUNT_TTL_S:
                return hit[0]
        n = direct.reads(table).count(sql)
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
        text = " ".join(_WORD.findall(query))
        if not text:
            return [], None
        where = _as_where(where)

        reads = direct.reads(table)

        def fts(select: list[str], with_row_id: bool):
            return reads.fts(text, _sent(where), select, with_row_id, limit)

        try:
            rows, tbl = self._rows(table, fts, columns, [*(["vector"] if with_vectors else []), "_score"])
        except Exception as exc:  # a missing or damaged FTS index: never answer as if nothing matched
            raise FtsUnavailable(f"{type(exc).__name__}: {exc}") from exc
        return rows, (_unit_rows(tbl) if "vector" in tbl.column_names else None)

    def read(self, persona: str, path: str) -> str | None:
        """The full text of one document, or None."""
        table = self.active_table(persona)
        return _read_doc(table, path) if table is not None else None

    def paths(self, persona: str) -> set[str]:
        """Every document path of the persona's live table."""
        table = self.active_table(persona)
        return _paths_of(table) if table is not None else set()


def _unit_rows(tbl: pa.Table) -> np.ndarray:
    """The ``vector`` column of a query result as one float32 matrix of unit rows (converted
    column-wise: a Python list per vector would cost more than the query); a zero vector stays 0."""
    col = tbl.column("vector").combine_chunks()
    vectors = col.flatten().to_numpy(zero_copy_only=False).reshape(-1, col.type.list_size)
    vectors = vectors.astype(np.float32, copy=False)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


def _read_all(table, columns: list[str]) -> pa.Table:
    return table.search().select(columns).with_row_id(True).limit(None).to_arrow()


def _read_rows(table, rowids: list[int], columns: list[str]) -> pa.Table:
    return table.take_row_ids(rowids).select(columns).with_row_id().to_arrow()


def open_retriever(db_dir: Path | str | IndexLocation) -> Retriever:
    return Retriever(db_dir)
