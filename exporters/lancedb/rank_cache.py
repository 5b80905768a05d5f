"""The columns ranking reads, held in memory by row address.

A persona-scope query has 400–600 candidates. Reading their rank columns (id, path, session,
turn, kind, dates: what ranking, the scope check and fork grouping need) from the table is a
random read per row and column — ~10 ms in each of the two stages at 100k rows, as much as
the vector search itself — and materialising them as Python rows costs ~5 ms more.
:class:`RankCaches` keeps those columns of each live table in memory (~100 bytes a row:
integers as numpy arrays, repeated strings as codes, paths and turn ids as Arrow strings), so a
query asks LanceDB for row addresses and scores only and builds its candidates here in well
under a millisecond.

Why an entry is never wrong: this schema never enables stable row ids, so a ``_rowid`` is a
row's *address* (fragment id << 32 | offset), and LanceDB never rewrites a fragment: an update,
a delete or a compaction writes new fragments under new ids, never reused. The data at an
address never changes — an entry can go unused, never stale. tests/test_rank_cache.py checks
that on the installed LanceDB, and ``Retriever.details`` re-reads each shown row's id by its
address and compares (:class:`RankCacheStale` on a mismatch: the caller drops the cache and
asks again).

Rows the cache does not hold (written since it was loaded) are read from the table by address
and added; after many such misses (a compaction gives every row a new address) the table is
reloaded in the background: one scan of the rank columns (~60 ms at 100k rows). Memory is
bounded across tables (``[index] rank_cache_mb``): the least recently used table goes first,
and a table that does not fit is read directly, as without the cache.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import structlog

from exporters.base import RankCacheStale
from exporters.lancedb.schema import chunk_id

log = structlog.get_logger("indexer.lancedb.rank_cache")

#: Columns with few distinct values, held as codes into a list of the values.
CODED = frozenset({"source", "persona", "session", "kind"})
#: Integer columns (nullable ones carry a null mask).
INTEGERS = frozenset({"chunk_index", "timestamp_ms", "turn_seq"})
#: A reload is scheduled once this many rows were read past the cache since the last load
#: (or 1 % of the rows loaded, if more): new rows alone seldom reach it, a compaction at once.
RELOAD_MISSES = 1_000
#: Blocks of missed rows kept apart before they are merged into one.
MAX_EXTRA_BLOCKS = 8


@dataclass(frozen=True, slots=True)
class _Block:
    """Rows of one read, sorted by address; ``ids`` only when some id is not
    :func:`chunk_id` of its path and chunk index (then every id is kept)."""

    rowids: np.ndarray
    codes: dict[str, tuple[np.ndarray, list]]
    ints: dict[str, tuple[np.ndarray, np.ndarray | None]]
    strings: dict[str, pa.Array]
    ids: pa.Array | None
    nbytes: int

    @classmethod
    def of(cls, tbl: pa.Table, columns: Sequence[str]) -> _Block:
        """A block of ``tbl`` (``_rowid``, ``id`` and ``columns``), any order."""
        order = pc.sort_indices(tbl.column("_rowid"))
        tbl = tbl.take(order)
        rowids = tbl.column("_rowid").to_numpy().astype(np.uint64, copy=False)
        codes, ints, strings = {}, {}, {}
        for name in columns:
            if name == "id":
                continue
            col = tbl.column(name).combine_chunks()
            if name in CODED:
                enc = pc.dictionary_encode(col)
                values = enc.dictionary.to_pylist()
                idx = enc.indices.to_numpy(zero_copy_only=False)
                if enc.null_count:  # nulls → one more value, None
                    idx = np.where(enc.is_null().to_numpy(zero_copy_only=False), len(values), idx)
                    values.append(None)
                codes[name] = (idx.astype(np.int32), values)
            elif name in INTEGERS:
                nulls = col.is_null().to_numpy(zero_copy_only=False) if col.null_count else None
                ints[name] = (pc.fill_null(col, 0).to_numpy(zero_copy_only=False).astype(np.int64), nulls)
            else:
                strings[name] = col
        ids = None
        if "id" in columns and tbl.num_rows:
            derived = pc.binary_join_element_wise(tbl.column("path"), "#",
                                                  pc.cast(tbl.column("chunk_index"), pa.string()), "")
            if not pc.all(pc.equal(derived, tbl.column("id"))).as_py():
                ids = tbl.column("id").combine_chunks()
        nbytes = rowids.nbytes + sum(a.nbytes + (m.nbytes if m is not None else 0) for a, m in ints.values()) \
            + sum(a.nbytes + 64 * len(v) for a, v in codes.values()) + sum(a.nbytes for a in strings.values()) \
            + (ids.nbytes if ids is not None else 0)
        return cls(rowids, codes, ints, strings, ids, nbytes)

    def find(self, rowids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(positions, found) of ``rowids`` in this block."""
        if not len(self.rowids):
            return np.zeros(len(rowids), dtype=np.int64), np.zeros(len(rowids), dtype=bool)
        pos = np.searchsorted(self.rowids, rowids)
        pos = np.minimum(pos, len(self.rowids) - 1)
        return pos, self.rowids[pos] == rowids

    def rows(self, pos: np.ndarray, columns: Sequence[str]) -> list[dict]:
        """The rows at ``pos``, each a dict of ``columns`` and ``_rowid``."""
        take = pa.array(pos)
        cols: dict[str, list] = {"_rowid": self.rowids[pos].tolist()}
        for name in columns:
            if name in self.codes:
                idx, values = self.codes[name]
                cols[name] = [values[i] for i in idx[pos].tolist()]
            elif name in self.ints:
                arr, nulls = self.ints[name]
                vals = arr[pos].tolist()
                if nulls is not None:
                    vals = [None if n else v for v, n in zip(vals, nulls[pos].tolist())]
                cols[name] = vals
            elif name in self.strings:
                cols[name] = self.strings[name].take(take).to_pylist()
        if "id" in columns:
            cols["id"] = self.ids.take(take).to_pylist() if self.ids is not None else \
                [chunk_id(p, i) for p, i in zip(self.strings["path"].take(take).to_pylist(),
                                                self.ints["chunk_index"][0][pos].tolist())]
        names = list(cols)
        return [dict(zip(names, values)) for values in zip(*cols.values())]


class _TableCache:
    """One table's rows: a loaded block, blocks of rows read since, misses since the load."""

    def __init__(self, columns: Sequence[str]) -> None:
        self.columns = tuple(columns)
        self.main: _Block | None = None
        self.extra: list[tuple[_Block, pa.Table]] = []
        self.misses = 0
        self.loading: Future | None = None

    @property
    def nbytes(self) -> int:
        return (self.main.nbytes if self.main else 0) + sum(b.nbytes for b, _ in self.extra)

    @property
    def rows_loaded(self) -> int:
        return len(self.main.rowids) if self.main else 0

    def blocks(self) -> list[_Block]:
        return ([self.main] if self.main else []) + [b for b, _ in self.extra]

    def add(self, tbl: pa.Table) -> None:
        self.extra.append((_Block.of(tbl, self.columns), tbl))
        if len(self.extra) > MAX_EXTRA_BLOCKS:
            merged = pa.concat_tables([t for _, t in self.extra])
            self.extra = [(_Block.of(merged, self.columns), merged)]


class RankCaches:
    """The rank columns of live tables by row address, within a memory budget; thread-safe.

    ``read_all(table, columns)`` and ``read_rows(table, rowids, columns)`` read from the table
    (an Arrow table with ``_rowid``): the retriever supplies them, so this module never builds
    a query itself."""

    def __init__(self, budget_bytes: int, *, read_all: Callable[[Any, list[str]], pa.Table],
                 read_rows: Callable[[Any, list[int], list[str]], pa.Table]) -> None:
        self.budget_bytes = int(budget_bytes)
        self._read_all = read_all
        self._read_rows = read_rows
        self._tables: OrderedDict[str, _TableCache] = OrderedDict()
        self._too_big: set[str] = set()
        self._lock = threading.Lock()
        self._loader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rank-cache")
        #: Rows served from memory / read past it (the daemon exports them).
        self.hits = 0
        self.misses = 0

    @property
    def enabled(self) -> bool:
        return self.budget_bytes > 0

    @property
    def nbytes(self) -> int:
        with self._lock:
            return sum(c.nbytes for c in self._tables.values())

    def close(self) -> None:
        self._loader.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            self._tables.clear()

    def keep_only(self, names: set[str]) -> None:
        """Forget every table not in ``names`` (no longer live)."""
        with self._lock:
            for name in [n for n in self._tables if n not in names]:
                del self._tables[name]

    def drop(self, name: str) -> None:
        with self._lock:
            self._tables.pop(name, None)

    def load(self, table, columns: Sequence[str]) -> bool:
        """Load ``table`` now (a warm-up); False when it does not fit the budget."""
        if not self.enabled or table.name in self._too_big:
            return False
        with self._lock:
            cache = self._entry(table.name, tuple(columns))
        self._reload(table, cache)
        with self._lock:
            return self._tables.get(table.name) is cache

    def _entry(self, name: str, columns: tuple[str, ...]) -> _TableCache:
        """The table's cache (a new, empty one when it held other columns); under the lock."""
        cache = self._tables.get(name)
        if cache is None or cache.columns != columns:
            cache = self._tables[name] = _TableCache(columns)
        return cache

    def rows(self, table, rowids: Sequence[int], columns: Sequence[str]) -> list[dict] | None:
        """The rows at ``rowids`` (in that order, each with ``_rowid``), or None when the cache
        is off, the table does not fit, or a row could not be read (gone since the query: the
        caller asks the table directly)."""
        if not self.enabled or table.name in self._too_big:
            return None
        columns = tuple(columns)
        with self._lock:
            cache = self._entry(table.name, columns)
            self._tables.move_to_end(table.name)
            blocks = cache.blocks()
        want = np.asarray(rowids, dtype=np.uint64)
        out: list[dict | None] = [None] * len(want)
        left = np.ones(len(want), dtype=bool)
        for block in blocks:
            if not left.any():
                break
            pos, found = block.find(want)
            found &= left
            if found.any():
                at = np.flatnonzero(found)
                for i, row in zip(at.tolist(), block.rows(pos[at], columns)):
                    out[i] = row
                left &= ~found
        missing = [int(r) for r in want[left]]
        if missing:
            try:
                read = self._read_rows(table, missing, list(columns))
            except Exception as exc:  # rows gone (a compaction between the query and this read)
                log.info("rank_cache.read_failed", table=table.name, rows=len(missing), error=str(exc)[:200])
                return None
            if read.num_rows != len(missing):
                return None
            block = _Block.of(read, columns)
            pos, found = block.find(np.asarray(missing, dtype=np.uint64))
            if not found.all():
                return None
            at = np.flatnonzero(left)
            for i, row in zip(at.tolist(), block.rows(pos, columns)):
                out[i] = row
            with self._lock:
                if self._tables.get(table.name) is cache:
                    cache.add(read)
                    cache.misses += len(missing)
                    due = cache.loading is None and cache.misses >= max(RELOAD_MISSES, cache.rows_loaded // 100)
                    if due:
                        cache.loading = self._loader.submit(self._reload_quietly, table, cache)
        with self._lock:
            self.hits += len(want) - len(missing)
            self.misses += len(missing)
        return out  # type: ignore[return-value]

    def _reload_quietly(self, table, cache: _TableCache) -> None:
        try:
            self._reload(table, cache)
        except Exception as exc:  # a reload is an optimisation: queries go on reading the table
            log.warning("rank_cache.reload_failed", table=table.name, error=str(exc)[:300])
        finally:
            cache.loading = None

    def _reload(self, table, cache: _TableCache) -> None:
        tbl = self._read_all(table, list(cache.columns))
        block = _Block.of(tbl, cache.columns)
        with self._lock:
            if self._tables.get(table.name) is not cache:
                return
            if block.nbytes > self.budget_bytes:
                del self._tables[table.name]
                self._too_big.add(table.name)
                log.info("rank_cache.table_too_big", table=table.name, bytes=block.nbytes, budget=self.budget_bytes)
                return
            cache.main, cache.extra, cache.misses = block, [], 0
            self._tables.move_to_end(table.name)
            while sum(c.nbytes for c in self._tables.values()) > self.budget_bytes and len(self._tables) > 1:
                evicted, _ = self._tables.popitem(last=False)
                log.info("rank_cache.evicted", table=evicted)
        log.debug("rank_cache.loaded", table=table.name, rows=len(block.rowids), bytes=block.nbytes)


__all__ = ["RankCacheStale", "RankCaches"]
