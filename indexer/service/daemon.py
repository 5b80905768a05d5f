"""``ledger-indexer run``: one process that keeps the index fresh and serves the API.

Threads:

- the **sync worker** runs every ``sync_once()`` (so syncs never overlap),
  plus forced reindexes and maintenance, with capped, jittered backoff on errors;
- the **watcher** (watchfiles) wakes the worker when the ledger's folder
  (``agents.db``, ``-wal``) or a memory file changes, debounced;
- the **scheduler** (APScheduler) wakes it every ``interval_seconds`` anyway
  (watchers die silently: the upstream indexer's best-known failure) and
  queues maintenance every ``maintenance_minutes``;
- the **HTTP server** (uvicorn) answers the API;
- the main thread handles signals, sd_notify STATUS and watchdog pings.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import structlog

from indexer.core.errors import Failure, Problem
from indexer.runtime.config import Config
from indexer.runtime.logs import RateLimitedLogger
from indexer.runtime.storage_errors import classify
from indexer.service.opening import OpenedIndex, OpenRetry, open_index
from indexer.service.sdnotify import Notifier
from indexer.service.storage import names_storage_faults, storage_places
from indexer.service.worker import WORKER_JOIN_S, SyncWorker
from indexer.state.lock import acquire

log = structlog.get_logger("indexer.daemon")



class Daemon:
    def __init__(self, config: Config, *, notifier: Notifier | None = None, demo_hints: bool = False):
        self.config = config
        self.notifier = notifier or Notifier()
        self.demo_hints = demo_hints
        self.stop_event = threading.Event()
        self.lock = None
        self.indexer = None
        self.searcher = None
        self.worker = SyncWorker(self)
        self.server = None
        self._threads: list[threading.Thread] = []
        self.metrics = None
        self.port: int | None = None
        self.mcp_tokens = None
        self.api_access = None
        self.opening = OpenRetry()  # the start-up open, while a storage cause refuses it

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        from indexer.service.api.auth import ApiAccess
        from indexer.service.mcp_http import load_configured_tokens
        from indexer.service.metrics import Metrics

        config = self.config
        # Before anything heavy: a bad token file (TokenFileError), or an API off loopback without
        # tokens (UnprotectedBind), stops start-up at once.
        self.mcp_tokens = load_configured_tokens(config.mcp.token_file)
        self.api_access = ApiAccess.for_bind(config.api.host, config.api.port, self.mcp_tokens,
                                             opt_out=config.api.insecure_allow_unauthenticated)
        config.index.dir.mkdir(parents=True, exist_ok=True)
        # The CLI's fast path (search, get, status through this API) reads where the API listens, and
        # whether it answers callers without a token, from the lock's holder record.
        self.lock = acquire(config.index.dir, "run", extra={"host": config.api.host, "port": config.api.port,
                                                           "tokens_required": self.api_access.tokens_required})
        self.metrics = Metrics()
        try:
            self._opened(open_index(config))
        except Exception as exc:
            if not self.opening.failed(exc, storage_places(config)):
                raise
            # a full disk, a read-only remount...: serve /readyz saying so, retry from run_forever
        self._start_http()
        if self.indexer is not None:
            self._start_sync()
        log.info("daemon.started", ledger=str(config.ledger.path), index_dir=str(config.index.dir),
                 sinks=list(config.index.sinks), api=f"http://{config.api.host}:{self.port}",
                 index_open=self.indexer is not None)

    def _opened(self, opened: OpenedIndex) -> None:
        config = self.config
        self.indexer, self.searcher = opened.indexer, opened.searcher
        identity = self.indexer.build_identity
        if self.searcher is not None:
            self.metrics.watch_rank_cache(self.searcher.retriever.rank_caches)
        self.metrics.set_build_info(role="run", model=config.embedding.model, sinks=",".join(config.index.sinks),
                                    document_format=identity.document_format, redaction=identity.redaction,
                                    **({} if self.searcher is None else {"index_reads": self.searcher.index_reads}))

    def _start_sync(self) -> None:
        self.worker.thread.start()
        self._start_scheduler()
        self._start_watcher()

    def _retry_open(self) -> None:
        """Open the index again (the start-up open failed for a storage cause); start syncing once it is."""
        try:
            self._opened(open_index(self.config))
        except Exception as exc:
            if self.opening.failed(exc, storage_places(self.config)):
                return
            if isinstance(exc, Failure):
                raise
            raise Failure(f"cannot start: {exc}") from None
        log.info("daemon.index_opened", after_failures=self.opening.failures)
        self._start_sync()

    def _start_http(self) -> None:
        """The one HTTP server path (indexer.service.api.ApiServer), the same the tests start; MCP at /mcp."""
        from indexer.service.api import ApiServer, create_app
        from indexer.service.mcp_http import mount_mcp

        token = None
        if self.config.api.admin_token_file is not None:
            try:
                token = self.config.api.admin_token_file.read_text().strip() or None
            except OSError as exc:
                log.warning("api.admin_token_unreadable", file=str(self.config.api.admin_token_file), error=str(exc))
        app = create_app(self, admin_token=token, max_request_bytes=self.config.api.max_request_bytes,
                         metrics=self.metrics, bind_host=self.config.api.host, access=self.api_access)
        serves_mcp = mount_mcp(app, self, lambda: self.indexer.state, self.mcp_tokens, host=self.config.api.host)
        self.server = ApiServer(app, self.config.api.host, self.config.api.port, graceful_shutdown_s=3,
                                lifespan="on" if serves_mcp else "off")
        try:
            self.server.start(timeout=15)
        except OSError as exc:
            raise RuntimeError(str(exc)) from None
        self.port = self.server.port
        self.lock.update(host=self.config.api.host, port=self.port)

    def _start_scheduler(self) -> None:
        from apscheduler.schedulers.background import BackgroundScheduler

        sched = BackgroundScheduler(daemon=True)
        sched.add_job(self.worker.wake, "interval", seconds=self.config.sync.interval_seconds, id="safety-net-sync",
                      max_instances=1, coalesce=True)
        sched.add_job(lambda: self.worker.wake(maintenance=True), "interval",
                      minutes=self.config.sync.maintenance_minutes, id="maintenance", max_instances=1, coalesce=True)
        sched.start()
        self.scheduler = sched

    def _watch_paths(self) -> list[Path]:
        paths = [self.config.ledger.path.parent]
        for entries in self.config.memory.values():
            paths.extend(p for p in entries if p.exists())
        return paths

    def _start_watcher(self) -> None:
        thread = threading.Thread(target=self._watch_loop, name="watcher", daemon=True)
        thread.start()
        self._threads.append(thread)

    def _ledger_signature(self) -> tuple:
        """Size and mtime of the ledger and its WAL. Our own read-only opens
        touch ``-shm`` and can raise inotify events on ``-wal`` without
        changing either, so only a changed signature means new ledger data."""
        out = []
        for suffix in ("", "-wal"):
            try:
                st = Path(str(self.config.ledger.path) + suffix).stat()
                out.append((st.st_ino, st.st_size, st.st_mtime_ns))
            except OSError:
                out.append(None)
        return tuple(out)

    def _watch_loop(self) -> None:
        import watchfiles

        ledger = self.config.ledger.path
        names = {ledger.name, ledger.name + "-wal"}
        memory_roots = [p.resolve() for entries in self.config.memory.values() for p in entries]

        def is_ledger(path: Path) -> bool:
            return path.parent == ledger.parent and path.name in names

        def relevant(_change, path: str) -> bool:
            p = Path(path)
            return is_ledger(p) or (p.suffix == ".md" and any(p == r or r in p.parents for r in memory_roots))

        failures = RateLimitedLogger(log, every_s=300)
        signature = self._ledger_signature()
        while not self.stop_event.is_set():
            paths = [p for p in self._watch_paths() if p.exists()]
            if not paths:
                self.stop_event.wait(5)
                continue
            try:
                for changes in watchfiles.watch(*paths, watch_filter=relevant, debounce=self.config.sync.debounce_ms,
                                                step=20, stop_event=self.stop_event, raise_interrupt=False,
                                                recursive=True):
                    memory_changed = any(not is_ledger(Path(p)) for _, p in changes)
                    current = self._ledger_signature()
                    if memory_changed or current != signature:
                        signature = current
                        self.worker.wake()
                failures.success("watcher")
            except Exception as exc:  # the folder vanished, inotify limits...: the interval job covers us
                failures.failure("watcher", "watcher.failed", error=str(exc))
                self.stop_event.wait(5)

    def run_forever(self) -> int:
        status_every, last_status = 5.0, 0.0
        ready_sent = False
        while not self.stop_event.is_set():
            self.stop_event.wait(0.5)
            if self.indexer is None and self.opening.due():
                self._retry_open()
            stats = self.worker.stats
            if not ready_sent and stats.first_pass_done:
                self.notifier.ready(status=self._status_line())
                ready_sent = True
                if self.demo_hints:
                    self._print_demo_hints()
            now = time.monotonic()
            self.worker.tick()  # the running pass: rate and ETA refreshed, `sync.progress` logged when due
            if now - last_status > (1.0 if stats.running else status_every):
                self.notifier.status(self._status_line())
                last_status = now
            if self.worker.healthy():
                self.notifier.heartbeat()
            else:
                log.error("daemon.stalled", seconds_without_progress=round(now - stats.last_progress))
        return 0

    def _status_line(self) -> str:
        s = self.worker.stats
        if self.indexer is None and self.opening.fault is not None:
            return f"cannot open the index: {self.opening.fault.message}"[:200]
        if s.last_error and s.consecutive_errors:
            why = s.last_fault.message if s.last_fault is not None else s.last_error
            return f"sync failing ({s.consecutive_errors}x): {why}"[:200]
        if s.running and s.pass_progress is not None:  # "backfill 1,234/5,000 documents, 52/s, ETA 1 min 12 s"
            return s.pass_progress.describe()
        if s.last_summary is None:
            return "first sync running"
        return (f"synced: {s.syncs} passes, last {s.last_sync_seconds:.2f}s, "
                f"{s.last_summary['documents_written']} docs written; API :{self.port}")

    def shutdown(self) -> None:
        self.stop_event.set()
        self.notifier.stopping(status="stopping")
        if getattr(self, "scheduler", None) is not None:
            self.scheduler.shutdown(wait=False)
        if self.server is not None:
            self.server.request_stop()  # in-flight requests finish while the worker stops
        if self.worker.thread.is_alive():
            self.worker.thread.join(timeout=WORKER_JOIN_S)
        if self.server is not None:
            self.server.stop(timeout=1)
        for thread in self._threads:
            thread.join(timeout=3)
        if self.worker.thread.is_alive():
            # A write is still running (a long embedding batch). Leaving now is
            # safe by design: nothing is committed to the state DB before the
            # sinks, and a sink commit is atomic. Exiting through the interpreter
            # would abort on native threads, so leave at once, with success.
            log.warning("daemon.abandoning_batch", waited_s=WORKER_JOIN_S)
            os._exit(0)
        if self.searcher is not None:
            self.searcher.close()
        if self.indexer is not None:
            self.indexer.close()
        if self.lock is not None:
            self.lock.release()
        log.info("daemon.stopped")

    def _print_demo_hints(self) -> None:
        base = f"http://{self.config.api.host}:{self.port}"
        cfg = "demo/ledger-indexer.toml"
        print(f"""
ledger-indexer is running on the demo ledger. Try, in another terminal:

  curl -s {base}/v1/memory_search -H 'content-type: application/json' \\
       -d '{{"query": "JWT expiry", "persona": "atlas"}}' | python3 -m json.tool
  curl -s {base}/v1/status | python3 -m json.tool
  .venv/bin/ledger-indexer --config {cfg} search "postgres upgrade" --persona atlas
  .venv/bin/ledger-indexer --config {cfg} reindex

Press Ctrl-C to stop.
""", flush=True)

    # -- metrics glue --------------------------------------------------------------------------

    def metrics_sync(self, seconds: float, written: int, *, ok: bool) -> None:
        if self.metrics is None:
            return
        self.metrics.observe_sync(seconds, written, ok)
        if not ok:
            return
        self.metrics.set_ready(True)
        summary = self.worker.stats.last_summary or {}
        for persona, ps in (summary.get("personas") or {}).items():
            if ps.get("head") is not None and ps.get("cursor") is not None:
                self.metrics.set_lag(persona, max(0, ps["head"] - ps["cursor"]))
            if ps.get("documents_skipped_bad"):
                self.metrics.add_bad_rows(persona, ps["documents_skipped_bad"])
            self.metrics.set_documents(persona, self.indexer.state.document_count(persona))

    # -- ApiBackend ------------------------------------------------------------------------------

    def _open(self):
        """The open index; while it is not (a full disk at start-up), a 503 saying why."""
        if self.indexer is None:
            from indexer.service.api import ApiError

            raise ApiError(self.not_ready_reason() or "starting: opening the index", 503)
        return self.indexer

    def search(self, request):
        from indexer.search.searcher import SearchError

        self._open()
        if self.searcher is None:
            raise SearchError("memory_search needs the lancedb sink: add \"lancedb\" to [index] sinks")
        return self.searcher.search(request)

    def get(self, persona, path, from_line, lines, session, *, scope=None):
        from indexer.core.scopes import Scope
        from indexer.search.retrieval import get_document

        return get_document(self.config, persona, path, from_line=from_line, lines=lines, session=session,
                            state=self._open().state,
                            retriever=self.searcher.retriever if self.searcher is not None else None,
                            scope=scope or Scope.PERSONA)

    def status(self) -> dict:
        """Never waits for the worker: the state DB is read on this thread's own
        connection (SQLite WAL readers do not block on the writer) and sink
        figures come from the snapshot the worker published after its last pass."""
        from indexer.service.status import status_report

        stats = self.worker.stats
        if self.indexer is None:  # not open yet (a full disk at start-up): no figures, the daemon says why
            report: dict = {"ledger": {"path": str(self.config.ledger.path), "head": None, "error": None},
                            "index_dir": str(self.config.index.dir), "personas": {}}
        else:
            report = status_report(self.config, self.indexer.state)
        per_persona = (stats.last_summary or {}).get("personas", {})
        for persona, entry in report["personas"].items():
            entry["last_sync_at"] = stats.last_sync_at
            entry["last_sync_seconds"] = stats.last_sync_seconds
            entry["last_pass"] = per_persona.get(persona)
            entry["model"] = self.config.embedding.model if "lancedb" in self.config.index.sinks else None
            entry["chunks"] = stats.chunks.get(persona)
            if self.metrics is not None and entry.get("lag") is not None:
                self.metrics.set_lag(persona, entry["lag"])
        report["daemon"] = {"syncs": stats.syncs, "errors": stats.errors, "consecutive_errors": stats.consecutive_errors,
                            "last_error": stats.last_error, "ready": self.is_ready(),
                            "not_ready_reason": self.not_ready_reason(), "pid": _pid(),
                            "reindex": self.worker.job.as_dict() if self.worker.job else None,
                            "progress": progress.as_dict() if (progress := stats.pass_progress) else None}
        return report

    def _chunks(self, persona: str) -> int | None:
        for sink in self.indexer.sinks:
            try:
                chunks = sink.stats(persona).get("chunks")
            except Exception:  # status must answer; the next pass publishes again
                continue
            if chunks is not None:
                return chunks
        return None

    def is_ready(self) -> bool:
        return self.indexer is not None and self.worker.stats.first_success

    def not_ready_reason(self) -> str | None:
        """Why /readyz answers 503 (None once ready): still starting, or the first sync failing, with
        its cause and what to do when it is a storage one (a full disk, a read-only file system)."""
        if self.is_ready():
            return None
        stats = self.worker.stats
        if self.indexer is None:
            return self.opening.reason() or "starting: opening the index"
        if not stats.consecutive_errors:
            progress = stats.pass_progress
            return "starting: the first sync is running" + (f" ({progress.describe()})" if progress else "")
        why = stats.last_fault.message if stats.last_fault is not None else stats.last_error
        return f"{why} (the first sync failed {stats.consecutive_errors}x; it is retried with backoff)"

    def request_reindex(self, personas):
        from indexer.service.api import ApiError

        self._open()
        if personas:
            known = set(self.indexer.state.personas_indexed()) | set(self.config.ledger.personas)
            if not known:
                try:
                    reader = self.indexer.reader()
                    known = set(reader.personas())
                    reader.close()
                except Exception:
                    known = set(personas)
            unknown = sorted(set(personas) - known)
            if unknown:
                raise ApiError(f"unknown persona(s): {', '.join(unknown)}", 404)
        return self.worker.request_reindex(personas or None).as_dict()

    def reindex_status(self):
        job = self.worker.job
        return job.as_dict() if job else None

    @names_storage_faults
    def project_add(self, name, labels):
        state = self._open().state
        unknown = [lbl for lbl in labels if state.session(lbl) is None]  # told, not refused: it may come later
        with self.indexer.scope_change():  # object storage: published before it commits
            state.project_add(name, labels)
        return {"project": name, "sessions": state.projects().get(name, []), "unknown": unknown}

    @names_storage_faults
    def project_remove(self, name, labels):
        with self._open().scope_change():
            removed = self.indexer.state.project_remove(name, labels)
        return {"project": name, "removed": removed, "sessions": self.indexer.state.projects().get(name, [])}

    def projects(self):
        return self._open().state.projects()

    @names_storage_faults
    def set_visibility(self, label, visibility):
        """State DB and sinks without scopes change together, here on the API
        thread: ``apply_visibility`` holds the lock every write to such a sink
        takes, so a pass running on the worker can neither slip a document of a
        now-private session in nor miss the change."""
        from indexer.sync.visibility import apply_visibility

        return apply_visibility(self._open(), label, visibility) is not None


def _pid() -> int:
    import os

    return os.getpid()


def run_daemon(config: Config, *, demo_hints: bool = False) -> int:
    from indexer.service.api.auth import UnprotectedBind
    from indexer.service.mcp_http import TokenFileError
    from indexer.state.lock import LockHeldError

    daemon = Daemon(config, demo_hints=demo_hints)

    def on_signal(signum, _frame):
        log.info("daemon.signal", signal=signal.Signals(signum).name)
        daemon.stop_event.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        daemon.start()
    except LockHeldError as exc:
        raise Failure(str(exc), Problem.UNAVAILABLE) from None
    except (TokenFileError, UnprotectedBind) as exc:
        daemon.shutdown()
        raise Failure(str(exc), Problem.INVALID) from None  # exit 2: a set-up error systemd won't retry
    except Failure:  # says what to do; its kind names the exit code
        daemon.shutdown()
        raise
    except Exception as exc:
        daemon.shutdown()
        fault = classify(exc, storage_places(config))  # "disk full at <dir>: ...", not the symptom
        raise Failure(f"cannot start: {fault.message if fault is not None else exc}") from None
    try:
        return daemon.run_forever()
    finally:
        daemon.shutdown()
