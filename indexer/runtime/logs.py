"""Logging: structlog, JSON lines for journald and pipes, readable on a TTY.

Call :func:`configure_logging` once at start-up, before the first log line:

* ``ledger-indexer run`` → ``configure_logging(stream=sys.stdout)`` (under
  systemd, stdout is the journal);
* every other command → the default ``stream=sys.stderr``, so that
  ``--json`` output on stdout stays one clean JSON object.

Records from the standard library's ``logging`` (uvicorn, apscheduler,
lancedb, …) are rendered by the same processors, so the journal holds one
format. Pass ``log_config=None`` to ``uvicorn.Config``/``uvicorn.run`` so
uvicorn does not install handlers of its own.

JSON line keys: ``timestamp`` (ISO 8601, UTC), ``level``, ``logger``,
``event``, then the bound fields; ``exception`` holds a formatted traceback.
When the stream is journald's (``$JOURNAL_STREAM``), each line also carries a
``<N>`` syslog-priority prefix, which journald strips and uses as the entry's
priority, so ``journalctl -u ledger-indexer -p warning`` works.

:class:`RateLimitedLogger` is the helper for repeated errors: the first
failure is logged, then at most one line per interval with the consecutive
error count, and one ``recovered`` line when they stop.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

import structlog

__all__ = [
    "configure_logging",
    "use_json",
    "parse_level",
    "RateLimiter",
    "RateLimitedLogger",
    "should_log",
]

# Libraries that log at INFO on every tick; quieted to WARNING unless level=debug.
NOISY_LOGGERS = (
    "apscheduler",  # "Running job ..." every interval
    "watchfiles",  # "N changes detected" on every WAL write
    "httpx",
    "httpcore",
    "urllib3",
    "filelock",
    "huggingface_hub",
)

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}


def parse_level(level: str | int) -> int:
    """``"info"`` → ``logging.INFO``; raises ValueError naming the choices."""
    if isinstance(level, int) and not isinstance(level, bool):
        return level
    try:
        return _LEVELS[str(level).strip().lower()]
    except KeyError:
        raise ValueError(
            f"invalid log level {level!r}: expected one of debug, info, warning, error, critical"
        ) from None


def _is_journal(stream: TextIO) -> bool:
    """True when ``stream`` is the journald stream systemd connected (``$JOURNAL_STREAM``)."""
    value = os.environ.get("JOURNAL_STREAM")
    if not value:
        return False
    try:
        dev, ino = (int(x) for x in value.split(":", 1))
        st = os.fstat(stream.fileno())
    except Exception:  # not a number pair, no fileno (io.UnsupportedOperation), closed
        return False
    return (st.st_dev, st.st_ino) == (dev, ino)


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except Exception:
        return False


def use_json(stream: TextIO, json: bool | None = None) -> bool:
    """The renderer choice: explicit ``json`` wins; otherwise JSON unless a TTY.

    The journal (``$JOURNAL_STREAM`` matching the stream) always gets JSON.
    (No ``LEDGER_INDEXER_*`` variable here: the config loader rejects
    unknown ones.)
    """
    if json is not None:
        return json
    if _is_journal(stream):
        return True
    return not _isatty(stream)


class _OurHandler(logging.StreamHandler):
    """Marker class: the handler configure_logging installs (and replaces)."""


def configure_logging(
    *,
    json: bool | None = None,
    level: str | int = "info",
    stream: TextIO | None = None,
    colors: bool | None = None,
) -> None:
    """Configure structlog and the standard ``logging`` root; idempotent.

    ``json``: None → JSON lines unless ``stream`` is a TTY (see :func:`use_json`).
    ``level``: debug/info/warning/error/critical (ValueError otherwise).
    ``stream``: where lines go (default ``sys.stderr``, looked up at call time).
    ``colors``: console colors; default on a TTY unless ``$NO_COLOR`` is set.
    """
    lvl = parse_level(level)
    out = sys.stderr if stream is None else stream
    as_json = use_json(out, json)

    timestamper = structlog.processors.TimeStamper(fmt="iso", utc=True, key="timestamp")
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.PositionalArgumentsFormatter(),
        timestamper,
        structlog.processors.StackInfoRenderer(),
    ]
    if as_json:
        renderer: Any = structlog.processors.JSONRenderer(ensure_ascii=False)
        if _is_journal(out):
            renderer = _JournalPriority(renderer)
        final: list[Any] = [
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            structlog.processors.UnicodeDecoder(),
            _order_keys,
            renderer,
        ]
    else:
        if colors is None:
            colors = _isatty(out) and not os.environ.get("NO_COLOR")
        final = [
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.dev.ConsoleRenderer(
                colors=colors,
                timestamp_key="timestamp",
                # Never print locals: they may hold unredacted ledger text or tokens.
                exception_formatter=structlog.dev.plain_traceback,
            ),
        ]

    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        context_class=dict,
        # Not cached: configure_logging may run again (tests, CLI re-config)
        # and must take effect for module-level loggers made earlier.
        cache_logger_on_first_use=False,
    )

    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[
            structlog.contextvars.merge_contextvars,
            structlog.stdlib.add_log_level,
            structlog.stdlib.add_logger_name,
            structlog.stdlib.ExtraAdder(),
            _drop_color_message,
            timestamper,
        ],
        processors=final,
    )
    handler = _OurHandler(out)
    handler.setFormatter(formatter)

    root = logging.getLogger()
    for h in list(root.handlers):
        if isinstance(h, _OurHandler):
            root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(lvl)
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if lvl <= logging.DEBUG else max(lvl, logging.WARNING))
    # uvicorn's loggers propagate to the root once it is run with log_config=None.
    logging.captureWarnings(True)


# syslog priorities for journald's "<N>" line prefix (sd-daemon(3)).
_PRIORITY = {"debug": 7, "info": 6, "warning": 4, "warn": 4, "error": 3, "exception": 3, "critical": 2}


class _JournalPriority:
    """Prefix each line with ``<N>`` so journald files it at the right priority.

    journald strips the prefix (``SyslogLevelPrefix=yes``, the default), so the
    journal still holds the bare JSON line and ``journalctl -p warning`` works.
    Only used when the stream *is* the journal (``$JOURNAL_STREAM``).
    """

    def __init__(self, renderer: Any) -> None:
        self._renderer = renderer

    def __call__(self, logger: Any, name: str, event_dict: dict[str, Any]) -> str:
        prio = _PRIORITY.get(str(event_dict.get("level", "info")).lower(), 6)
        return f"<{prio}>{self._renderer(logger, name, event_dict)}"


def _drop_color_message(_logger: Any, _name: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    """uvicorn adds an ANSI-colored copy of each message as ``extra``; drop it."""
    event_dict.pop("color_message", None)
    return event_dict


_FIRST_KEYS = ("timestamp", "level", "logger", "event")


def _order_keys(_logger: Any, _name: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    """Put timestamp, level, logger, event first: easier to read in journalctl."""
    ordered = {k: event_dict.pop(k) for k in _FIRST_KEYS if k in event_dict}
    ordered.update(event_dict)
    return ordered


# -- rate limiting -------------------------------------------------------------


class RateLimiter:
    """``should_log(key)``: True at most once per ``every_s`` for each key.

    Thread-safe; ``clock`` is injectable for tests.
    """

    def __init__(self, every_s: float = 60.0, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s = every_s
        self._clock = clock
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()

    def should_log(self, key: str, every_s: float | None = None) -> bool:
        interval = self.every_s if every_s is None else every_s
        now = self._clock()
        with self._lock:
            last = self._last.get(key)
            if last is None or now - last >= interval:
                self._last[key] = now
                return True
            return False

    def reset(self, key: str | None = None) -> None:
        with self._lock:
            if key is None:
                self._last.clear()
            else:
                self._last.pop(key, None)


_default_limiter = RateLimiter()


def should_log(key: str, every_s: float = 60.0) -> bool:
    """Process-wide :meth:`RateLimiter.should_log`: True at most once per ``every_s`` per key."""
    return _default_limiter.should_log(key, every_s)


class _Streak:
    __slots__ = ("count", "first_at", "suppressed", "last_error")

    def __init__(self, now: float) -> None:
        self.count = 0
        self.first_at = now
        self.suppressed = 0
        self.last_error: str | None = None


class RateLimitedLogger:
    """Repeated failures, logged at a limited rate; ``recovered`` when they stop.

    ::

        errors = RateLimitedLogger(log, every_s=60)
        try:
            sync_once()
        except Exception as exc:
            errors.failure("sync", "sync failed", error=str(exc), retry_in_s=delay)
        else:
            errors.success("sync")

    ``failure`` logs the first error of a streak at once, then at most one
    line per ``every_s`` per key, each with ``consecutive_errors`` (the
    streak's length) and ``suppressed`` (lines skipped since the last one).
    ``success`` ends the streak with one info line ``"<key> recovered"``
    carrying ``consecutive_errors`` and ``failing_for_s``; it logs nothing
    when there was no streak. Thread-safe.
    """

    def __init__(
        self,
        logger: Any | None = None,
        *,
        every_s: float = 60.0,
        level: str = "error",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = logger if logger is not None else structlog.get_logger("indexer.errors")
        self.every_s = every_s
        self.level = level
        self._clock = clock
        self._streaks: dict[str, _Streak] = {}
        self._last_logged: dict[str, float] = {}
        self._lock = threading.Lock()

    def consecutive(self, key: str) -> int:
        """The current streak's length for ``key`` (0 when healthy)."""
        with self._lock:
            s = self._streaks.get(key)
            return s.count if s else 0

    def failure(self, key: str, event: str, *, level: str | None = None, **fields: Any) -> bool:
        """Count one failure; log it if the rate allows. True when a line was written."""
        now = self._clock()
        with self._lock:
            s = self._streaks.get(key)
            if s is None:
                s = self._streaks[key] = _Streak(now)
            s.count += 1
            err = fields.get("error")
            s.last_error = None if err is None else str(err)
            last = self._last_logged.get(key)
            if last is not None and s.count > 1 and now - last < self.every_s:
                s.suppressed += 1
                return False
            self._last_logged[key] = now
            suppressed, s.suppressed = s.suppressed, 0
            count = s.count
        extra: dict[str, Any] = {"key": key, "consecutive_errors": count}
        if suppressed:
            extra["suppressed"] = suppressed
        getattr(self._log, level or self.level)(event, **extra, **fields)
        return True

    def success(self, key: str, event: str | None = None, **fields: Any) -> bool:
        """End a failure streak; logs ``recovered`` once if there was one."""
        now = self._clock()
        with self._lock:
            s = self._streaks.pop(key, None)
            self._last_logged.pop(key, None)
        if s is None:
            return False
        self._log.info(
            event or f"{key} recovered",
            key=key,
            consecutive_errors=s.count,
            failing_for_s=round(now - s.first_at, 3),
            **({"last_error": s.last_error} if s.last_error else {}),
            **fields,
        )
        return True
