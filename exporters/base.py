"""The one interface every sink implements.

Contract (checked by ``tests/test_exporter_contract.py`` against every backend):

- ``upsert(persona, docs)`` is idempotent and replaces a document by path:
  writing the same batch twice leaves exactly one copy of each document, and a
  document that shrank leaves nothing stale behind.
- ``delete(persona, paths)`` removes those documents; unknown paths are ignored.
- ``paths(persona)`` lists the documents the sink holds for that persona.
- ``read(persona, path)`` returns the stored text of one document, or None.
- ``rebuild(persona)`` returns a :class:`Rebuild`: documents written to it are
  invisible to readers until ``commit()``, which replaces the persona's whole
  document set at once; ``abort()`` (or an exception) leaves the live set as it
  was. Search keeps answering from the live set throughout.
- Errors raise :class:`SinkError`; the caller then leaves its cursor and hashes
  unchanged, so the next sync replays the batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol, Self, runtime_checkable

from indexer.core.types import Document


class SinkError(RuntimeError):
    """A sink could not apply a batch. Nothing was committed to the state DB."""


class RankCacheStale(Exception):
    """A reader's in-memory copy of some rows disagreed with the table (a row read by its
    address is not the row held for it). The copy is dropped; ask again."""


@runtime_checkable
class Rebuild(Protocol):
    def upsert(self, docs: Sequence[Document]) -> None: ...

    def commit(self) -> None: ...

    def abort(self) -> None: ...


class RebuildScope:
    """The ``with`` form every sink's rebuild shares: a clean exit while still open
    commits, an exception aborts. The rebuild keeps ``_state`` (``"open"`` until committed
    or aborted) and implements ``commit()`` and ``abort()``."""

    _state: str

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None:
            self.abort()
        elif self._state == "open":
            self.commit()


@runtime_checkable
class Exporter(Protocol):
    """A sink. Every method the indexer calls is declared here (no optional
    methods found by ``getattr``); each says what it raises. ``SinkError``
    carries what happened and what to do; the caller then leaves its cursor
    and hashes unchanged, so the next sync replays the batch."""

    name: str
    enforces_scopes: bool
    """True when the sink's readers go through this project's scope checks
    (LanceDB: every query is scoped). False for an export others read
    directly (QMD): such a sink must never hold a private or deleted
    session's documents, and sync keeps them out of it."""
    fingerprint: str
    """What the sink's stored form depends on (model, chunking, schema...):
    part of the index metadata, so a change rebuilds the index."""

    def upsert(self, persona: str, docs: Sequence[Document]) -> None:
        """Write ``docs`` (replace by path). Raises SinkError (disk, database)."""
        ...

    def delete(self, persona: str, paths: Iterable[str]) -> None:
        """Remove those documents; unknown paths are ignored. Raises SinkError."""
        ...

    def paths(self, persona: str) -> set[str]:
        """The documents held for ``persona`` (empty when none). Raises SinkError."""
        ...

    def read(self, persona: str, path: str) -> str | None:
        """The stored text of one document, or None when there is none. Raises SinkError."""
        ...

    def rebuild(self, persona: str) -> Rebuild:
        """A staged replacement of the persona's set. Raises SinkError."""
        ...

    def needs_rebuild(self, persona: str) -> str | None:
        """Why the persona's stored form must be rebuilt (an older layout), or
        None. Never raises: an unreadable store is reported by the next write."""
        ...

    def missing(self, persona: str) -> str | None:
        """Why the sink holds no stored set for ``persona`` at all (its table or export folder is
        gone: deleted, or another location configured), or None when it holds one, even an empty
        one. Cheap (no listing of documents): asked every pass for personas the state DB says have
        documents, which are then rebuilt from the ledger. Never raises."""
        ...

    def maintain(self, *, force: bool = False) -> dict[str, Any]:
        """Scheduled housekeeping (compaction, leftovers); returns what was done.
        Raises SinkError; the data is intact and the next run retries."""
        ...

    def stats(self, persona: str) -> dict[str, Any]:
        """Figures for status: at least ``documents`` and ``chunks`` (None when
        the sink has no chunks). Raises SinkError."""
        ...

    def after_batch(self) -> None:
        """Called once after a sync pass wrote something (e.g. run `qmd update`).
        Never raises: a failure is logged and the export stays as written."""
        ...

    def close(self) -> None:
        """Release files and handles. Never raises."""
        ...
