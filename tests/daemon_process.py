"""The daemon in a real subprocess (``python -m indexer.cli --config CFG run``): the one
harness of the daemon tests, the kill campaign and the daemon benchmark."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import httpx

from ledger.writer import LedgerWriter

ROOT = Path(__file__).resolve().parents[1]
WORDS = ("deploy cache token schema migration retry budget latency shard index vector kafka redis postgres jwt "
         "expiry rollout canary alert queue worker").split()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config(root: Path, ledger: Path, port: int, *, index_dir: Path | None = None,
                 sinks: Sequence[str] = ("lancedb", "qmd"), token: str | None = "s3cret-token",
                 interval: float = 30, debounce_ms: int = 50, name: str = "config.toml",
                 personas: Sequence[str] = ()) -> Path:
    """A daemon config in ``root``; ``token``: the admin token (written to ``root/admin.token``);
    ``personas``: ``[ledger] personas`` (empty: every persona of the ledger and of the index)."""
    token_line = ""
    if token is not None:
        (root / "admin.token").write_text(token + "\n")
        token_line = f'admin_token_file = "{root / "admin.token"}"'
    cfg = root / name
    cfg.write_text(f"""
[ledger]
path = "{ledger}"
personas = {json.dumps(list(personas))}
[index]
dir = "{index_dir or root / 'index'}"
sinks = {json.dumps(list(sinks))}
[api]
port = {port}
{token_line}
[sync]
interval_seconds = {interval}
debounce_ms = {debounce_ms}
""")
    return cfg


def big_ledger(ledger: Path, turns: int, seed: int = 2, words: int = 60) -> None:
    rng = random.Random(seed)
    with LedgerWriter(ledger, seed=seed) as w:
        for i in range(turns):
            text = " ".join(rng.choice(WORDS) for _ in range(words))
            w.turn(f"bulk-{i % 20}", user=f"question {i}: {text}", assistant=f"answer {i}: {text[::-1]}")


class Daemon:
    """One daemon process; its stdout (JSON log lines) goes to a file beside the config."""

    def __init__(self, config: Path, port: int, *, env: dict | None = None, log_level: str = "info",
                 host: str = "127.0.0.1", command: str = "run"):
        """``host``: the address to reach its API at (the config says where it binds); ``command``:
        ``run`` (the daemon) or ``serve`` (a reader)."""
        self.config, self.port = config, port
        self.base = f"http://{host}:{port}"
        full_env = {k: v for k, v in os.environ.items() if not k.startswith(("LEDGER_INDEXER_", "NOTIFY_SOCKET",
                                                                               "WATCHDOG_"))}
        full_env.setdefault("LANCEDB_LOG", "error")
        full_env.update(env or {})
        self.log_path = config.parent / f"daemon-{time.monotonic_ns()}.log"
        self.log = open(self.log_path, "w")  # noqa: SIM115 - open for the life of the daemon
        self.started = time.perf_counter()
        self.proc = subprocess.Popen([sys.executable, "-m", "indexer.cli", "--config", str(config),
                                      "--log-level", log_level, command], cwd=ROOT,
                                     env=full_env, stdout=self.log, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        self.http = httpx.Client(base_url=self.base, timeout=60)

    def wait_ready(self, timeout: float = 120) -> float:
        """Seconds from start to ``/readyz`` 200."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"the daemon exited ({self.proc.returncode}):\n{self.logs()}"
            try:
                if self.http.get("/readyz", timeout=2).status_code == 200:
                    return time.perf_counter() - self.started
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError("daemon not ready in time:\n" + self.logs())

    def status(self) -> dict:
        return self.http.get("/v1/status", timeout=10).json()

    def wait_caught_up(self, personas: Sequence[str] | None = None, timeout: float = 180) -> dict:
        """Until every persona (or each of ``personas``) has lag 0; the status then."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.status()
            known = status.get("personas") or {}
            if personas is None and known and all(p["lag"] == 0 for p in known.values()):
                return status
            if personas is not None and all(p in known and known[p]["lag"] == 0 for p in personas):
                return status
            time.sleep(0.2)
        raise AssertionError("daemon did not catch up:\n" + self.logs())

    def memory_search(self, body: dict) -> dict:
        """One ``/v1/memory_search`` call; the whole response (asserts 200)."""
        response = self.http.post("/v1/memory_search", json=body, timeout=30)
        assert response.status_code == 200, f"memory_search {body} -> {response.status_code}: {response.text[:500]}"
        return response.json()

    def search(self, query: str, **kw) -> list[dict]:
        """The results of a search as persona ``atlas`` (or ``persona=``)."""
        return self.memory_search({"query": query, "persona": "atlas", **kw})["results"]

    def stop(self, sig=signal.SIGTERM, timeout: float = 10) -> int:
        """Signal the daemon and wait for it; kills it when it outlives ``timeout``."""
        self.http.close()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise
        finally:
            self.log.close()

    def logs(self, n: int = 4000) -> str:
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text(errors="replace")[-n:]

    tail = logs

    def events(self, name: str | None = None) -> list[dict]:
        """The daemon's structured log events so far (all, or those named ``name``); each with
        ``ts`` (epoch seconds) when it has a timestamp. Lines cut by a kill are skipped."""
        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            if not line.startswith("{"):
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if name is not None and rec.get("event") != name:
                continue
            if rec.get("timestamp"):
                rec["ts"] = datetime.fromisoformat(rec["timestamp"]).timestamp()
            out.append(rec)
        return out

    def wait_for_write_in_progress(self, timeout: float = 120, after: int = 0) -> None:
        """Block until a sink write has started and not finished (debug log level).

        ``after``: ignore the first N writes, so a kill lands at a later point.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.logs()
            started = done = 0
            for line in self.log_path.read_text(errors="replace").splitlines():
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


def lance_rows(index_dir: Path, persona: str = "atlas") -> list[dict]:
    """Every chunk row (id, path, chunk_index) of the persona's live LanceDB table."""
    from exporters.lancedb import open_retriever

    reader = open_retriever(index_dir / "lancedb")
    table = reader.active_table(persona)
    rows = table.to_arrow().select(["id", "path", "chunk_index"]).to_pylist() if table is not None else []
    reader.close()
    return rows
