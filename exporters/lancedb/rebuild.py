"""A forced reindex of one persona, built in a new table beside the live one."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from exporters.base import RebuildScope, SinkError
from exporters.lancedb.rows import document_rows
from exporters.lancedb.schema import table_name
from exporters.lancedb.store import _errors
from indexer.core.types import Document

if TYPE_CHECKING:
    from exporters.lancedb.sink import LanceSink

log = logging.getLogger("exporters.lancedb")

class LanceRebuild(RebuildScope):
    """A forced reindex of one persona, built beside the live table.

    Writes go to a new table (next generation), invisible to readers. On
    :meth:`commit` its indexes are brought up to date and ``active.json`` is
    switched atomically; the old table is retired and dropped by
    :meth:`LanceSink.maintain` after the grace period. :meth:`abort` (or an
    exception inside ``with``) drops the new table and leaves the live one as
    it was. Like the QMD sink, the new table must receive the persona's
    *whole* document set: what is not upserted here is gone after commit
    (upserts to the live table during a rebuild are not copied over).
    """

    def __init__(self, sink: LanceSink, persona: str) -> None:
        self._sink = sink
        self.persona = persona
        self._state = "open"
        self._written: set[str] = set()
        with sink._lock:
            self.generation = sink._next_generation(persona)
            self.table_name = table_name(persona, self.generation)
            sink._building.add(self.table_name)
            try:
                with _errors("creating the rebuild table", persona):
                    self._table = sink._create(self.table_name)
            except BaseException:
                sink._building.discard(self.table_name)
                raise

    @property
    def written(self) -> frozenset[str]:
        return frozenset(self._written)

    def _require_open(self) -> None:
        if self._state != "open":
            raise SinkError(f"lancedb: this rebuild of persona {self.persona!r} is already {self._state}")

    def upsert(self, docs: Sequence[Document]) -> None:
        self._require_open()
        if not docs:
            return
        s = self._sink
        rows, paths = document_rows(self.persona, docs, s.embedder, s.chunk_settings)
        with s._lock:
            self._require_open()
            s._merge(self._table, rows, paths, self.persona)
            self._written.update(paths)

    def commit(self) -> None:
        self._require_open()
        s = self._sink
        with s._lock:
            try:
                s._optimize(self._table)  # fold every row into FTS/scalar indexes before going live
                vector_index = None
                if s._vector_index_due(self._table, None) == "create":  # a big table goes live with its vector index
                    try:
                        vector_index = s._build_vector_index(self._table, self.persona, "rebuild")
                    except SinkError as e:  # searched exactly meanwhile; maintenance builds it later
                        log.warning("%s", e)
                with _errors("switching the live table", self.persona, "the old table is still live; retry the reindex"):
                    s._swap(self.persona, self.table_name, vector_index)
            except BaseException:
                self._state = "failed"
                s._building.discard(self.table_name)
                s._drop_table(self.table_name)
                raise
            self._state = "committed"
            s._building.discard(self.table_name)
            s._drop_retired_and_orphans()

    def abort(self) -> None:
        if self._state != "open":
            return
        s = self._sink
        with s._lock:
            self._state = "aborted"
            s._building.discard(self.table_name)
            s._drop_table(self.table_name)


# --------------------------------------------------------------------------- helpers
