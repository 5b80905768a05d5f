"""The daemon's first backfill is not a black box (issue 35): while it runs, documents done of the
total, the rate and the ETA show in the CLI's ``status``, ``/v1/status``, ``/readyz``, systemd's
``STATUS=`` and a ``sync.progress`` log event at a steady interval.

A real daemon process with the real model on a ledger that takes it several seconds, and a real
AF_UNIX datagram socket as systemd's notify socket."""

from __future__ import annotations

import re
import socket
import threading
import time
import uuid
from pathlib import Path

import pytest

from indexer.service.pass_progress import PassProgress, PassSnapshot, format_duration
from tests.cli_runner import run_cli
from tests.daemon_process import Daemon, big_ledger, free_port, write_config

TURNS = 600  # 6-12 s at 50-100 documents/s (far longer on a loaded machine): seen mid-pass
STATUS_TEXT = re.compile(r"^backfill [\d,]+/[\d,]+ documents(, [\d,]+/s)?(, ETA .+)?$")


class NotifySocket:
    """systemd's side of sd_notify: every datagram the daemon sends, collected on a thread."""

    def __init__(self):
        self.path = Path("/tmp") / f"li-progress-{uuid.uuid4().hex[:12]}.sock"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(self.path))
        self.sock.settimeout(0.5)
        self.messages: list[dict[str, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(4096).decode()
            except TimeoutError:
                continue
            except OSError:
                return
            self.messages.append(dict(line.split("=", 1) for line in data.split("\n") if "=" in line))

    def statuses(self) -> list[str]:
        return [m["STATUS"] for m in list(self.messages) if "STATUS" in m]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()
        self.path.unlink(missing_ok=True)


def _mid_pass(progress: dict | None) -> bool:
    return bool(progress) and progress["documents_total"] is not None and \
        0 < progress["documents_done"] < progress["documents_total"]


@pytest.fixture
def backfilling(tmp_path):
    ledger = tmp_path / "agents.db"
    big_ledger(ledger, TURNS)
    port = free_port()
    cfg = write_config(tmp_path, ledger, port, sinks=("lancedb",))
    with cfg.open("a") as f:
        f.write("docs_per_write = 8\nprogress_log_seconds = 1\n")
    notify = NotifySocket()
    daemon = Daemon(cfg, port, env={"NOTIFY_SOCKET": str(notify.path)})
    try:
        yield daemon, cfg, notify
    finally:
        daemon.stop()
        notify.close()


def test_a_real_backfill_shows_done_total_rate_and_eta_everywhere_while_it_runs(backfilling):
    daemon, cfg, notify = backfilling
    seen: dict[str, str] = {}
    deadline = time.monotonic() + 240

    def everything_seen() -> bool:
        logged = daemon.events("sync.progress")
        return len(seen) == 3 and bool(_mid_statuses(notify)) and len(logged) >= 2 and \
            any(e["per_second"] and e["eta_seconds"] is not None for e in logged)

    while not everything_seen() and time.monotonic() < deadline:
        try:
            report = daemon.status()
        except Exception:  # not listening yet
            time.sleep(0.2)
            continue
        progress = report["daemon"]["progress"]
        if _mid_pass(progress) and progress["per_second"] and progress["eta_seconds"] is not None:
            assert progress["kind"] == "backfill"
            assert sum(p["total"] for p in progress["personas"].values()) == progress["documents_total"]
            seen.setdefault("/v1/status", progress["text"])
            ready = daemon.http.get("/readyz")
            if ready.status_code == 503 and re.search(r"\(backfill [\d,]+/[\d,]+ documents", ready.json()["reason"]):
                seen.setdefault("/readyz", ready.json()["reason"])
            text = run_cli("--config", str(cfg), "status")
            done = re.search(r"running: backfill ([\d,]+)/([\d,]+) documents, [\d,]+/s, ETA ", text.stdout)
            if text.returncode == 0 and done and int(done[1].replace(",", "")) < int(done[2].replace(",", "")):
                assert "(this pass: " in text.stdout  # beside each persona's "cursor None"
                seen.setdefault("status", text.stdout)
        elif report["daemon"]["ready"]:
            break  # over before everything was seen: the assertions below say what was missing
        time.sleep(0.5)
    assert set(seen) == {"/v1/status", "/readyz", "status"}, (seen, daemon.logs())

    statuses = [s for s in notify.statuses() if s.startswith("backfill ")]
    assert all(STATUS_TEXT.match(s) for s in statuses), statuses
    assert _mid_statuses(notify), notify.messages

    logged = daemon.events("sync.progress")
    assert len(logged) >= 2, daemon.logs()
    assert all(e["kind"] == "backfill" and e["documents_done"] < e["documents_total"] for e in logged)
    assert any(e["per_second"] and e["eta_seconds"] is not None for e in logged)
    gaps = [b - a for a, b in zip(_times(logged), _times(logged)[1:])]
    assert min(gaps) >= 0.9, gaps  # a steady interval (1 s here), not one event per write


def _mid_statuses(notify: NotifySocket) -> list[str]:
    """``STATUS=`` texts sent mid-pass with a rate and an ETA."""
    return [s for s in notify.statuses() if (m := re.match(r"backfill ([\d,]+)/([\d,]+) documents", s))
            and 0 < int(m[1].replace(",", "")) < int(m[2].replace(",", "")) and "/s, ETA " in s]


def _times(events: list[dict]) -> list[float]:
    from datetime import datetime

    return [datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")).timestamp() for e in events]


def test_the_snapshot_rate_is_over_a_window_and_the_text_is_for_people():
    now = [0.0]
    published: list[PassSnapshot] = []
    counter = PassProgress("backfill", publish=published.append, clock=lambda: now[0])
    assert published[-1].describe() == "backfill: counting the documents to index"  # before the plan
    counter.planned({"atlas": 5000})
    now[0] = 10.0
    counter.advanced("atlas", 520)
    snap = published[-1]
    assert (snap.done, snap.total, round(snap.per_second)) == (520, 5000, 52)
    assert snap.describe() == "backfill 520/5,000 documents, 52/s, ETA 1 min 26 s"
    now[0] = 100.0  # 60 s later at 10/s: the rate is the recent one, not the pass average
    for step in range(1, 61):
        now[0] = 40.0 + step
        counter.advanced("atlas", 10)
    assert round(published[-1].per_second) == 10
    assert format_duration(45) == "45 s" and format_duration(7500) == "2 h 05 min"
