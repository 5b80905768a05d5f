"""``ledger-indexer serve``: the HTTP API without sync, for reader machines.

A reader machine has the writer's ``index.uri`` (object storage), its own
empty ``index.dir`` and no ledger. It answers ``memory_search``,
``memory_get``, status, health and metrics from the tables and the scope
state the writer published (:mod:`exporters.lancedb.published`), refreshed at
most every ``index.refresh_seconds``; it never writes, takes no lock and no
lease, and refuses admin calls (409: make the change on the writer, which
publishes it at once). It refuses to start while no scope state is published,
and every search fails closed if the state becomes unreadable. Search and get
take the bearer tokens of ``[mcp] token_file`` (:mod:`indexer.service.api.auth`:
required off loopback).

On a local index ``serve`` answers from the state DB of the writer's folder
(the daemon ``run`` already serves the API there; ``serve`` is for a second,
read-only API process).
"""

from __future__ import annotations

import signal
import threading
import time
from datetime import UTC, datetime

import structlog

from indexer.runtime.config import Config

log = structlog.get_logger("indexer.serve")

READ_ONLY = ("this is a read-only replica (`ledger-indexer serve`): make project, visibility and reindex changes on "
             "the writer machine, which publishes them to every reader at once")


def _iso(ms: int | None) -> str | None:
    if not ms:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def published_status(config: Config, retriever=None) -> dict:
    """What a reader knows: the index URI, when and by whom the scope state was published,
    and per persona its live table, chunk count and private/deleted session counts."""
    from exporters.base import SinkError
    from exporters.lancedb import Retriever
    from exporters.lancedb.lease import current_holder, describe_holder
    from exporters.lancedb.location import IndexLocation

    own = retriever is None
    location = IndexLocation.from_config(config)
    report: dict = {"index": {"uri": location.describe(), "role": "reader", "published_at": None, "error": None},
                    "personas": {}, "writer": None}
    try:
        retriever = retriever or Retriever(location)
    except SinkError as exc:
        report["index"]["error"] = str(exc)
        return report
    try:
        try:
            snap = retriever.published.snapshot()
            report["index"]["published_at"] = _iso(snap.published_ms)
        except SinkError as exc:
            snap = None
            report["index"]["error"] = str(exc)
        try:
            row = current_holder(retriever._db)
            if row:
                report["writer"] = {"describe": describe_holder(row), "epoch": row.get("epoch"),
                                    "released": bool(row.get("released")),
                                    "heartbeat_at": _iso(row.get("heartbeat_ms"))}
        except Exception as exc:  # status must answer
            report["writer"] = {"describe": f"unknown ({exc})"}
        personas = sorted(set(retriever.personas()) | set(snap.personas if snap else ()))
        for persona in personas:
            meta = retriever.meta(persona) or {}
            entry = snap.personas.get(persona) if snap else None
            chunks = None
            try:
                table = retriever.active_table(persona)
                chunks = table.count_rows() if table is not None else 0
            except Exception:
                pass
            report["personas"][persona] = {
                "table": meta.get("table"), "chunks": chunks, "model": meta.get("fingerprint"),
                "private_sessions": len(entry.private) if entry else None,
                "deleted_sessions": len(entry.deleted) if entry else None,
                "index_meta": entry.build if entry else None,
            }
    finally:
        if own:
            retriever.close()
    return report


class ReaderService:
    """The :class:`indexer.service.api.ApiBackend` of a reader: search and get, no writes."""

    def __init__(self, config: Config, *, embedder=None) -> None:
        from indexer.search.searcher import Searcher

        self.config = config
        self.searcher = Searcher.open(config, embedder=embedder)
        self.retriever = self.searcher.retriever
        self.started = time.time()

    def check_published(self) -> None:
        """Raise SinkError unless the writer's scope state can be read (object storage)."""
        if self.retriever.published is not None:
            self.retriever.published.snapshot()

    # -- ApiBackend --

    def search(self, request):
        return self.searcher.search(request)

    def get(self, persona, path, from_line, lines, session, *, scope=None):
        from indexer.core.scopes import Scope
        from indexer.search.retrieval import get_document

        return get_document(self.config, persona, path, from_line=from_line, lines=lines, session=session,
                            retriever=self.retriever, scope=scope or Scope.PERSONA)

    def status(self) -> dict:
        if self.retriever.published is None:
            from indexer.service.status import status_report
            from indexer.state.db import StateDB

            state = StateDB(self.config.state_db_path)
            try:
                return status_report(self.config, state)
            finally:
                state.close()
        return published_status(self.config, self.retriever)

    def cache_status(self) -> dict | None:
        """The reader cache's state (object storage): cold, prefetching, warm; None when off."""
        cache = self.retriever.cache
        return cache.status() if cache is not None else None

    def is_ready(self) -> bool:
        try:
            self.check_published()
            return True
        except Exception:
            return False

    def request_reindex(self, personas):
        from indexer.service.api import ApiError

        raise ApiError(READ_ONLY, 409)

    def reindex_status(self):
        return None

    def project_add(self, name, labels):
        from indexer.service.api import ApiError

        raise ApiError(READ_ONLY, 409)

    project_remove = project_add

    def projects(self):
        if self.retriever.published is None:
            from indexer.state.db import StateDB

            state = StateDB(self.config.state_db_path)
            try:
                return state.projects()
            finally:
                state.close()
        return {k: list(v) for k, v in self.retriever.published.snapshot().projects.items()}

    def set_visibility(self, label, visibility):
        from indexer.service.api import ApiError

        raise ApiError(READ_ONLY, 409)

    def close(self) -> None:
        self.searcher.close()


def run_serve(config: Config) -> int:
    """Serve the API until SIGTERM/SIGINT. Refuses to start without a published scope state."""
    from exporters.base import SinkError
    from indexer.core.errors import Failure, Problem
    from indexer.search.searcher import SearchError
    from indexer.service.api import ApiServer, create_app
    from indexer.service.api.auth import ApiAccess, UnprotectedBind
    from indexer.service.mcp_http import TokenFileError, load_configured_tokens
    from indexer.service.metrics import Metrics

    if "lancedb" not in config.index.sinks:
        raise Failure("serve answers from the LanceDB index: add \"lancedb\" to [index] sinks", Problem.INVALID)
    try:  # before anything heavy: search and get take the tokens of [mcp] token_file (there is no /mcp here)
        access = ApiAccess.for_bind(config.api.host, config.api.port, load_configured_tokens(config.mcp.token_file),
                                    opt_out=config.api.insecure_allow_unauthenticated)
    except (TokenFileError, UnprotectedBind) as exc:
        raise Failure(str(exc), Problem.INVALID) from None
    try:
        service = ReaderService(config)
    except (SinkError, SearchError) as exc:
        raise Failure(f"cannot serve {config.lancedb_uri}: {exc}") from None
    try:
        service.check_published()
    except (SinkError, SearchError) as exc:
        service.close()  # its reader cache's refresher thread must not outlive the refusal
        raise Failure(f"cannot serve {config.lancedb_uri}: {exc}") from None
    service.searcher.warm_up()
    token = None
    if config.api.admin_token_file is not None:
        try:
            token = config.api.admin_token_file.read_text().strip() or None
        except OSError:
            token = None
    metrics = Metrics()
    metrics.set_build_info(role="serve", model=config.embedding.model, sinks="lancedb",
                           index_reads=service.searcher.index_reads)
    metrics.watch_rank_cache(service.searcher.retriever.rank_caches)
    metrics.set_ready(True)
    server = ApiServer(create_app(service, admin_token=token, max_request_bytes=config.api.max_request_bytes,
                                  metrics=metrics, bind_host=config.api.host, access=access), config.api.host,
                       config.api.port, graceful_shutdown_s=3)
    try:
        server.start(timeout=15)
    except OSError as exc:
        service.close()
        raise Failure(f"cannot serve on {config.api.host}:{config.api.port}: {exc}") from None
    stop = threading.Event()

    def on_signal(signum, _frame):
        log.info("serve.signal", signal=signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log.info("serve.started", index=config.lancedb_uri, api=f"http://{config.api.host}:{server.port}",
             refresh_seconds=config.index.refresh_seconds)
    print(f"serving {config.lancedb_uri} read-only on http://{config.api.host}:{server.port}", flush=True)
    from indexer.service.sdnotify import Notifier

    notifier = Notifier()  # the shipped unit is Type=notify with a watchdog: serve answers both
    notifier.ready(status=f"serving {config.lancedb_uri} read-only on port {server.port}")
    try:
        while not stop.wait(0.5):
            notifier.heartbeat()
    finally:
        notifier.stopping(status="stopping")
        server.request_stop()
        server.stop(timeout=3)
        service.close()
        log.info("serve.stopped")
    return 0
