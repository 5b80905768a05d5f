"""The daemon's backend after one sync pass, in-process, with the fake embedder.

For API tests of who may see what (labels, visibility, scopes), where the model plays no
part: a real WAL ledger, real LanceDB (and the QMD exporter when the config names it), no
redaction, and no worker, watcher or HTTP server — the test puts the API in front itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from fake_embedder import FakeEmbedder

from indexer.runtime.config import Config
from indexer.search.searcher import Searcher
from indexer.service.daemon import Daemon
from indexer.sync.context import Indexer, build_sinks
from indexer.sync.engine import sync_once


@contextmanager
def synced_daemon(config: Config) -> Iterator[Daemon]:
    embedder = FakeEmbedder()
    daemon = Daemon(config)
    daemon.indexer = Indexer(config, sinks=build_sinks(config, embedder=embedder), redact=lambda s: s,
                             redaction_version="t")
    try:
        sync_once(daemon.indexer)
        daemon.searcher = Searcher(config, embedder=embedder, state=daemon.indexer.state)
        yield daemon
    finally:
        if daemon.searcher is not None:
            daemon.searcher.close()
        daemon.indexer.close()
