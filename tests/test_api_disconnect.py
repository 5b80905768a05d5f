"""A client that leaves in the middle of its request body, against the real daemon on a real socket.

The campaign's flaky client: headers with ``Content-Length: 1000``, 9 bytes of body, then close.
The daemon has nobody to answer; it used to count that as ``{route="unmatched",status="500"}``
with nothing logged, so an alert on 5xx fired for a client's doing. It is counted as 499
("client closed request", as nginx says) under the route the request was sent to, and logged
once as ``http.client_disconnected``; the daemon goes on answering.
"""

from __future__ import annotations

import re
import socket
import time

import pytest

from ledger.writer import LedgerWriter
from tests.daemon_process import Daemon, free_port, write_config

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    root = tmp_path_factory.mktemp("disconnect")
    ledger = root / "ledger" / "agents.db"
    ledger.parent.mkdir()
    with LedgerWriter(ledger, seed=1) as w:
        w.turn("main", user="what is the canary rollout plan", assistant="ten percent, then half, then all")
    port = free_port()
    d = Daemon(write_config(root, ledger, port, sinks=("lancedb",)), port)
    try:
        d.wait_ready()
        yield d
    finally:
        d.stop()


def abandon_body(port: int, path: str) -> None:
    """Headers announcing 1,000 bytes, 9 of them, then close the connection."""
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            "Content-Length: 1000\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head + b'{"query":')
        time.sleep(0.2)  # the daemon has read the headers and the 9 bytes and waits for the rest


def request_series(d: Daemon) -> dict[tuple[str, str], float]:
    out = {}
    for line in d.http.get("/metrics").text.splitlines():
        found = re.fullmatch(r'ledger_indexer_http_requests_total\{route="([^"]*)",status="(\d+)"\} (\S+)', line)
        if found:
            out[(found[1], found[2])] = float(found[3])
    return out


def wait_for_series(d: Daemon, key: tuple[str, str], timeout: float = 10) -> dict[tuple[str, str], float]:
    deadline = time.monotonic() + timeout
    while True:
        series = request_series(d)
        if key in series or time.monotonic() > deadline:
            return series
        time.sleep(0.05)


def server_errors(series: dict[tuple[str, str], float]) -> dict[tuple[str, str], float]:
    return {key: n for key, n in series.items() if key[1].startswith("5")}


def test_an_abandoned_body_is_a_client_closed_request_not_a_5xx(daemon):
    before = server_errors(request_series(daemon))  # /readyz answered 503 while the daemon started
    abandon_body(daemon.port, "/v1/memory_search")
    abandon_body(daemon.port, "/no/such/route")
    series = wait_for_series(daemon, ("unmatched", "499"))
    assert server_errors(series) == before, series  # no 5xx increase for an alert to see
    assert series[("/v1/memory_search", "499")] == 1.0 and series[("unmatched", "499")] == 1.0, series
    events = daemon.events("http.client_disconnected")
    assert [(e["route"], e["method"], e["status"], e["content_length"], e["received_bytes"]) for e in events] == [
        ("/v1/memory_search", "POST", 499, 1000, 9), ("unmatched", "POST", 499, 1000, 9)]
    assert all(e["level"] == "info" for e in events)
    assert daemon.search("canary rollout"), "the daemon stopped answering"
    assert request_series(daemon)[("/v1/memory_search", "200")] == 1.0
