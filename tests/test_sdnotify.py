"""sd_notify against real AF_UNIX datagram sockets (a path and an abstract name)."""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

import pytest

from indexer.service.sdnotify import Notifier, notify_socket_address, watchdog_interval


def _recv(sock: socket.socket) -> dict[str, str]:
    data = sock.recv(4096).decode()
    return dict(line.split("=", 1) for line in data.split("\n"))


def _nothing_pending(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        sock.recv(4096)
    except BlockingIOError:
        return True
    finally:
        sock.setblocking(True)
    return False


@pytest.fixture
def path_socket(tmp_path: Path):
    # AF_UNIX paths are limited to 108 bytes; tmp_path can be long.
    path = Path("/tmp") / f"li-notify-{uuid.uuid4().hex[:12]}.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(2)
    yield str(path), sock
    sock.close()
    path.unlink(missing_ok=True)


@pytest.fixture
def abstract_socket():
    name = f"ledger-indexer-test-{uuid.uuid4().hex}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    sock.settimeout(2)
    yield "@" + name, sock
    sock.close()


def test_ready_status_watchdog_stopping_on_a_path_socket(path_socket):
    address, sock = path_socket
    n = Notifier(environ={"NOTIFY_SOCKET": address})
    assert n.enabled
    assert n.ready(status="indexed 12 documents")
    assert _recv(sock) == {"READY": "1", "STATUS": "indexed 12 documents"}
    assert n.status("syncing atlas:\n 3/10 sessions")
    assert _recv(sock) == {"STATUS": "syncing atlas: 3/10 sessions"}  # one line
    assert n.watchdog()
    assert _recv(sock) == {"WATCHDOG": "1"}
    assert n.extend_timeout(90)
    assert _recv(sock) == {"EXTEND_TIMEOUT_USEC": "90000000"}
    assert n.reloading()
    msg = _recv(sock)
    assert msg["RELOADING"] == "1" and int(msg["MONOTONIC_USEC"]) > 0
    assert n.stopping()
    assert _recv(sock) == {"STOPPING": "1"}
    assert n.notify(errno=5, status="multi\nline", ready=True)
    assert _recv(sock) == {"ERRNO": "5", "STATUS": "multi line", "READY": "1"}
    n.close()


def test_abstract_socket(abstract_socket):
    address, sock = abstract_socket
    n = Notifier(environ={"NOTIFY_SOCKET": address})
    assert n.ready()
    assert _recv(sock) == {"READY": "1"}
    assert n.watchdog()
    assert _recv(sock) == {"WATCHDOG": "1"}


def test_reads_notify_socket_from_the_environment(path_socket, monkeypatch):
    address, sock = path_socket
    monkeypatch.setenv("NOTIFY_SOCKET", address)
    monkeypatch.setenv("WATCHDOG_USEC", "2000000")
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid()))
    n = Notifier(unset_environment=True)
    assert "NOTIFY_SOCKET" not in os.environ and "WATCHDOG_USEC" not in os.environ
    assert n.watchdog_interval == 2.0 and n.ping_interval == 1.0
    assert n.ready()
    assert _recv(sock) == {"READY": "1"}


def test_no_op_without_notify_socket(monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    n = Notifier()
    assert not n.enabled
    assert n.ready() is False
    assert n.status("x") is False
    assert n.watchdog() is False
    assert n.stopping() is False
    assert n.heartbeat() is False
    assert n.watchdog_interval is None


@pytest.mark.parametrize("value", ["", "relative/path", "vsock:2:1234", "@"])
def test_unsupported_addresses_disable_notifications(value):
    n = Notifier(environ={"NOTIFY_SOCKET": value})
    assert not n.enabled
    assert n.ready() is False


def test_send_failure_never_raises_and_is_logged_once(tmp_path):
    import io
    import logging

    import structlog

    from indexer.runtime.logs import configure_logging

    root = logging.getLogger()
    before = list(root.handlers)
    out = io.StringIO()
    configure_logging(json=True, stream=out)
    try:
        n = Notifier(environ={"NOTIFY_SOCKET": str(tmp_path / "nobody-listens.sock")})
        assert n.enabled
        assert n.ready() is False
        assert n.status("still nobody") is False
        assert n.watchdog() is False
    finally:
        for h in list(root.handlers):
            if h not in before:
                root.removeHandler(h)
        structlog.reset_defaults()
    assert out.getvalue().count("sd_notify send failed") == 1


def test_recovers_when_the_socket_appears(path_socket, tmp_path):
    address, sock = path_socket
    missing = f"/tmp/li-notify-missing-{uuid.uuid4().hex[:8]}.sock"
    n = Notifier(environ={"NOTIFY_SOCKET": missing})
    assert n.ready() is False
    # systemd re-created its socket (e.g. daemon-reexec): later sends work again.
    n._address = address
    assert n.watchdog() is True
    assert _recv(sock) == {"WATCHDOG": "1"}


def test_watchdog_interval_parsing():
    pid = os.getpid()
    assert watchdog_interval({}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "60000000"}) == 60.0
    assert watchdog_interval({"WATCHDOG_USEC": "500000", "WATCHDOG_PID": str(pid)}) == 0.5
    assert watchdog_interval({"WATCHDOG_USEC": "60000000", "WATCHDOG_PID": str(pid + 1)}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "60000000", "WATCHDOG_PID": "x"}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "abc"}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "0"}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "-5"}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "1000", "WATCHDOG_PID": "42"}, pid=42) == 0.001


def test_notify_socket_address():
    assert notify_socket_address("/run/systemd/notify") == "/run/systemd/notify"
    assert notify_socket_address("@abc") == "\0abc"
    assert notify_socket_address(None) is None
    assert notify_socket_address("x") is None


def test_heartbeat_extends_start_timeout_then_pings_at_half_interval(path_socket):
    address, sock = path_socket
    now = [100.0]
    n = Notifier(environ={"NOTIFY_SOCKET": address, "WATCHDOG_USEC": "60000000"}, clock=lambda: now[0])
    assert n.ping_interval == 30.0

    # Before READY=1: extend the start timeout, at most every extend_s / 4.
    assert n.heartbeat(extend_s=120) is True
    assert _recv(sock) == {"EXTEND_TIMEOUT_USEC": "120000000"}
    now[0] += 10
    assert n.heartbeat(extend_s=120) is False
    now[0] += 21
    assert n.heartbeat(extend_s=120) is True
    assert _recv(sock) == {"EXTEND_TIMEOUT_USEC": "120000000"}

    n.ready()
    assert _recv(sock) == {"READY": "1"}
    now[0] += 29
    assert n.heartbeat() is False
    assert _nothing_pending(sock)
    now[0] += 1
    assert n.heartbeat() is True
    assert _recv(sock) == {"WATCHDOG": "1"}
    assert n.heartbeat() is False
    assert n.heartbeat(force=True) is True
    assert _recv(sock) == {"WATCHDOG": "1"}

    # While stopping: extend the stop timeout instead.
    n.stopping()
    assert _recv(sock) == {"STOPPING": "1"}
    now[0] += 31
    assert n.heartbeat(extend_s=20) is True
    assert _recv(sock) == {"EXTEND_TIMEOUT_USEC": "20000000"}


def test_heartbeat_without_watchdog_after_ready_sends_nothing(path_socket):
    address, sock = path_socket
    n = Notifier(environ={"NOTIFY_SOCKET": address})
    n.ready()
    _recv(sock)
    assert n.heartbeat() is False
    assert _nothing_pending(sock)
