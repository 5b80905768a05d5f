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
import random
import signal
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from exporters.base import SinkError
from indexer.runtime.config import Config
from indexer.state.lock import acquire
from indexer.runtime.logs import RateLimitedLogger
from indexer.service.sdnotify import Notifier
from ledger.connection import LedgerUnavailable

log = structlog.get_logger("indexer.daemon")

BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 60.0
STALL_AFTER_S = 600.0
WORKER_JOIN_S = 7.0  # SIGTERM must end the process within 10 s  # a pass with no progress for this long stops the watchdog pings


@dataclass
class ReindexJob:
    job_id: str
    personas: list[str] | None
    state: str = "queued"  # queued | running | done | failed
    progress: dict[str, dict[str, int]] = field(default_factory=dict)
    error: str | None = None
    queued_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    summary: dict | None = None

    def as_dict(self) -> dict:
        # ``progress`` is replaced, never mutated, by the worker (copy on write):
        # a reader holds one consistent snapshot while the next one is built.
        progress = self.progress
        return {"job_id": self.job_id, "state": self.state, "personas": self.personas,
                "progress": {p: dict(v) for p, v in progress.items()},
                "error": self.error, "queued_at": self.queued_at, "finished_at": self.finished_at,
                "summary": self.summary}


@dataclass
class SyncStats:
    syncs: int = 0
    errors: int = 0
    consecutive_errors: int = 0
    last_sync_at: float | None = None
    last_sync_seconds: float | None = None
    last_error: str | None = None
    first_pass_done: bool = False
    first_success: bool = False
    last_summary: dict | None = None
    last_progress: float = field(default_factory=time.monotonic)
    running: bool = False
    # chunks per persona, read by the worker after each pass: status must not
    # ask the sink (its lock is held through writes, optimize and index builds)
    chunks: dict[str, int | None] = field(default_factory=dict)


class SyncWorker:
    """Runs passes one at a time on its own thread, woken by :meth:`wake`."""

    def __init__(self, daemon: "Daemon"):
        self.d = daemon
        self.stats = SyncStats()
        self._wake = threading.Event()
        self._sync_due = True  # the first pass runs at once
        self._maintenance_due = False
        self._job: ReindexJob | None = None
        self._lock = threading.Lock()
        self._not_before = 0.0
        self._errors = RateLimitedLogger(log, every_s=60)
        self.thread = threading.Thread(target=self._loop, name="sync-worker", daemon=True)

    def wake(self, *, maintenance: bool = False) -> None:
        with self._lock:
            self._sync_due = True
            self._maintenance_due |= maintenance
        self._wake.set()

    def request_reindex(self, personas: list[str] | None) -> ReindexJob:
        with self._lock:
            if self._job is not None and self._job.state in ("queued", "running"):
                return self._job
            self._job = ReindexJob(job_id=uuid.uuid4().hex[:12], personas=personas)
            job = self._job
        self._wake.set()
        return job

    @property
    def job(self) -> ReindexJob | None:
        return self._job

    def healthy(self) -> bool:
        return not self.stats.running or time.monotonic() - self.stats.last_progress < STALL_AFTER_S

    def _progress(self, persona: str, done: int, total: int) -> None:
        self.stats.last_progress = time.monotonic()
        job = self._job
        if job is not None and job.state == "running" and done >= 0:
            job.progress = {**job.progress, persona: {"done": done, "total": total}}

    def _loop(self) -> None:
        stop = self.d.stop_event
        while not stop.is_set():
            self._wake.wait(timeout=1.0)
            self._wake.clear()
            if stop.is_set():
                break
            if time.monotonic() < self._not_before:  # backing off after an error
                stop.wait(min(1.0, self._not_before - time.monotonic()))
                continue
            with self._lock:
                job = self._job if self._job is not None and self._job.state == "queued" else None
                do_sync, self._sync_due = self._sync_due, False
                do_maintenance, self._maintenance_due = self._maintenance_due, False
            if job is not None:
                self._run_reindex(job)
            elif do_sync:
                self._run_pass(force=False, personas=None)
            if do_maintenance and not stop.is_set():
                self._maintain()

    def _run_pass(self, *, force: bool, personas: list[str] | None) -> dict | None:
        from indexer.sync.engine import sync_once

        stats = self.stats
        stats.running, stats.last_progress = True, time.monotonic()
        started = time.monotonic()
        try:
            summary = sync_once(self.d.indexer, force=force, personas=personas, stop=self.d.stop_event,
                                progress=self._progress)
        except (LedgerUnavailable, SinkError, OSError, RuntimeError, ValueError) as exc:
            self._failed(exc, started)
            return None
        except Exception as exc:  # never let the worker die: log, back off, retry
            self._failed(exc, started)
            return None
        finally:
            stats.running = False
            stats.first_pass_done = True
        seconds = time.monotonic() - started
        stats.syncs += 1
        stats.last_sync_at, stats.last_sync_seconds = time.time(), seconds
        stats.last_summary = summary.as_dict()
        self._publish_chunks(summary.personas)
        stats.first_success = True
        if stats.consecutive_errors:
            self._errors.success("sync")
        stats.consecutive_errors, self._not_before = 0, 0.0
        self.d.metrics_sync(seconds, summary.documents_written, ok=True)  # after last_summary is set
        return summary.as_dict()

    def _publish_chunks(self, personas) -> None:
        """Chunk counts for status, read here on the worker's thread (which owns the sink)."""
        chunks = dict(self.stats.chunks)
        for persona in personas:
            chunks[persona] = self.d._chunks(persona)
        self.stats.chunks = chunks

    def _failed(self, exc: Exception, started: float) -> None:
        stats = self.stats
        stats.errors += 1
        stats.consecutive_errors += 1
        from indexer.core.errors import describe

        stats.last_error = describe(exc)  # the root cause first: "database or disk is full", not the rollback error
        delay = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** (stats.consecutive_errors - 1))
        delay *= random.uniform(0.5, 1.0)  # jitter: a fleet must not retry in step
        self._not_before = time.monotonic() + delay
        self._sync_due = True
        self._errors.failure("sync", "sync.failed", error=stats.last_error, retry_in_s=round(delay, 1))
        self.d.metrics_sync(time.monotonic() - started, 0, ok=False)

    def _run_reindex(self, job: ReindexJob) -> None:
        job.state = "running"
        log.info("reindex.started", job_id=job.job_id, personas=job.personas)
        summary = self._run_pass(force=True, personas=job.personas)
        job.finished_at = time.time()
        if summary is None:
            job.state, job.error = "failed", self.stats.last_error
            log.warning("reindex.failed", job_id=job.job_id, error=job.error)
        elif summary.get("interrupted"):
            job.state, job.error = "failed", "interrupted by shutdown; the live index is unchanged"
        else:
            job.state, job.summary = "done", summary
            log.info("reindex.done", job_id=job.job_id, seconds=summary["seconds"])

    def _maintain(self) -> None:
        for sink in self.d.indexer.sinks:
            try:
                result = sink.maintain()
                log.info("maintenance.done", sink=sink.name, result=result)
            except Exception as exc:
                log.warning("maintenance.failed", sink=sink.name, error=str(exc))


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

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        from indexer.sync.context import open_indexer
        from indexer.embedding.factory import make_embedder
        from indexer.service.metrics import Metrics
        from indexer.search.searcher import Searcher

        config = self.config
        config.index.dir.mkdir(parents=True, exist_ok=True)
        self.lock = acquire(config.index.dir, "run", extra={"host": config.api.host, "port": config.api.port})
        embedder = make_embedder(config) if "lancedb" in config.index.sinks else None
        self.indexer = open_indexer(config, embedder=embedder)
        if "lancedb" in config.index.sinks:
            self.searcher = Searcher(config, embedder=embedder, state=self.indexer.state)
            self.searcher.warm_up()
        self.metrics = Metrics()
        self._start_http()
        self.worker.thread.start()
        self._start_scheduler()
        self._start_watcher()
        log.info("daemon.started", ledger=str(config.ledger.path), index_dir=str(config.index.dir),
                 sinks=list(config.index.sinks), api=f"http://{config.api.host}:{self.port}")

    def _start_http(self) -> None:
        """The one HTTP server path (indexer.api.ApiServer), the same the tests start."""
        from indexer.service.api import ApiServer, create_app

        token = None
        if self.config.api.admin_token_file is not None:
            try:
                token = self.config.api.admin_token_file.read_text().strip() or None
            except OSError as exc:
                log.warning("api.admin_token_unreadable", file=str(self.config.api.admin_token_file), error=str(exc))
        app = create_app(self, admin_token=token, max_request_bytes=self.config.api.max_request_bytes,
                         metrics=self.metrics)
        self.server = ApiServer(app, self.config.api.host, self.config.api.port, graceful_shutdown_s=3)
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
            stats = self.worker.stats
            if not ready_sent and stats.first_pass_done:
                self.notifier.ready(status=self._status_line())
                ready_sent = True
                if self.demo_hints:
                    self._print_demo_hints()
            now = time.monotonic()
            if now - last_status > status_every:
                self.notifier.status(self._status_line())
                last_status = now
            if self.worker.healthy():
                self.notifier.heartbeat()
            else:
                log.error("daemon.stalled", seconds_without_progress=round(now - stats.last_progress))
        return 0

    def _status_line(self) -> str:
        s = self.worker.stats
        if s.last_error and s.consecutive_errors:
            return f"sync failing ({s.consecutive_errors}x): {s.last_error}"[:200]
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

    def search(self, request):
        from indexer.search.searcher import SearchError

        if self.searcher is None:
            raise SearchError("memory_search needs the lancedb sink: add \"lancedb\" to [index] sinks", http_status=503)
        return self.searcher.search(request)

    def get(self, persona, path, from_line, lines, session):
        from indexer.search.retrieval import get_document

        return get_document(self.config, persona, path, from_line=from_line, lines=lines, session=session,
                            state=self.indexer.state)

    def status(self) -> dict:
        """Never waits for the worker: the state DB is read on this thread's own
        connection (SQLite WAL readers do not block on the writer) and sink
        figures come from the snapshot the worker published after its last pass."""
        from indexer.service.status import status_report

        report = status_report(self.config, self.indexer.state)
        stats = self.worker.stats
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
                            "last_error": stats.last_error, "ready": self.is_ready(), "pid": _pid(),
                            "reindex": self.worker.job.as_dict() if self.worker.job else None}
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

    def request_reindex(self, personas):
        from indexer.service.api import ApiError

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

    def project_add(self, name, labels):
        self.indexer.state.project_add(name, labels)
        return {"project": name, "sessions": self.indexer.state.projects().get(name, [])}

    def project_remove(self, name, labels):
        removed = self.indexer.state.project_remove(name, labels)
        return {"project": name, "removed": removed, "sessions": self.indexer.state.projects().get(name, [])}

    def projects(self):
        return self.indexer.state.projects()

    def set_visibility(self, label, visibility):
        """State DB and sinks without scopes change together, here on the API
        thread: ``apply_visibility`` holds the lock every write to such a sink
        takes, so a pass running on the worker can neither slip a document of a
        now-private session in nor miss the change."""
        from indexer.sync.visibility import apply_visibility

        return apply_visibility(self.indexer, label, visibility) is not None


def _pid() -> int:
    import os

    return os.getpid()


def run_daemon(config: Config, *, demo_hints: bool = False) -> int:
    from indexer.core.errors import CliError
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
        raise CliError(str(exc)) from None
    except Exception as exc:
        daemon.shutdown()
        raise CliError(f"cannot start: {exc}") from None
    try:
        return daemon.run_forever()
    finally:
        daemon.shutdown()
