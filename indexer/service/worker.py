"""The sync worker: the one thread that runs every ``sync_once()``, forced reindexes and
maintenance, with capped, jittered backoff on errors (so syncs never overlap).

Freed native memory goes back to the OS where it is freed in bulk: after each ``embed`` call
(:mod:`indexer.embedding.native_memory`). The worker's own trims (after a pass, and when idle)
released 1–8 MB of a 400–600 MB daemon and were removed (issue 37)."""

from __future__ import annotations

import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog

from exporters.base import SinkError
from indexer.runtime.logs import RateLimitedLogger
from indexer.runtime.storage_errors import StorageFault, classify
from indexer.service.pass_progress import PassProgress, PassSnapshot
from indexer.service.storage import storage_places
from ledger.connection import LedgerUnavailable

if TYPE_CHECKING:
    from indexer.service.daemon import Daemon

log = structlog.get_logger("indexer.daemon")

BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 60.0
STALL_AFTER_S = 600.0  # a pass with no progress for this long stops the watchdog pings
WORKER_JOIN_S = 7.0  # SIGTERM must end the process within 10 s


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
    # the last failure's storage cause (disk full, read-only, ...), pinned to a folder: readiness says it
    last_fault: StorageFault | None = None
    first_pass_done: bool = False
    first_success: bool = False
    last_summary: dict | None = None
    last_progress: float = field(default_factory=time.monotonic)
    running: bool = False
    # the running pass's progress (None between passes): replaced, never mutated
    pass_progress: PassSnapshot | None = None
    # chunks per persona, read by the worker after each pass: status must not
    # ask the sink (its lock is held through writes, optimize and index builds)
    chunks: dict[str, int | None] = field(default_factory=dict)


class SyncWorker:
    """Runs passes one at a time on its own thread, woken by :meth:`wake`."""

    def __init__(self, daemon: Daemon):
        self.d = daemon
        self.stats = SyncStats()
        self._wake = threading.Event()
        self._sync_due = True  # the first pass runs at once
        self._maintenance_due = False
        self._job: ReindexJob | None = None
        self._lock = threading.Lock()
        self._not_before = 0.0
        self._errors = RateLimitedLogger(log, every_s=60)
        self._counter: PassProgress | None = None
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

    def _progress(self, *, force: bool) -> PassProgress:
        """A fresh count for one pass: every update is a heartbeat (the watchdog), a running
        reindex job shows it per persona, and the pass's snapshot (done, total, rate, ETA) is
        published for status, readiness, ``STATUS=`` and the ``sync.progress`` log event."""
        job = self._job

        def changed() -> None:
            self.stats.last_progress = time.monotonic()
            if job is not None and job.state == "running":
                job.progress = {p: {"done": v.done, "total": v.total} for p, v in counter.snapshot().items()}

        def publish(snapshot: PassSnapshot) -> None:
            self.stats.pass_progress = snapshot

        counter = PassProgress(self._pass_kind(force), publish=publish, on_update=changed,
                               log_every_s=self.d.config.sync.progress_log_seconds)
        self._counter = counter
        return counter

    def _pass_kind(self, force: bool) -> str:
        if force:
            return "reindex"
        if not self.stats.first_success and not self.d.indexer.state.personas_indexed():
            return "backfill"  # the first one: nothing indexed yet
        return "sync"

    def tick(self) -> None:
        """Called about every second by the daemon's main loop: the running pass's snapshot is
        refreshed (rate and ETA move on between writes) and logged when due."""
        counter = self._counter
        if counter is not None and self.stats.running:
            counter.tick()

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
                                progress=self._progress(force=force))
        except (LedgerUnavailable, SinkError, OSError, RuntimeError, ValueError) as exc:
            self._failed(exc, started)
            return None
        except Exception as exc:  # never let the worker die: log, back off, retry
            self._failed(exc, started)
            return None
        finally:
            stats.running, stats.pass_progress, self._counter = False, None, None
            stats.first_pass_done = True
        seconds = time.monotonic() - started
        stats.syncs += 1
        stats.last_sync_at, stats.last_sync_seconds = time.time(), seconds
        stats.last_summary = summary.as_dict()
        self._publish_chunks(summary.personas)
        stats.first_success = True
        stats.last_fault = None
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
        # the ledger is read, not written: its errors say what they are (LedgerUnavailable)
        stats.last_fault = None if isinstance(exc, LedgerUnavailable) else classify(exc, storage_places(self.d.config))
        fault = stats.last_fault.log_fields() if stats.last_fault is not None else {}
        delay = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** (stats.consecutive_errors - 1))
        delay *= random.uniform(0.5, 1.0)  # jitter: a fleet must not retry in step
        self._not_before = time.monotonic() + delay
        self._sync_due = True
        self._errors.failure("sync", "sync.failed", error=stats.last_error, retry_in_s=round(delay, 1), **fault)
        self.d.metrics_sync(time.monotonic() - started, 0, ok=False)

    def _run_reindex(self, job: ReindexJob) -> None:
        job.state = "running"
        log.info("reindex.started", job_id=job.job_id, personas=job.personas)
        summary = self._run_pass(force=True, personas=job.personas)
        job.finished_at = time.time()
        if summary is None:
            fault = self.stats.last_fault
            job.state, job.error = "failed", fault.message if fault is not None else self.stats.last_error
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


