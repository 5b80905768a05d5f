"""The daemon's running pass, seen from outside: documents done of the total, the rate over the
last seconds, and the time left — for ``status``, ``/v1/status``, ``/readyz``, systemd's
``STATUS=`` and a ``sync.progress`` log event at a steady interval.

The worker counts a pass with a :class:`PassProgress` (a :class:`ProgressTotals` that also keeps
timed samples); each update publishes a new frozen :class:`PassSnapshot` (copy on write: a
reader on another thread holds one consistent value).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import structlog

from indexer.sync.progress import PersonaProgress, ProgressTotals

__all__ = ["RATE_WINDOW_S", "PassProgress", "PassSnapshot", "format_duration"]

log = structlog.get_logger("indexer.daemon")

#: The rate is measured over this many seconds of the pass (the whole pass when shorter).
RATE_WINDOW_S = 30.0


@dataclass(frozen=True, slots=True)
class PassSnapshot:
    """One pass's progress at one moment. ``total`` is None until the pass has counted its work."""

    kind: str  # backfill | sync | reindex
    done: int
    total: int | None
    per_second: float | None
    eta_seconds: float | None
    elapsed_seconds: float
    personas: Mapping[str, PersonaProgress] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"kind": self.kind, "documents_done": self.done, "documents_total": self.total,
                "per_second": None if self.per_second is None else round(self.per_second, 1),
                "eta_seconds": None if self.eta_seconds is None else round(self.eta_seconds),
                "elapsed_seconds": round(self.elapsed_seconds, 1),
                "personas": {p: {"done": v.done, "total": v.total} for p, v in self.personas.items()},
                "text": self.describe()}

    def describe(self) -> str:
        """``backfill 1,234/5,000 documents, 52/s, ETA 1 min 12 s`` (one line, for people)."""
        if self.total is None:
            return f"{self.kind}: counting the documents to index"
        text = f"{self.kind} {self.done:,}/{self.total:,} documents"
        if self.per_second:
            text += f", {self.per_second:,.0f}/s"
        if self.eta_seconds is not None:
            text += f", ETA {format_duration(self.eta_seconds)}"
        return text


def format_duration(seconds: float) -> str:
    """``45 s``, ``1 min 12 s``, ``2 h 05 min``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class PassProgress(ProgressTotals):
    """Counts one pass and publishes a :class:`PassSnapshot` after every update (``publish``);
    logs ``sync.progress`` at most every ``log_every_s`` seconds while the pass has work left."""

    def __init__(self, kind: str, *, publish: Callable[[PassSnapshot], None], log_every_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic, on_update: Callable[[], None] | None = None):
        super().__init__(on_change=self._changed)
        self.kind = kind
        self._publish = publish
        self._on_update = on_update
        self._clock = clock
        self._log_every_s = log_every_s
        self._started = clock()
        self._last_log = self._started
        self._planned = False
        self._samples: deque[tuple[float, int]] = deque([(self._started, 0)])
        self._sample_lock = threading.Lock()
        publish(self.snapshot_now())

    def planned(self, documents: Mapping[str, int]) -> None:
        self._planned = True
        super().planned(documents)

    def snapshot_now(self) -> PassSnapshot:
        now = self._clock()
        state = self.snapshot()
        done = sum(p.done for p in state.values())
        total = sum(p.total for p in state.values()) if self._planned else None
        with self._sample_lock:
            first_t, first_done = self._samples[0]
        span = now - first_t
        rate = (done - first_done) / span if span > 0 and done > first_done else None
        eta = (total - done) / rate if rate and total is not None else None
        return PassSnapshot(self.kind, done, total, rate, eta, now - self._started, dict(state))

    def tick(self) -> None:
        """Between updates (a write of many documents takes seconds): a fresh snapshot, logged when due."""
        self._publish_and_log(self._clock())

    def _changed(self, state: Mapping[str, PersonaProgress]) -> None:
        now = self._clock()
        done = sum(p.done for p in state.values())
        with self._sample_lock:
            self._samples.append((now, done))
            while len(self._samples) > 2 and now - self._samples[1][0] >= RATE_WINDOW_S:
                self._samples.popleft()  # keep one sample at least RATE_WINDOW_S old: the window's start
        self._publish_and_log(now)
        if self._on_update is not None:
            self._on_update()

    def _publish_and_log(self, now: float) -> None:
        snap = self.snapshot_now()
        self._publish(snap)
        with self._sample_lock:
            due = now - self._last_log >= self._log_every_s and snap.total is not None and snap.done < snap.total
            if due:
                self._last_log = now
        if due:
            log.info("sync.progress", **{k: v for k, v in snap.as_dict().items() if k != "personas"})
