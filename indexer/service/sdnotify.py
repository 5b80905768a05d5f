"""systemd service notifications (sd_notify) without a dependency.

The protocol is one datagram of ``KEY=VALUE`` lines sent to the AF_UNIX
socket named by ``$NOTIFY_SOCKET`` (a path, or an abstract name written with
a leading ``@``). When the variable is unset (a terminal, a test, a container
without systemd) every call is a silent no-op, so the daemon calls it
unconditionally.

Sending never raises into the daemon: a failure is logged once at warning
level (and once more, at info, when sends work again) and the call returns
False.

Typical use in ``ledger-indexer run``::

    notifier = Notifier()
    ...first sync done, API listening...
    notifier.ready(status="indexed 1234 documents; serving on 127.0.0.1:8765")
    while running:
        ...one batch of work...
        notifier.heartbeat()          # WATCHDOG=1 at half of WatchdogSec=
    notifier.stopping()

Before ``ready()``, ``heartbeat()`` extends the start-up timeout instead
(``EXTEND_TIMEOUT_USEC``), so a long first backfill that keeps making
progress is not killed by ``TimeoutStartSec=`` while a hung one is.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Mapping

import structlog

__all__ = ["Notifier", "watchdog_interval", "notify_socket_address"]

log = structlog.get_logger(__name__)

# How far one heartbeat pushes the start-up (or stop) timeout before READY=1.
DEFAULT_EXTEND_S = 120.0
# Largest STATUS= text sent; systemd shows one line in `systemctl status`.
_STATUS_MAX = 512


def notify_socket_address(value: str | None) -> str | None:
    """Turn a ``$NOTIFY_SOCKET`` value into a ``socket.sendto`` address.

    ``/run/systemd/notify`` stays as it is; ``@name`` becomes the abstract
    name ``\\0name``. Anything else (empty, relative, ``vsock:…``) → None.
    """
    if not value:
        return None
    if value.startswith("@") and len(value) > 1:
        return "\0" + value[1:]
    if value.startswith("/"):
        return value
    return None


def watchdog_interval(environ: Mapping[str, str] | None = None, pid: int | None = None) -> float | None:
    """The watchdog timeout in seconds from ``$WATCHDOG_USEC``, or None.

    None when the variable is unset, not a positive integer, or when
    ``$WATCHDOG_PID`` is set and names another process (the variables were
    inherited by a child). The daemon should ping at half this interval;
    :meth:`Notifier.heartbeat` does that.
    """
    env = os.environ if environ is None else environ
    raw = env.get("WATCHDOG_USEC")
    if not raw:
        return None
    try:
        usec = int(raw)
    except ValueError:
        return None
    if usec <= 0:
        return None
    wpid = env.get("WATCHDOG_PID")
    if wpid:
        try:
            if int(wpid) != (os.getpid() if pid is None else pid):
                return None
        except ValueError:
            return None
    return usec / 1_000_000


def _format_value(value: object) -> str:
    if value is True:
        return "1"
    if value is False:
        return "0"
    # One assignment per line: a newline inside a value would start a new one.
    return " ".join(str(value).splitlines())


class Notifier:
    """Sends state changes to systemd; a no-op when not run under systemd.

    ``address`` defaults to ``$NOTIFY_SOCKET``; ``environ`` (default
    ``os.environ``) is read once, at construction. With
    ``unset_environment=True`` the variables are removed from ``os.environ``
    so that child processes (e.g. ``qmd update``) do not inherit them.
    Thread-safe: the watchdog may be pinged from any thread.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        unset_environment: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        env = os.environ if environ is None else environ
        raw = address if address is not None else env.get("NOTIFY_SOCKET")
        self._address = notify_socket_address(raw)
        self._watchdog_s = watchdog_interval(env)
        self._clock = clock
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._failing = False
        self._ready = False
        self._stopping = False
        self._last_beat: float | None = None
        if raw and self._address is None:
            log.warning("sd_notify socket address not supported, notifications disabled", notify_socket=raw)
        if unset_environment and environ is None:
            for key in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
                os.environ.pop(key, None)

    # -- state ---------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        """True when a notification socket is configured."""
        return self._address is not None

    @property
    def watchdog_interval(self) -> float | None:
        """``WatchdogSec=`` in seconds, or None when no watchdog is armed."""
        return self._watchdog_s if self.enabled else None

    @property
    def ping_interval(self) -> float | None:
        """How often to ping the watchdog: half its interval, or None."""
        wd = self.watchdog_interval
        return None if wd is None else wd / 2

    # -- the protocol --------------------------------------------------------

    def notify(self, **fields: object) -> bool:
        """Send ``KEY=VALUE`` fields in one datagram; True when it was sent.

        ``notify(READY=1, STATUS="serving")``. Keys are sent upper-cased;
        True/False become 1/0. Returns False (and never raises) when
        notifications are disabled or the send failed.
        """
        if self._address is None or not fields:
            return False
        payload = "\n".join(f"{k.upper()}={_format_value(v)}" for k, v in fields.items())
        data = payload.encode("utf-8", "replace")
        with self._lock:
            try:
                if self._sock is None:
                    self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                self._sock.sendto(data, self._address)
            except OSError as exc:
                if not self._failing:
                    self._failing = True
                    log.warning(
                        "sd_notify send failed; systemd may not see this service's state",
                        notify_socket=self._printable_address(),
                        error=str(exc),
                    )
                self._close_locked()
                return False
            if self._failing:
                self._failing = False
                log.info("sd_notify send recovered", notify_socket=self._printable_address())
            return True

    def ready(self, status: str | None = None) -> bool:
        """``READY=1``: start-up finished (``systemctl start`` returns)."""
        self._ready = True
        self._last_beat = self._clock()
        fields: dict[str, object] = {"READY": 1}
        if status is not None:
            fields["STATUS"] = self._status_text(status)
        return self.notify(**fields)

    def status(self, text: str) -> bool:
        """``STATUS=…``: one line shown by ``systemctl status``."""
        return self.notify(STATUS=self._status_text(text))

    def watchdog(self) -> bool:
        """``WATCHDOG=1``: the service is alive (keep-alive ping)."""
        self._last_beat = self._clock()
        return self.notify(WATCHDOG=1)

    def stopping(self, status: str | None = None) -> bool:
        """``STOPPING=1``: shutdown began (after SIGTERM)."""
        self._stopping = True
        self._last_beat = self._clock()
        fields: dict[str, object] = {"STOPPING": 1}
        if status is not None:
            fields["STATUS"] = self._status_text(status)
        return self.notify(**fields)

    def reloading(self) -> bool:
        """``RELOADING=1`` (with ``MONOTONIC_USEC``, as systemd ≥ 253 wants); send ``ready()`` after."""
        self._last_beat = self._clock()
        return self.notify(RELOADING=1, MONOTONIC_USEC=time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000)

    def extend_timeout(self, seconds: float) -> bool:
        """``EXTEND_TIMEOUT_USEC``: push the start/stop timeout ``seconds`` from now."""
        self._last_beat = self._clock()
        return self.notify(EXTEND_TIMEOUT_USEC=max(1, int(seconds * 1_000_000)))

    def heartbeat(self, *, extend_s: float = DEFAULT_EXTEND_S, force: bool = False) -> bool:
        """Say "still making progress", at most as often as needed; call it freely.

        After :meth:`ready`: ``WATCHDOG=1`` once half the watchdog interval
        has passed since the last ping (nothing when no watchdog is armed).
        Before ready or while stopping: ``EXTEND_TIMEOUT_USEC=extend_s`` at
        most every ``extend_s / 4`` seconds. Call it from the work loop (per
        batch), not from a timer thread: a ping must mean progress.
        Returns True when something was sent.
        """
        if not self.enabled:
            return False
        now = self._clock()
        if self._ready and not self._stopping:
            every = self.ping_interval
            if every is None:
                return False
            if force or self._last_beat is None or now - self._last_beat >= every:
                return self.watchdog()
            return False
        every = extend_s / 4
        if force or self._last_beat is None or now - self._last_beat >= every:
            return self.extend_timeout(extend_s)
        return False

    def close(self) -> None:
        with self._lock:
            self._close_locked()

    # -- helpers -------------------------------------------------------------

    def _close_locked(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:  # pragma: no cover - close of a datagram socket
                pass
            self._sock = None

    def _printable_address(self) -> str | None:
        if self._address is None:
            return None
        return "@" + self._address[1:] if self._address.startswith("\0") else self._address

    @staticmethod
    def _status_text(text: str) -> str:
        text = " ".join(str(text).split())
        return text if len(text) <= _STATUS_MAX else text[: _STATUS_MAX - 1] + "…"

    def __repr__(self) -> str:
        return f"Notifier(address={self._printable_address()!r}, watchdog={self._watchdog_s!r})"
