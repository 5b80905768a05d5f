"""The daemon's real API backend, in-process, for API tests and the fuzz.

A :class:`indexer.service.daemon.Daemon` over a real WAL ledger (the demo's), real
LanceDB and the real embedding model, with its sync worker running (reindex
jobs, visibility changes) but no HTTP server, watcher or scheduler: tests put
the API in front of it themselves (`create_app(backend, ...)`).
Built once per process, on first use, so collecting tests costs nothing.
"""

from __future__ import annotations

import atexit
import tempfile
import threading
import time
from pathlib import Path

from indexer.service.daemon import Daemon
from tests.demo_index import demo_config

_lock = threading.Lock()
_daemon: Daemon | None = None


def real_daemon() -> Daemon:
    global _daemon
    with _lock:
        if _daemon is None:
            _daemon = _start()
        return _daemon


def _start() -> Daemon:
    from indexer.embedding.factory import make_embedder
    from indexer.search.searcher import Searcher
    from indexer.service.metrics import Metrics
    from indexer.sync.context import open_indexer

    config = demo_config(Path(tempfile.mkdtemp(prefix="api-real-")), sinks=["lancedb"])
    d = Daemon(config)
    embedder = make_embedder(config)
    d.indexer = open_indexer(config, embedder=embedder)
    d.searcher = Searcher(config, embedder=embedder, state=d.indexer.state)
    d.metrics = Metrics()
    d.worker.thread.start()
    deadline = time.monotonic() + 180
    while not d.worker.stats.first_success and time.monotonic() < deadline:
        time.sleep(0.05)
    if not d.worker.stats.first_success:
        raise RuntimeError(f"the first sync did not finish: {d.worker.stats.last_error}")
    atexit.register(d.stop_event.set)
    return d


class LazyBackend:
    """Stands in for the real backend until a request needs it."""

    def __getattr__(self, name):
        return getattr(real_daemon(), name)
