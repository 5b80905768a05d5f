"""Opening the daemon's index: all or nothing, and retried while storage refuses it.

A daemon restarted on a full disk may not open its state DB at all (SQLite
must create the WAL index, ``-shm``, and there is no room for it), let alone
write its first pass. Exiting would leave ``/readyz`` unanswered and restart
into the same wall; so on a storage cause the daemon serves HTTP anyway,
``/readyz`` and ``/v1/status`` say why it is not ready, and the open is
retried with capped backoff. Any other failure (a damaged file, a set-up
error with its own exit code) still stops start-up.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from indexer.core.errors import Failure, describe
from indexer.runtime.config import Config
from indexer.runtime.storage_errors import StorageCause, StorageFault, classify

if TYPE_CHECKING:
    from indexer.search.searcher import Searcher
    from indexer.sync.context import Indexer

log = structlog.get_logger("indexer.daemon")

OPEN_RETRY_BASE_S = 2.0
OPEN_RETRY_CAP_S = 60.0


@dataclass(frozen=True, slots=True)
class OpenedIndex:
    indexer: Indexer
    searcher: Searcher | None


def open_index(config: Config) -> OpenedIndex:
    """The embedder, sinks, state DB and searcher of ``ledger-indexer run``; what was opened is
    closed again when a later step fails (a retry must not leak the first attempt's handles)."""
    from indexer.embedding.factory import make_embedder
    from indexer.search.searcher import Searcher
    from indexer.sync.context import build_sinks, open_indexer

    lancedb = "lancedb" in config.index.sinks
    embedder = make_embedder(config) if lancedb else None
    sinks: list = []
    indexer = searcher = None
    try:
        sinks = build_sinks(config, embedder=embedder, role="run")
        indexer = open_indexer(config, sinks=sinks, role="run")
        indexer.state.key()  # every pass digests with it: an unreadable key stops start-up, not each pass
        indexer.publish_scopes()  # object storage: readers get the scope state before the first pass ends
        if lancedb:
            searcher = Searcher(config, embedder=embedder, state=indexer.state)
            published = searcher.retriever.published
            if published is not None and indexer.publisher is not None:
                # object storage: this daemon's own searches see its scope changes at once
                indexer.publisher.listeners.append(published.invalidate)
            searcher.warm_up()
    except BaseException:
        _close_all(searcher, indexer, sinks, embedder)
        raise
    return OpenedIndex(indexer, searcher)


def _close_all(searcher: Any, indexer: Any, sinks: list, embedder: Any) -> None:
    handles = [searcher, indexer] if indexer is not None else [searcher, *sinks]
    for handle in [*handles, embedder]:
        if handle is None:
            continue
        try:
            handle.close()
        except Exception as exc:  # the open's own error is the one to report
            log.warning("daemon.open_cleanup_failed", handle=type(handle).__name__, error=str(exc))


@dataclass
class OpenRetry:
    """The start-up open a storage cause refused: the cause, how often, and when to try again."""

    fault: StorageFault | None = None
    failures: int = 0
    next_at: float = 0.0

    def failed(self, exc: BaseException, places: list[Path]) -> bool:
        """Count a failed open and log it; False when it is not to be retried (no storage cause, a
        damaged file, or a set-up error that decided its own exit code)."""
        fault = classify(exc, places)
        if isinstance(exc, Failure) and getattr(exc, "fault", None) is None:
            fault = None  # e.g. an unreadable key file: exit 2, systemd must not restart into it
        if fault is None or fault.cause is StorageCause.CORRUPT:
            return False
        self.fault, self.failures = fault, self.failures + 1
        delay = min(OPEN_RETRY_CAP_S, OPEN_RETRY_BASE_S * 2 ** (self.failures - 1))
        self.next_at = time.monotonic() + delay
        log.error("daemon.open_failed", error=describe(exc), attempts=self.failures, retry_in_s=delay,
                  **fault.log_fields())
        return True

    def due(self) -> bool:
        return self.fault is not None and time.monotonic() >= self.next_at

    def reason(self) -> str | None:
        if self.fault is None:
            return None
        return f"{self.fault.message} (the index could not be opened {self.failures}x; retried with backoff)"
