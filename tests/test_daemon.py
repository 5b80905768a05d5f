"""The daemon in a subprocess, against a ledger a writer process appends to."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from ledger.writer import LedgerWriter
from tests.test_sync import expected_paths

ROOT = Path(__file__).resolve().parents[1]
WORDS = ("deploy cache token schema migration retry budget latency shard index vector kafka redis postgres jwt "
         "expiry rollout canary alert queue worker").split()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config(tmp: Path, ledger: Path, port: int, *, token: str | None = "s3cret-token", interval: float = 30):
    token_line = ""
    if token is not None:
        (tmp / "admin.token").write_text(token + "\n")
        token_line = f'admin_token_file = "{tmp / "admin.token"}"'
    cfg = tmp / "config.toml"
    cfg.write_text(f"""
[ledger]
path = "{ledger}"
[index]
dir = "{tmp / 'index'}"
sinks = ["lancedb", "qmd"]
[api]
port = {port}
{token_line}
[sync]
interval_seconds = {interval}
debounce_ms = 50
""")
    return cfg


class Daemon:
    def __init__(self, config: Path, port: int, *, env: dict | None = None, log_level: str = "info"):
        self.config, self.port = config, port
        self.base = f"http://127.0.0.1:{port}"
        full_env = {k: v for k, v in os.environ.items() if not k.startswith(("LEDGER_INDEXER_", "NOTIFY_SOCKET",
                                                                               "WATCHDOG_"))}
        full_env.update(env or {})
        self.log = open(config.parent / f"daemon-{time.monotonic_ns()}.log", "w")
        self.proc = subprocess.Popen([sys.executable, "-m", "indexer.cli", "--config", str(config),
                                      "--log-level", log_level, "run"], cwd=ROOT,
                                     env=full_env, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.logs()
            try:
                if httpx.get(self.base + "/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError("daemon not ready in time:\n" + self.logs())

    def wait_caught_up(self, timeout: float = 180) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = httpx.get(self.base + "/v1/status", timeout=10).json()
            personas = status["personas"]
            if personas and all(p["lag"] == 0 for p in personas.values()):
                return status
            time.sleep(0.2)
        raise AssertionError("daemon did not catch up:\n" + self.logs())

    def search(self, query: str, **kw) -> list[dict]:
        body = {"query": query, "persona": "atlas", **kw}
        response = httpx.post(self.base + "/v1/memory_search", json=body, timeout=30)
        assert response.status_code == 200, response.text
        return response.json()["results"]

    def stop(self, sig=signal.SIGTERM, timeout: float = 10) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self.log.close()

    def logs(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text()[-4000:]

    def events(self) -> list[dict]:
        """The daemon's structured log events so far (JSON lines on stdout)."""
        out = []
        for line in Path(self.log.name).read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    pass  # a line cut by a kill
        return out

    def wait_for_write_in_progress(self, timeout: float = 120, after: int = 0) -> None:
        """Block until a sink write has started and not finished (debug log level).

        ``after``: ignore the first N writes, so a kill lands at a later point.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.logs()
            started = done = 0
            for line in Path(self.log.name).read_text(errors="replace").splitlines():
                if '"sink.write_started"' in line:
                    started += 1
                elif '"sink.write_done"' in line:
                    done += 1
            if started > max(done, after):
                return
            time.sleep(0.005)
        raise AssertionError("no sink write seen in time:\n" + self.logs())


def sink_events(events: list[dict]) -> list[str]:
    return [e["event"] for e in events if e.get("event", "").startswith("sink.write_")]


def assert_killed_mid_write(events: list[dict]) -> None:
    """The log, cut by the kill, ends inside a sink write: started, never done."""
    seq = sink_events(events)
    assert seq and seq[-1] == "sink.write_started", seq[-5:]


@pytest.fixture
def setup(tmp_path):
    ledger = tmp_path / "ledger" / "agents.db"
    ledger.parent.mkdir()
    with LedgerWriter(ledger, seed=1) as w:
        w.turn("main", user="seed question about the canary rollout", assistant="seed answer")
    port = free_port()
    return tmp_path, ledger, port, write_config(tmp_path, ledger, port)


def lance_rows(index_dir: Path, persona: str = "atlas") -> list[dict]:
    from exporters.lancedb import open_retriever

    reader = open_retriever(index_dir / "lancedb")
    table = reader.active_table(persona)
    rows = table.to_arrow().select(["id", "path", "chunk_index"]).to_pylist() if table is not None else []
    reader.close()
    return rows


def assert_converged(tmp: Path, ledger: Path) -> None:
    want = expected_paths(ledger, "atlas")
    rows = lance_rows(tmp / "index")
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "duplicate chunks"
    assert {r["path"] for r in rows} == want
    from exporters.qmd import QmdExporter

    assert QmdExporter(tmp / "index" / "qmd").paths("atlas") == want


def restart_and_check_convergence(tmp: Path, ledger: Path, cfg: Path, port: int) -> None:
    """Start the daemon again, let it catch up, stop it cleanly, check the index."""
    d = Daemon(cfg, port)
    try:
        d.wait_ready(timeout=300)
        d.wait_caught_up(timeout=300)
    finally:
        assert d.stop() == 0
    assert_converged(tmp, ledger)


def test_new_turns_from_a_writer_process_appear_in_search(setup):
    tmp, ledger, port, cfg = setup
    d = Daemon(cfg, port)
    try:
        d.wait_ready()
        writer = subprocess.run([sys.executable, "-m", "ledger.writer", "append", str(ledger), "--turns", "40",
                                 "--sessions", "4", "--marker", "quokka", "--delay", "0.02"], cwd=ROOT, check=True,
                                capture_output=True)
        assert writer.returncode == 0
        d.wait_caught_up()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            hits = d.search("quokka39", mode="keyword")
            if hits:
                break
            time.sleep(0.2)
        assert hits and "quokka39" in hits[0]["snippet"]
        status = httpx.get(d.base + "/v1/status").json()
        atlas = status["personas"]["atlas"]
        assert atlas["documents"] == 41 and atlas["chunks"] >= 41 and atlas["model"]
        metrics = httpx.get(d.base + "/metrics").text
        assert "ledger_indexer_syncs_total" in metrics and "ledger_indexer_query_duration_seconds" in metrics
    finally:
        assert d.stop() == 0
    assert_converged(tmp, ledger)


def test_admin_calls_need_the_right_token_and_reindex_keeps_search_up(setup):
    tmp, ledger, port, cfg = setup
    d = Daemon(cfg, port)
    try:
        d.wait_ready()
        assert httpx.post(d.base + "/v1/admin/reindex", json={}).status_code == 401
        bad = {"Authorization": "Bearer nope"}
        assert httpx.post(d.base + "/v1/admin/reindex", json={}, headers=bad).status_code == 401
        good = {"Authorization": "Bearer s3cret-token"}
        r = httpx.post(d.base + "/v1/admin/reindex", json={"personas": ["atlas"]}, headers=good)
        assert r.status_code == 202, r.text
        seen = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            seen.append(len(d.search("canary rollout")))
            job = httpx.get(d.base + "/v1/admin/reindex", headers=good).json()
            if job["state"] in ("done", "failed"):
                break
        assert job["state"] == "done" and min(seen) > 0
        # the CLI delegates to the running daemon
        cli = subprocess.run([sys.executable, "-m", "indexer.cli", "--config", str(cfg), "reindex", "--json"],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert cli.returncode == 0, cli.stderr
        assert json.loads(cli.stdout)["state"] == "done"
        vis = httpx.put(d.base + "/v1/admin/sessions/visibility", json={"label": "main", "visibility": "private"},
                        headers=good)
        assert vis.status_code == 200
        assert d.search("canary rollout", session="other") == []
        assert d.search("canary rollout", session="main")
        # The QMD export (no scopes) lost the session when the PUT returned ...
        export = tmp / "index" / "qmd"
        from exporters.qmd import QmdExporter

        assert not any("/main/" in p for p in QmdExporter(export).paths("atlas"))
        # ... and the CLI, with the daemon holding the index, goes through its API.
        shared = subprocess.run([sys.executable, "-m", "indexer.cli", "--config", str(cfg), "session", "visibility",
                                 "main", "shared"], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert shared.returncode == 0 and "applied by the running daemon" in shared.stdout, shared.stderr
        assert any("/main/" in p for p in QmdExporter(export).paths("atlas"))
    finally:
        assert d.stop() == 0


def test_admin_calls_are_refused_without_a_configured_token(tmp_path):
    ledger = tmp_path / "agents.db"
    LedgerWriter(ledger).close()
    port = free_port()
    cfg = write_config(tmp_path, ledger, port, token=None)
    d = Daemon(cfg, port)
    try:
        d.wait_ready()
        r = httpx.post(d.base + "/v1/admin/reindex", json={}, headers={"Authorization": "Bearer x"})
        assert r.status_code == 403 and "admin_token_file" in r.text
    finally:
        assert d.stop() == 0


def test_the_lock_refuses_a_second_writer(setup):
    tmp, ledger, port, cfg = setup
    d = Daemon(cfg, port)
    try:
        d.wait_ready()
        second = subprocess.run([sys.executable, "-m", "indexer.cli", "--config", str(cfg), "run"], cwd=ROOT,
                                capture_output=True, text=True, timeout=60)
        assert second.returncode == 1 and "run" in second.stderr and str(d.proc.pid) in second.stderr
        sync = subprocess.run([sys.executable, "-m", "indexer.cli", "--config", str(cfg), "sync"], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
        assert sync.returncode == 1 and str(d.proc.pid) in sync.stderr
    finally:
        assert d.stop() == 0


def big_ledger(ledger: Path, turns: int, seed: int = 2, words: int = 60) -> None:
    rng = random.Random(seed)
    with LedgerWriter(ledger, seed=seed) as w:
        for i in range(turns):
            text = " ".join(rng.choice(WORDS) for _ in range(words))
            w.turn(f"bulk-{i % 20}", user=f"question {i}: {text}", assistant=f"answer {i}: {text[::-1]}")


def test_sigterm_mid_sync_exits_0_quickly_and_the_next_start_converges(tmp_path):
    ledger = tmp_path / "agents.db"
    big_ledger(ledger, 300)
    port = free_port()
    cfg = write_config(tmp_path, ledger, port)
    d = Daemon(cfg, port, log_level="debug")
    d.wait_for_write_in_progress(after=1)
    started = time.monotonic()
    assert d.stop(signal.SIGTERM, timeout=15) == 0
    assert time.monotonic() - started < 10
    # The signal arrived while a sink write was in progress: the last sink
    # event before it is a start without its end.
    events = d.events()
    names = [e.get("event") for e in events]
    assert "daemon.signal" in names, names[-10:]
    before_signal = events[:names.index("daemon.signal")]
    assert sink_events(before_signal)[-1] == "sink.write_started", sink_events(before_signal)[-5:]
    restart_and_check_convergence(tmp_path, ledger, cfg, port)


def test_kill_9_at_random_moments_loses_nothing_and_duplicates_nothing(tmp_path):
    ledger = tmp_path / "agents.db"
    big_ledger(ledger, 60)
    port = free_port()
    cfg = write_config(tmp_path, ledger, port, interval=1)
    writer = subprocess.Popen([sys.executable, "-m", "ledger.writer", "append", str(ledger), "--turns", "60",
                               "--sessions", "6", "--delay", "0.05", "--fork-every", "30"], cwd=ROOT,
                              stdout=subprocess.DEVNULL)
    rng = random.Random(7)
    try:
        for _ in range(3):
            d = Daemon(cfg, port, log_level="debug")
            # A random later write of this run, so kills land at different points.
            d.wait_for_write_in_progress(after=rng.randint(0, 1))
            d.stop(signal.SIGKILL)
            assert_killed_mid_write(d.events())
    finally:
        writer.wait(timeout=120)
    restart_and_check_convergence(tmp_path, ledger, cfg, port)


def test_sd_notify_messages_on_a_real_socket(setup):
    tmp, ledger, port, cfg = setup
    sock_path = tmp / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(sock_path))
    sock.settimeout(0.5)
    d = Daemon(cfg, port, env={"NOTIFY_SOCKET": str(sock_path), "WATCHDOG_USEC": "2000000"})
    messages: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (any("READY=1" in m for m in messages)
                                                   and any("WATCHDOG=1" in m for m in messages)):
            try:
                messages.append(sock.recv(4096).decode())
            except TimeoutError:
                pass
        assert any("READY=1" in m for m in messages), messages
        assert any("STATUS=" in m for m in messages)
        assert any("WATCHDOG=1" in m for m in messages)
    finally:
        code = d.stop()
        try:
            while True:
                messages.append(sock.recv(4096).decode())
        except (TimeoutError, OSError):
            pass
        sock.close()
    assert code == 0
    assert any("STOPPING=1" in m for m in messages)


def test_a_ledger_that_disappears_and_comes_back_replaced_is_handled(tmp_path):
    ledger = tmp_path / "ledger" / "agents.db"
    ledger.parent.mkdir()
    with LedgerWriter(ledger, seed=1) as w:
        for i in range(5):
            w.turn("old", user=f"old history {i}", assistant="ok")
    port = free_port()
    cfg = write_config(tmp_path, ledger, port, interval=1)
    d = Daemon(cfg, port)
    try:
        d.wait_ready()
        d.wait_caught_up()
        for suffix in ("", "-wal", "-shm"):
            Path(str(ledger) + suffix).unlink(missing_ok=True)
        time.sleep(3)
        assert d.proc.poll() is None  # no crash loop
        status = httpx.get(d.base + "/v1/status", timeout=10).json()
        assert "ledger not found" in (status["ledger"]["error"] or "")
        assert d.search("old history")  # search keeps answering from the index
        with LedgerWriter(ledger, seed=99, start_ms=1_600_000_000_000) as w:
            for i in range(8):  # a different, longer history
                w.turn("new", user=f"brand new history {i}", assistant="ok")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if expected_paths(ledger, "atlas") == {r["path"] for r in lance_rows(tmp_path / "index")}:
                    break
            except Exception:
                pass
            time.sleep(0.3)
    finally:
        assert d.stop() == 0
    assert_converged(tmp_path, ledger)
