"""A real full file system (a tmpfs filled to the last byte) under the embedding cache, the admin
API and a daemon starting up: each names the full disk and its folder, nothing healthy is moved
aside, and everything resumes once there is room (issue 32, defects 5 and 6)."""

from __future__ import annotations

import signal
import sqlite3
import time

import httpx
import numpy as np
import pytest
from fake_embedder import FakeEmbedder
from structlog.testing import capture_logs

from indexer.embedding.cache import CachedEmbedder
from indexer.runtime.storage_errors import StorageCause
from ledger.writer import LedgerWriter
from tests.cli_runner import run_cli_process
from tests.daemon_process import Daemon, free_port, write_config
from tests.full_disk import small_disk  # noqa: F401 - the fixture

AUTH = {"Authorization": "Bearer s3cret-token"}  # write_config's admin token


def no_moved_aside(folder) -> None:
    names = sorted(p.name for p in folder.rglob("*"))
    assert not [n for n in names if ".corrupt-" in n], names


def test_a_full_disk_leaves_the_embedding_cache_in_place(small_disk, monkeypatch):  # noqa: F811
    path = small_disk.path / "embed_cache.sqlite"
    texts = [f"cached text number {i}" for i in range(200)]
    first = CachedEmbedder(FakeEmbedder(), path)
    vectors = first.embed(texts)
    first.close()  # a clean close removes -wal and -shm: the next open must create them
    small_disk.fill()
    monkeypatch.setattr(CachedEmbedder, "REOPEN_AFTER_S", 0.0, raising=False)  # try again on every call

    inner = FakeEmbedder()
    with capture_logs() as logs:
        cache = CachedEmbedder(inner, path)  # no exception: the cache is disposable, the daemon starts
    assert cache.unavailable is not None and cache.unavailable.fault.cause is StorageCause.DISK_FULL
    assert f"disk full at {small_disk.path} (0 B free of 16.0 MiB): free space" in str(cache.unavailable)
    (event,) = [e for e in logs if e["event"] == "embedding_cache.unavailable"]
    assert event["cause"] == "disk_full" and event["where"] == str(small_disk.path) and event["free_bytes"] == 0
    assert np.array_equal(cache.embed(texts), vectors) and inner.texts_embedded == 200  # uncached, not failed
    assert path.exists()
    no_moved_aside(small_disk.path)

    small_disk.make_room()
    inner.texts_embedded = 0
    assert np.array_equal(cache.embed(texts), vectors)
    assert cache.unavailable is None and inner.texts_embedded == 0  # the same file, every vector still in it
    assert cache.entries() == 200
    cache.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    no_moved_aside(small_disk.path)


def start_on_small_disk(tmp_path, disk, turns: int = 3) -> tuple[Daemon, object, int]:
    ledger = tmp_path / "ledger" / "agents.db"
    ledger.parent.mkdir()
    with LedgerWriter(ledger, seed=1) as w:
        for i in range(turns):
            w.turn(f"s{i}", user=f"question {i} about the canary rollout", assistant=f"answer {i}")
    port = free_port()
    cfg = write_config(tmp_path, ledger, port, index_dir=disk.path)
    d = Daemon(cfg, port)
    d.wait_ready()
    d.wait_caught_up()
    return d, cfg, port


def test_an_admin_call_on_a_full_disk_names_it(small_disk, tmp_path):  # noqa: F811
    d, _, _ = start_on_small_disk(tmp_path, small_disk)
    change = {"label": "s1", "visibility": "private"}
    try:
        small_disk.fill()
        r = d.http.put("/v1/admin/sessions/visibility", json=change, headers=AUTH)
        assert r.status_code == 507, r.text
        error = r.json()["error"]
        assert error.startswith(f"disk full at {small_disk.path} ("), error
        assert "free space on that file system" in error and "database or disk is full" in error
        assert r.headers["Retry-After"]
        small_disk.make_room()
        r = d.http.put("/v1/admin/sessions/visibility", json=change, headers=AUTH)
        assert r.status_code == 200 and r.json() == change
    finally:
        assert d.stop() == 0
    (event,) = d.events("api.storage_error")
    assert event["cause"] == "disk_full" and event["where"] == str(small_disk.path)
    assert event["route"] == "/v1/admin/sessions/visibility" and event["error"].endswith("database or disk is full")
    log = d.log_path.read_text()
    assert "cannot rollback" not in log and "no transaction is active" not in log
    assert "api.backend_error" not in log
    no_moved_aside(small_disk.path)


def readyz_when_it_names_a_cause(d: Daemon, timeout: float = 60) -> dict:
    """The /readyz body once its reason names a full disk (every answer meanwhile is 503)."""
    deadline = time.monotonic() + timeout
    body: dict = {}
    while time.monotonic() < deadline:
        assert d.proc.poll() is None, d.logs()
        try:
            r = d.http.get("/readyz", timeout=2)
        except httpx.HTTPError:  # not listening yet
            time.sleep(0.2)
            continue
        assert r.status_code == 503, r.text
        body = r.json()
        if "disk full" in body.get("reason", ""):
            return body
        time.sleep(0.2)
    raise AssertionError(f"/readyz never said why it is not ready: {body}\n{d.logs()}")


@pytest.mark.parametrize("stopped,why", [
    # a clean stop removes the WAL index (-shm): there is no room to create it, the state DB cannot open
    ("cleanly", "the index could not be opened"),
    # killed, the -shm stays: the index opens and the first pass cannot write (the campaign's case)
    ("killed", "the first sync failed"),
])
def test_a_daemon_started_on_a_full_disk_says_why_it_is_not_ready(small_disk, tmp_path, stopped, why):  # noqa: F811
    d, cfg, port = start_on_small_disk(tmp_path, small_disk)
    if stopped == "cleanly":
        assert d.stop() == 0
    else:
        assert d.stop(signal.SIGKILL) == -signal.SIGKILL
    with LedgerWriter(tmp_path / "ledger" / "agents.db", seed=2) as w:  # the first pass has work to write
        for i in range(5):
            w.turn(f"new{i}", user=f"new question {i} while the disk is full", assistant=f"new answer {i}")
    small_disk.fill()
    d = Daemon(cfg, port)
    try:
        body = readyz_when_it_names_a_cause(d)
        assert body["status"] == "starting"
        reason = body["reason"]
        assert reason.startswith(f"disk full at {small_disk.path} ("), (reason, d.logs())
        assert "free space on that file system" in reason and why in reason
        daemon = d.status()["daemon"]
        assert daemon["ready"] is False and daemon["not_ready_reason"].startswith(f"disk full at {small_disk.path}")
        text = run_cli_process("--config", str(cfg), "status", timeout=60)  # the CLI asks the daemon
        assert text.returncode == 0, text.stderr
        assert f"daemon pid {d.pid}: not ready (disk full at {small_disk.path} (" in text.stdout, text.stdout
        failed = d.events("daemon.open_failed" if stopped == "cleanly" else "sync.failed")[0]
        assert failed["cause"] == "disk_full" and failed["where"] == str(small_disk.path)
        assert "rollback" not in failed["error"]

        small_disk.make_room()
        d.wait_ready(timeout=120)  # the next retry (backoff) succeeds
        assert d.http.get("/readyz").json() == {"status": "ready"}
        d.wait_caught_up()
    finally:
        assert d.stop() == 0
    no_moved_aside(small_disk.path)
