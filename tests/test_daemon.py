"""The daemon in a subprocess, against a ledger a writer process appends to."""

from __future__ import annotations

import json
import random
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from exporters.lancedb import local_reads
from ledger.writer import LedgerWriter
from tests.cli_runner import run_cli_process
from tests.daemon_process import (
    ROOT,
    Daemon,
    assert_killed_mid_write,
    big_ledger,
    free_port,
    lance_rows,
    sink_events,
    write_config,
)
from tests.test_sync import expected_paths


@pytest.fixture
def setup(tmp_path):
    ledger = tmp_path / "ledger" / "agents.db"
    ledger.parent.mkdir()
    with LedgerWriter(ledger, seed=1) as w:
        w.turn("main", user="seed question about the canary rollout", assistant="seed answer")
    port = free_port()
    return tmp_path, ledger, port, write_config(tmp_path, ledger, port)


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
        (build,) = [line for line in metrics.splitlines() if line.startswith("ledger_indexer_build_info{")]
        labels = dict(re.findall(r'(\w+)="([^"]*)"', build))
        assert labels["role"] == "run" and labels["model"] == atlas["model"].split("@")[0]
        assert labels["document_format"] == "doc-v3" and labels["redaction"].startswith("1.")
        assert {"version", "python", "lancedb", "fastembed", "sinks"} <= set(labels) and build.endswith(" 1.0")
        assert labels["index_reads"] == ("io_uring" if local_reads.io_uring_status() == "ok" else "threads")
        assert re.search(r"^process_resident_memory_bytes \d", metrics, re.M)
        assert re.search(r"^process_cpu_seconds_total \d", metrics, re.M)
        # the searches' candidates: rank columns from memory or, for a table newer than the warm-up, read
        served = {m[0]: float(m[1]) for m in re.findall(r'^ledger_indexer_rank_cache_rows_total\{source="(\w+)"\} (\S+)',
                                                        metrics, re.M)}
        assert set(served) == {"memory", "table"} and served["memory"] + served["table"] > 0
        assert re.search(r"^ledger_indexer_rank_cache_bytes \d", metrics, re.M)
    finally:
        assert d.stop() == 0
    assert_converged(tmp, ledger)


def test_admin_calls_need_the_right_token_and_reindex_keeps_search_up(setup):
    tmp, ledger, port, cfg = setup
    big_ledger(ledger, 80)  # enough that the reindex is still running across several searches
    d = Daemon(cfg, port)
    try:
        d.wait_ready()
        assert httpx.post(d.base + "/v1/admin/reindex", json={}).status_code == 401
        rebound = httpx.post(d.base + "/v1/memory_search", json={"query": "canary rollout", "persona": "atlas"},
                             headers={"Host": "rebind.attacker.example:80"})
        assert rebound.status_code == 421 and "results" not in rebound.text  # DNS rebinding refused
        bad = {"Authorization": "Bearer nope"}
        assert httpx.post(d.base + "/v1/admin/reindex", json={}, headers=bad).status_code == 401
        good = {"Authorization": "Bearer s3cret-token"}
        r = httpx.post(d.base + "/v1/admin/reindex", json={"personas": ["atlas"]}, headers=good)
        assert r.status_code == 202, r.text
        seen, during = [], 0
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            before = httpx.get(d.base + "/v1/admin/reindex", headers=good).json()["state"]
            seen.append(len(d.search("canary rollout")))
            job = httpx.get(d.base + "/v1/admin/reindex", headers=good).json()
            during += before == job["state"] == "running"  # this search ran while the reindex did
            if job["state"] in ("done", "failed"):
                break
        assert job["state"] == "done" and min(seen) > 0
        assert during > 0, seen
        # the CLI delegates to the running daemon
        cli = run_cli_process("--config", str(cfg), "reindex", "--json", timeout=120)
        assert cli.returncode == 0, cli.stderr
        delegated = json.loads(cli.stdout)
        assert delegated["state"] == "done"
        # counted in documents before the first was built, and ended at that count
        assert delegated["progress"]["atlas"]["done"] == delegated["progress"]["atlas"]["total"] > 0
        def sessions_seen_by(caller: str) -> set[str]:
            return {r["session"] for r in d.search("canary rollout", session=caller)}

        assert "main" in sessions_seen_by("other")
        vis = httpx.put(d.base + "/v1/admin/sessions/visibility", json={"label": "main", "visibility": "private"},
                        headers=good)
        assert vis.status_code == 200
        assert "main" not in sessions_seen_by("other") and "main" in sessions_seen_by("main")
        # The QMD export (no scopes) lost the session when the PUT returned ...
        export = tmp / "index" / "qmd"
        from exporters.qmd import QmdExporter

        assert not any("/main/" in p for p in QmdExporter(export).paths("atlas"))
        # ... and the CLI, with the daemon holding the index, goes through its API.
        shared = run_cli_process("--config", str(cfg), "session", "visibility", "main", "shared", timeout=120)
        assert shared.returncode == 0 and "applied by the running daemon" in shared.stdout, shared.stderr
        assert any("/main/" in p for p in QmdExporter(export).paths("atlas"))
        assert_cli_queries_go_through_the_daemon(d, cfg)
    finally:
        assert d.stop() == 0


# A CLI process that answers search/get/status and reports which heavy modules it loaded.
_CLI_PROBE = """
import contextlib, io, json, sys
from indexer.cli.main import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(sys.argv[1:])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("lancedb", "onnxruntime", "fastembed", "numpy", "pyarrow"))
print(json.dumps({"code": code, "stdout": out.getvalue(), "heavy": heavy}))
"""


def assert_cli_queries_go_through_the_daemon(d: Daemon, cfg: Path) -> None:
    """With a daemon holding the index, `search`, `get` and `status` are its API's answers: the
    CLI process never loads the model or opens the index (issue 12)."""
    def probe(*args: str) -> dict:
        import subprocess
        import sys

        done = subprocess.run([sys.executable, "-c", _CLI_PROBE, "--config", str(cfg), *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.splitlines()[-1])

    searched = probe("search", "canary rollout", "--persona", "atlas", "--json")
    assert searched["code"] == 0 and searched["heavy"] == [], searched
    results = json.loads(searched["stdout"])["results"]
    assert [r["path"] for r in results] == [r["path"] for r in d.search("canary rollout")]
    got = probe("get", results[0]["path"], "--persona", "atlas", "--json")
    assert got["code"] == 0 and got["heavy"] == []
    assert json.loads(got["stdout"]) == d.http.get("/v1/memory_get", params={"persona": "atlas",
                                                                            "path": results[0]["path"]}).json()
    status = probe("status", "--json")
    assert status["code"] == 0 and status["heavy"] == [] and "atlas" in json.loads(status["stdout"])["personas"]


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
        second = run_cli_process("--config", str(cfg), "run", timeout=60)
        assert second.returncode == 1 and "run" in second.stderr and str(d.proc.pid) in second.stderr
        sync = run_cli_process("--config", str(cfg), "sync", timeout=60)
        assert sync.returncode == 1 and str(d.proc.pid) in sync.stderr
    finally:
        assert d.stop() == 0


def test_sigterm_mid_sync_exits_0_quickly_and_the_next_start_converges(tmp_path):
    ledger = tmp_path / "agents.db"
    big_ledger(ledger, 96)
    port = free_port()
    cfg = write_config(tmp_path, ledger, port)
    # Writes of 32 documents: three in the backfill, the signal lands in the second (the real model
    # embeds each write; 300 turns in writes of 128 cost four times the model work to show the same).
    d = Daemon(cfg, port, log_level="debug", env={"LEDGER_INDEXER_SYNC_DOCS_PER_WRITE": "32"})
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


def test_kill_9_mid_write_three_times_loses_nothing_and_duplicates_nothing(tmp_path):
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
            # Writes of 32 documents: several per run of this small ledger, so a kill can land in any.
            d = Daemon(cfg, port, log_level="debug", env={"LEDGER_INDEXER_SYNC_DOCS_PER_WRITE": "32"})
            # The first or the second write of this run (seeded), so kills land at different points.
            d.wait_for_write_in_progress(after=rng.randint(0, 1))
            assert d.stop(signal.SIGKILL) == -signal.SIGKILL  # killed, not exited on its own
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


def test_status_text_says_when_the_daemons_passes_fail_and_when_they_recover(setup):
    tmp_path, ledger, port, _ = setup
    cfg = write_config(tmp_path, ledger, port, interval=0.5)  # passes every half second, failing or not
    d = Daemon(cfg, port)
    try:
        d.wait_ready()
        d.wait_caught_up()
        away = tmp_path / "elsewhere"
        ledger.parent.rename(away)  # the ledger's folder is gone: every pass fails until it is back
        deadline = time.monotonic() + 60
        while d.status()["daemon"]["consecutive_errors"] < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        text = run_cli_process("--config", str(cfg), "status", timeout=60)
        assert text.returncode == 0, text.stderr
        [line] = [x for x in text.stdout.splitlines() if x.startswith("daemon pid")]
        assert re.fullmatch(r"daemon pid \d+: ready, \d+ passes, \d+ failed; the last \d+ in a row, the latest: "
                            r"LedgerUnavailable: .*ledger not found.* — fix the cause .*", line), line
        assert d.search("canary rollout")  # what is indexed is still served
        away.rename(ledger.parent)
        deadline = time.monotonic() + 60
        while d.status()["daemon"]["consecutive_errors"] and time.monotonic() < deadline:
            time.sleep(0.2)
        text = run_cli_process("--config", str(cfg), "status", timeout=60)
        [line] = [x for x in text.stdout.splitlines() if x.startswith("daemon pid")]
        assert re.fullmatch(r"daemon pid \d+: ready, \d+ passes, \d+ failed", line), line
    finally:
        assert d.stop() == 0


def test_an_index_key_that_is_not_a_key_stops_start_up_with_exit_2(setup):
    """Every pass digests with the key: read at start-up, a broken one is a set-up error (exit 2, one
    line) that systemd does not restart into — not a pass failing every half second."""
    tmp, ledger, port, cfg = setup
    key = tmp / "index" / "state.sqlite.key"
    key.parent.mkdir(parents=True, exist_ok=True)
    key.write_bytes(b"broken")
    out = run_cli_process("--config", str(cfg), "run", timeout=120)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        f"ledger-indexer: the index key {key} is not a key (6 bytes, not 32): restore it from a backup, or move it "
        "aside: a new key is made, and the next sync reads the ledger's messages again and, when known secrets "
        "are set, rebuilds every persona")
