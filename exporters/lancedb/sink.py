"""The writer: upserts, deletes, maintenance and statistics of the persona tables."""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Iterable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

import exporters.lancedb.compaction as compaction
import exporters.lancedb.retire as retire
import exporters.lancedb.vector_maint as vector_maint
from exporters.base import SinkError
from exporters.lancedb.coverage import fold_written
from exporters.lancedb.location import IndexLocation
from exporters.lancedb.pointer import ACTIVE_FILE, _ActivePointer
from exporters.lancedb.rebuild import LanceRebuild
from exporters.lancedb.rows import ChunkSettings, document_rows
from exporters.lancedb.schema import (
    INDEXES,
    VECTOR_INDEX_MIN_ROWS,
    TableBuild,
    _clean,
    _generation_of,
    make_schema,
    sql_in,
    table_name,
)
from exporters.lancedb.stats import SinkStats, read_table_stats
from exporters.lancedb.store import (
    TMP_SWEEP_AGE_AT_OPEN,
    TMP_SWEEP_AGE_RUNNING,
    _connect,
    _errors,
    _now_ms,
    _paths_of,
    _read_doc,
    sweep_tmp_files,
)
from indexer.core.chunking import CHUNKING_VERSION, DEFAULT_MAX_TOKENS, DEFAULT_OVERLAP_TOKENS
from indexer.core.types import Document
from indexer.embedding.embedder import Embedder

log = logging.getLogger("exporters.lancedb")
#: Documents per merge_insert commit (bounds the ``path IN (...)`` list).
MERGE_BATCH_DOCS = 500
#: Paths per ``delete`` statement.
SQL_IN_CHUNK = 500


class LanceSink:
    """The ``lancedb`` exporter. Construct it only in the process holding the writer lock."""

    name = "lancedb"
    enforces_scopes = True  # every read goes through indexer.search's scope filter

    def __init__(
        self,
        db_dir: Path | str | IndexLocation,
        embedder: Embedder,
        *,
        chunk_max_tokens: int | None = None,
        chunk_overlap: int = DEFAULT_OVERLAP_TOKENS,
        optimize_every: int = 50,
        small_fragment_limit: int = 50,
        cleanup_older_than: timedelta = timedelta(minutes=10),
        retire_grace: timedelta = timedelta(minutes=10),
        vector_index_rows: int | None = VECTOR_INDEX_MIN_ROWS,
        writer_dir: Path | None = None,
        role: str = "writer",
    ) -> None:
        self.location = IndexLocation.of(db_dir)
        #: the local folder (None on object storage: see ``location``)
        self.db_dir = self.location.path if self.location.is_local else None
        self.where = self.location.describe()
        self.embedder = embedder
        window = int(embedder.max_tokens) - 2  # [CLS] + [SEP]
        self.chunk_max_tokens = max(8, min(chunk_max_tokens or DEFAULT_MAX_TOKENS, window))
        self.chunk_overlap = max(0, min(chunk_overlap, self.chunk_max_tokens // 2))
        self.chunk_settings = ChunkSettings(self.chunk_max_tokens, self.chunk_overlap)
        self.chunking = f"{CHUNKING_VERSION}/{self.chunk_max_tokens}/{self.chunk_overlap}"
        #: What this sink's tables are built with: one record, in every table's schema
        #: metadata and pointer entry; its key is this sink's part of the index build
        #: identity (a change of model, dimension, chunking or schema means a rebuild).
        self.build = TableBuild(embedder.fingerprint, int(embedder.dim), self.chunking)
        self.fingerprint = self.build.key
        self.optimize_every = optimize_every
        self.small_fragment_limit = small_fragment_limit
        self.cleanup_older_than = cleanup_older_than
        self.retire_grace = retire_grace
        #: Tables with at least this many rows get a vector index (None: never).
        self.vector_index_rows = vector_index_rows
        self.commits = 0
        self.optimizations = 0
        self._lock = threading.RLock()
        self._tables: dict[str, Any] = {}
        self._since_optimize: dict[str, int] = {}
        #: live tables written since the last after_batch: (persona, table name)
        self._written: set[tuple[str, str]] = set()
        self._building: set[str] = set()
        #: on object storage: the writer lease (one writer per index across machines) and the
        #: publisher of the scope state readers need; None on a local folder
        self.lease = None
        self.publisher = None
        if self.location.is_local:
            with _errors("opening the database", hint=f"check that {self.db_dir} is a writable directory"):
                self.db_dir.mkdir(parents=True, exist_ok=True)
                swept = sweep_tmp_files(self.db_dir, TMP_SWEEP_AGE_AT_OPEN)
                if swept:
                    log.warning("lancedb: removed %d stale temp files left by a killed writer", swept)
                self._db = _connect(self.location, reader=False)
            self._active_path = self.db_dir / ACTIVE_FILE
            self._pointer = _ActivePointer(self._active_path)
        else:
            from exporters.lancedb.objectstore import open_remote_writer

            self._db, self.lease, self._pointer, self.publisher = open_remote_writer(
                self.location, role=role, writer_dir=writer_dir)
        try:
            self._pointer.get()  # fail early on a damaged pointer
        except BaseException:
            self._release_lease()
            raise
        orphans = retire.drop_orphans(self, 0)
        if orphans:
            log.warning("lancedb: dropped %d table(s) of a build killed before its switch: %s",
                        len(orphans), ", ".join(orphans))

    # ------------------------------------------------------------------ tables

    def _meta(self) -> dict[str, Any]:
        return self.build.as_dict()

    def _open(self, name: str):
        tbl = self._tables.get(name)
        if tbl is None:
            tbl = self._db.open_table(name)
            self._tables[name] = tbl
        return tbl

    def _fence(self) -> None:
        """Before every commit on object storage: stop unless this writer still holds the lease."""
        if self.lease is not None:
            self.lease.check()

    def _release_lease(self) -> None:
        if self.lease is not None:
            self.lease.release()

    def _create(self, name: str):
        self._fence()
        meta = self._meta()
        tbl = self._db.create_table(name, schema=make_schema(int(self.embedder.dim), {k: str(v) for k, v in meta.items()}), mode="overwrite")
        self._ensure_indexes(tbl)
        self._tables[name] = tbl
        return tbl

    @staticmethod
    def _ensure_indexes(tbl) -> None:
        have = {tuple(ix.columns) for ix in tbl.list_indices()}
        for col, cfg in INDEXES.items():
            if (col,) not in have:
                tbl.create_index(col, config=cfg(), replace=True)

    def _table_names(self) -> list[str]:
        out: list[str] = []
        page = None
        while True:
            resp = self._db.list_tables(page_token=page)
            out.extend(resp.tables)
            page = resp.page_token
            if not page:
                return out

    @property
    def _active(self) -> dict[str, Any]:
        """The pointer file's content; re-read only when another process replaced it."""
        return self._pointer.get()

    def _save_active(self, data: dict[str, Any]) -> None:
        """Write a new pointer file (a modified deep copy of :attr:`_active`)."""
        self._fence()
        with _errors("writing the table pointer", hint=f"check that {self.where} is writable; the old pointer is intact"):
            self._pointer.save(data)

    def _edit_active(self) -> dict[str, Any]:
        return copy.deepcopy(self._active)

    def _check_meta(self, persona: str, entry: dict[str, Any]) -> None:
        have, want = TableBuild.of_entry(entry), self.build
        if have.schema != want.schema:
            raise SinkError(
                f"lancedb: the index of persona {persona!r} has table schema {have.schema}, this version "
                f"writes schema {want.schema}; the next sync rebuilds it (or run `ledger-indexer reindex --persona {persona}`)"
            )
        if have != want:
            raise SinkError(
                f"lancedb: the index of persona {persona!r} was built with model {have.fingerprint} "
                f"(dim {have.dim}, chunking {have.chunking}) but the embedder is "
                f"{want.fingerprint} (dim {want.dim}, chunking {want.chunking}); vectors cannot be mixed. "
                f"Run `ledger-indexer reindex --persona {persona}` (a rebuild) to re-embed it"
            )

    def _live(self, persona: str, *, create: bool):
        entry = self._active["personas"].get(persona)
        if entry is None:
            if not create:
                return None
            name = table_name(persona, self._next_generation(persona))
            with _errors("creating the table", persona):
                tbl = self._create(name)
            data = self._edit_active()
            data["personas"][persona] = {**self._meta(), "table": name, "generation": _generation_of(name, persona), "updated_ms": _now_ms()}
            self._save_active(data)
            return tbl
        with _errors(f"opening table {entry['table']}", persona, f"run `ledger-indexer reindex --persona {persona}`"):
            return self._open(entry["table"])

    def _next_generation(self, persona: str) -> int:
        gens = [0]
        entry = self._active["personas"].get(persona)
        if entry:
            gens.append(int(entry.get("generation", 0)))
        for r in self._active["retired"]:
            g = _generation_of(r["table"], persona)
            if g:
                gens.append(g)
        with _errors("listing tables", persona):
            for n in self._table_names():
                g = _generation_of(n, persona)
                if g:
                    gens.append(g)
        return max(gens) + 1

    def active_table(self, persona: str):
        """The writer's handle on the persona's live table (sees its own writes), or None."""
        with self._lock:
            return self._live(persona, create=False)

    def index_meta(self, persona: str) -> dict[str, Any] | None:
        """What the live table was built with (fingerprint, dim, chunking), or None."""
        entry = self._active["personas"].get(persona)
        return dict(entry) if entry else None

    def needs_rebuild(self, persona: str) -> str | None:
        """Why the live table cannot take upserts from this embedder/chunking, or None."""
        entry = self._active["personas"].get(persona)
        if entry is None:
            return None
        try:
            self._check_meta(persona, entry)
        except SinkError as e:
            return str(e)
        return None

    def missing(self, persona: str) -> str | None:
        entry = self._active["personas"].get(persona)
        if entry is None:
            return f"lancedb: no live table for persona {persona!r} at {self.where}"
        if self.location.is_local and not (self.location.path / f"{entry['table']}.lance").is_dir():
            return f"lancedb: the live table {entry['table']} is gone from {self.location.path}"
        return None

    # ------------------------------------------------------------------ rows

    def _merge(self, tbl, rows: pa.Table, paths: list[str], persona: str) -> None:
        if not paths:
            return
        path_col = rows.column("path").to_pylist()
        for s in range(0, len(paths), MERGE_BATCH_DOCS):
            part = paths[s : s + MERGE_BATCH_DOCS]
            if len(paths) <= MERGE_BATCH_DOCS:
                sub = rows
            else:
                keep = set(part)
                sub = rows.filter(pa.array([p in keep for p in path_col]))
            self._fence()
            with _errors(f"upserting {len(part)} documents", persona):
                (
                    tbl.merge_insert("id")
                    .when_matched_update_all()
                    .when_not_matched_insert_all()
                    .when_not_matched_by_source_delete(sql_in("path", [_clean(p) for p in part]))
                    .execute(sub)
                )
            self._after_commit(tbl)

    def _after_commit(self, tbl) -> None:
        self.commits += 1
        n = self._since_optimize.get(tbl.name, 0) + 1
        self._since_optimize[tbl.name] = n
        try:
            small = int(tbl.stats()["fragment_stats"]["num_small_fragments"])
        except Exception:
            small = 0
        if n >= self.optimize_every or small > self.small_fragment_limit:
            self._optimize(tbl)

    def _optimize(self, tbl) -> None:
        self._fence()
        with _errors(f"optimizing table {tbl.name}", hint="the data is intact; maintenance retries later"):
            self._ensure_indexes(tbl)  # then compaction, index update, old versions: compaction.py
            compaction.optimize(tbl, self.cleanup_older_than, fence=self._fence)
        self._since_optimize[tbl.name] = 0
        self.optimizations += 1

    def _delete(self, tbl, paths: list[str], persona: str) -> None:
        for s in range(0, len(paths), SQL_IN_CHUNK):
            part = paths[s : s + SQL_IN_CHUNK]
            self._fence()
            with _errors(f"deleting {len(part)} documents", persona):
                tbl.delete(sql_in("path", [_clean(p) for p in part]))
            self._after_commit(tbl)

    # ------------------------------------------------------------------ Exporter protocol

    def upsert(self, persona: str, docs: Sequence[Document]) -> None:
        if not docs:
            return
        entry = self._active["personas"].get(persona)
        if entry is not None:
            self._check_meta(persona, entry)
        rows, paths = document_rows(persona, docs, self.embedder, self.chunk_settings)  # chunk + embed outside the lock: readers stay responsive
        with self._lock:
            tbl = self._live(persona, create=True)
            self._written.add((persona, tbl.name))
            self._merge(tbl, rows, paths, persona)

    def delete(self, persona: str, paths: Iterable[str]) -> None:
        ps = list(dict.fromkeys(p for p in paths if p))
        if not ps:
            return
        with self._lock:
            tbl = self._live(persona, create=False)
            if tbl is None:
                return
            self._delete(tbl, ps, persona)

    def paths(self, persona: str) -> set[str]:
        with self._lock:
            tbl = self._live(persona, create=False)
            if tbl is None:
                return set()
            with _errors("listing documents", persona, "retry; the table is unchanged"):
                return _paths_of(tbl)

    def read(self, persona: str, path: str) -> str | None:
        with self._lock:
            tbl = self._live(persona, create=False)
            if tbl is None:
                return None
            with _errors(f"reading {path!r}", persona, "retry; the table is unchanged"):
                return _read_doc(tbl, path)

    def rebuild(self, persona: str) -> LanceRebuild:
        return LanceRebuild(self, persona)

    def after_batch(self) -> None:
        """At the end of a pass that wrote: fold new rows into the indexes of each live table written
        when they are a large share of it (:mod:`exporters.lancedb.coverage`), and build its vector
        index once it is big enough, so a writer with no maintenance schedule (the CLI) leaves
        indexed tables. A tail pass of a few turns only reads index metadata. Never raises."""
        with self._lock:
            written, self._written = sorted(self._written), set()
            fold_written(self, written)

    def close(self) -> None:
        with self._lock:
            self._tables.clear()
            self._release_lease()

    # ------------------------------------------------------------------ maintenance & status

    def personas(self) -> list[str]:
        return sorted(self._active["personas"])

    def maintain(self, *, force: bool = False) -> dict[str, Any]:
        """Scheduled maintenance: optimize live tables, build their vector indexes, drop retired
        and orphaned tables, sweep temp files.

        A table is optimized (compaction, index update, versions older than
        ``cleanup_older_than`` removed) when it changed since its last
        optimize, has unindexed rows or too many small fragments; ``force``
        optimizes every table. Then its vector index is built when the table
        reached ``vector_index_rows`` rows, or re-trained when it outgrew it
        (:meth:`_vector_index_due`). Then the embedding cache drops the vectors of other models.
        Returns what was done.
        """
        done: dict[str, Any] = {"optimized": [], "vector_index": {}, "dropped": [], "tmp_removed": 0}
        with self._lock:
            for persona, entry in list(self._active["personas"].items()):
                try:
                    tbl = self._open(entry["table"])
                except Exception as e:
                    log.warning("lancedb: cannot open %s for maintenance: %s", entry["table"], e)
                    continue
                due = force or self._since_optimize.get(tbl.name, 0) > 0
                if not due:
                    try:
                        due = int(tbl.stats()["fragment_stats"]["num_small_fragments"]) > self.small_fragment_limit or any(
                            int(getattr(ix, "num_unindexed_rows", 0) or 0) > 0 for ix in tbl.list_indices()
                        )
                    except Exception:
                        due = True
                if due:
                    self._optimize(tbl)
                    done["optimized"].append(tbl.name)
                built = self._maintain_vector_index(tbl, persona, entry)
                if built:
                    done["vector_index"][tbl.name] = built
            done["dropped"] = self._drop_retired_and_orphans()
            if self.db_dir is not None:
                done["tmp_removed"] = sweep_tmp_files(self.db_dir, TMP_SWEEP_AGE_RUNNING)
            else:  # object storage: no temp files (unfinished multipart uploads: a bucket lifecycle rule)
                self._maintain_small_tables()
        done["embed_cache_pruned"] = self._prune_embed_cache()
        return done

    def _prune_embed_cache(self) -> int:
        """Drop cached vectors of other embedding models (after a model upgrade they are never read
        again: ~1.5 KB a chunk); the number of rows dropped, 0 when the embedder has no cache."""
        prune = getattr(self.embedder, "prune_other_models", None)
        if prune is None:
            return 0
        try:
            return int(prune())
        except Exception as e:  # the cache is disposable: never fail maintenance over it
            log.warning("lancedb: cannot prune the embedding cache: %s", e)
            return 0

    # ------------------------------------------------------------------ vector index

    # vector index: exporters/lancedb/vector_maint.py (rebuild.py and the benchmarks call these)
    _vector_index_of = staticmethod(vector_maint.vector_index_of)

    def _vector_index_due(self, tbl, recorded: dict[str, Any] | None) -> str | None:
        return vector_maint.due(tbl, self.vector_index_rows, recorded)

    def _build_vector_index(self, tbl, persona: str, reason: str) -> dict[str, Any]:
        return vector_maint.build(tbl, persona, reason)

    def _maintain_vector_index(self, tbl, persona: str, entry: dict[str, Any]) -> dict[str, Any] | None:
        return vector_maint.maintain(self, tbl, persona, entry)

    def _drop_retired_and_orphans(self) -> list[str]:
        """Retired tables past their grace and orphans (exporters/lancedb/retire.py)."""
        return retire.drop_retired_and_orphans(self)

    def _maintain_small_tables(self) -> None:
        self._fence()
        try:
            if self.publisher is not None:
                self.publisher.maintain()
            self._pointer.maintain()
        except Exception as e:
            log.warning("lancedb: maintenance of the pointer/scope tables failed: %s", e)

    def _drop_table(self, name: str) -> bool:
        self._fence()
        self._tables.pop(name, None)
        self._since_optimize.pop(name, None)
        try:
            self._db.drop_table(name)
            return True
        except Exception as e:
            if "not found" in str(e).lower() or "does not exist" in str(e).lower():
                return True
            log.warning("lancedb: cannot drop table %s: %s", name, e)
            return False

    def stats(self, persona: str) -> dict[str, Any]:
        return self.table_stats(persona).as_dict()

    def table_stats(self, persona: str) -> SinkStats:
        with self._lock:
            entry = self._active["personas"].get(persona)
            tbl = self._live(persona, create=False)
            if tbl is None or entry is None:
                return SinkStats(persona, None, None, 0, 0, 0, 0, None, 0, 0, None)
            with _errors("reading table statistics", persona, "retry"):
                return read_table_stats(persona, entry, tbl)

    # ------------------------------------------------------------------ rebuild support

    def _swap(self, persona: str, name: str, vector_index: dict[str, Any] | None = None) -> None:
        data = self._edit_active()
        old = data["personas"].get(persona)
        data["personas"][persona] = {**self._meta(), "table": name, "generation": _generation_of(name, persona), "updated_ms": _now_ms()}
        if vector_index:
            data["personas"][persona]["vector_index"] = vector_index
        if old and old["table"] != name:
            data["retired"].append({"table": old["table"], "persona": persona, "retired_ms": _now_ms()})
        self._save_active(data)
