"""Where the LanceDB tables live: a local folder or an object-store URI, and how to open it.

:class:`IndexLocation` is the one value the sink, the retriever, the lease and
the published scope state are given. A local folder behaves as it always did
(``active.json`` beside the tables, readers see every commit at once); on object
storage (``s3://bucket/prefix``, ``gs://…``, ``az://…``) the table pointer and
the scope state are small Lance tables in the same database, readers refresh at
most every ``refresh`` (a version check per refresh, not per query), and one
writer is enforced by a lease in the store (:mod:`exporters.lancedb.lease`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import lancedb

from exporters.lancedb.local_reads import LocalReads
from indexer.runtime.config import OBJECT_STORE_SCHEMES, Config

#: Option names whose values are never logged or shown.
_SECRET_HINTS = ("secret", "key", "token", "password", "sas", "credential", "session")


@dataclass(frozen=True, slots=True)
class IndexLocation:
    """A local folder (``uri`` a path) or an object-store URI with its LanceDB ``storage_options``."""

    uri: str
    storage_options: dict[str, str] = field(default_factory=dict)
    #: readers on object storage: the longest a commit (or pointer/scope change) may stay unseen
    refresh: timedelta = timedelta(seconds=2)
    #: the writer lease on object storage (see :mod:`exporters.lancedb.lease`)
    lease: timedelta = timedelta(seconds=60)
    #: a local folder: how searchers read the table files (:mod:`exporters.lancedb.local_reads`)
    local_reads: LocalReads = LocalReads.AUTO
    #: object storage: a reader's local copy of the live tables (:mod:`exporters.lancedb.mirror`);
    #: None or a budget of 0: every query reads the store
    cache_dir: Path | None = None
    cache_disk_bytes: int = 0
    #: a searching process's index cache (opened vector partitions, full-text postings)
    cache_memory_bytes: int = 1 << 30

    @classmethod
    def of(cls, where: IndexLocation | Path | str) -> IndexLocation:
        """``where`` as a location (a path or URI string becomes one with no options)."""
        if isinstance(where, IndexLocation):
            return where
        return cls(str(where))

    @classmethod
    def from_config(cls, config: Config) -> IndexLocation:
        index = config.index
        return cls(config.lancedb_uri, dict(index.storage_options),
                   timedelta(seconds=index.refresh_seconds), timedelta(seconds=index.lease_seconds),
                   LocalReads(index.local_reads), Path(index.cache_dir) if index.cache_dir else index.dir / "reader-cache",
                   index.cache_disk_mb << 20, index.cache_memory_mb << 20)

    @property
    def scheme(self) -> str:
        scheme, sep, _ = self.uri.partition("://")
        return scheme.lower() if sep else ""

    @property
    def is_local(self) -> bool:
        return self.scheme not in OBJECT_STORE_SCHEMES

    @property
    def path(self) -> Path:
        """The local folder (only for a local location)."""
        if not self.is_local:
            raise ValueError(f"{self.describe()} is not a local folder")
        return Path(self.uri.removeprefix("file://"))

    def describe(self) -> str:
        """The URI (never the options: they may hold credentials)."""
        return self.uri

    def safe_options(self) -> dict[str, str]:
        """The storage options with every secret-looking value masked (for logs and status)."""
        return {k: ("***" if any(h in k.lower() for h in _SECRET_HINTS) and "region" not in k.lower() else v)
                for k, v in self.storage_options.items()}

    def connect(self, *, reader: bool, session: Any = None) -> lancedb.DBConnection:
        """A LanceDB connection. Readers see new commits at once locally and within
        :attr:`refresh` on object storage (a version check per query costs a round trip
        there); the writer's own handles always see its own commits."""
        kwargs: dict[str, Any] = {}
        if reader:
            kwargs["read_consistency_interval"] = timedelta(0) if self.is_local else self.refresh
        if session is not None:
            kwargs["session"] = session
        if not self.is_local:
            kwargs["storage_options"] = dict(self.storage_options)
            return lancedb.connect(self.uri, **kwargs)
        return lancedb.connect(str(self.path), **kwargs)
