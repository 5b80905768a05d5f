"""Driving the MCP doors with the SDK's real clients: ``ledger-indexer mcp`` over stdio, the daemon's ``/mcp``.

Both return what a test needs to assert on: the ``CallToolResult`` objects
(``is_error``, ``structured_content``, ``content[0].text``), the tool list,
and for stdio the server's stderr (its structured log events).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio

from indexer.cli.demo import write_demo
from tests.cli_runner import CliResult, run_cli

ROOT = Path(__file__).resolve().parents[1]
T = TypeVar("T")

DM = "dm:+1 555/123"  # the demo's direct-message session of atlas
WORKER = "worker/auth #2"


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a child: ours without LEDGER_INDEXER_* (the config file says everything)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LEDGER_INDEXER_", "NOTIFY_SOCKET", "WATCHDOG_"))}
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("LANCEDB_LOG", "error")
    env.update(extra)
    return env


def cli(config: Path, *args: str, check: bool = True) -> CliResult:
    """``ledger-indexer --config CONFIG ARGS`` through the one test CLI runner (in-process)."""
    result = run_cli("--config", str(config), *args)
    if check and result.returncode != 0:
        raise AssertionError(f"ledger-indexer {' '.join(args)} exited {result.returncode}:\n{result.stderr[-3000:]}")
    return result


def demo_config(root: Path, *, port: int | None = None, token_file: Path | None = None) -> Path:
    """The demo ledger and config (lancedb only), optionally on ``port`` and with an MCP token file."""
    config, _ = write_demo(root / "demo")
    text = config.read_text().replace('sinks = ["lancedb", "qmd"]', 'sinks = ["lancedb"]')
    if port is not None:
        text = text.replace("port = 8765", f"port = {port}")
    if token_file is not None:
        text += f'\n[mcp]\ntoken_file = "{token_file}"\n'
    config.write_text(text)
    return config


def persona_paths(config: Path, persona: str, session: str | None = None) -> set[str]:
    """Document paths from the state DB (what a model could guess or have seen elsewhere)."""
    from indexer.runtime.config import load_config
    from indexer.state.db import StateDB

    state = StateDB(load_config(config, env={}).state_db_path)
    try:
        return state.paths(persona, session=session)
    finally:
        state.close()


def first_path(config: Path, persona: str, session: str) -> str:
    return sorted(p for p in persona_paths(config, persona, session) if "/turns/" in p)[0]


class Stdio:
    """One ``ledger-indexer mcp`` process, driven by the SDK's ``stdio_client``."""

    def __init__(self, config: Path, persona: str, session: str | None = None, scope: str | None = None) -> None:
        self.args = ["-m", "indexer.cli", "--config", str(config), "--log-level", "info", "mcp", "--persona", persona]
        if session is not None:
            self.args += ["--session", session]
        if scope is not None:
            self.args += ["--scope", scope]
        self.stderr = ""

    def run(self, script: Callable[[Any], Awaitable[T]]) -> T:
        """Start the server, initialize, run ``script(session)``, stop; the server's stderr is kept."""
        from mcp import ClientSession, StdioServerParameters, stdio_client

        params = StdioServerParameters(command=sys.executable, args=self.args, env=clean_env(), cwd=str(ROOT))

        async def main() -> T:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await script(session)

        with tempfile.TemporaryFile("w+") as errlog:
            try:
                return anyio.run(main)
            finally:
                errlog.seek(0)
                self.stderr = errlog.read()

    def events(self) -> list[dict]:
        return stderr_events(self.stderr)


class StdioLines:
    """One ``ledger-indexer mcp`` process spoken to line by line, as a client the SDK did not write
    may speak: any line goes in, each line the server writes back is read as it comes."""

    def __init__(self, config: Path, persona: str) -> None:
        self._errlog = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen([sys.executable, "-m", "indexer.cli", "--config", str(config), "--log-level",
                                      "info", "mcp", "--persona", persona], cwd=ROOT, env=clean_env(),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._errlog)
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._read, name="mcp-stdout", daemon=True).start()
        self.stderr = ""

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def send(self, line: str) -> None:
        self.proc.stdin.write(line.encode("utf-8") + b"\n")
        self.proc.stdin.flush()

    def replies_until(self, request_id: int, timeout: float = 120) -> list[dict]:
        """Every line written back until the answer to ``request_id`` (included)."""
        out: list[dict] = []
        deadline = time.monotonic() + timeout
        while not out or out[-1].get("id") != request_id:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no answer to request {request_id}; got {out}") from None
            assert line is not None, f"the server closed stdout; got {out}"
            out.append(json.loads(line))
        return out

    def close(self) -> None:
        """Close stdin (the client leaves), wait for the server; its stderr is kept."""
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=10)
            self._errlog.seek(0)
            self.stderr = self._errlog.read()
            self._errlog.close()

    def __enter__(self) -> StdioLines:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def events(self) -> list[dict]:
        return stderr_events(self.stderr)


def stderr_events(stderr: str) -> list[dict]:
    """The structured log events of a server's stderr (JSON lines; anything else skipped)."""
    out = []
    for line in stderr.splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return out


def run_http(url: str, token: str | None, script: Callable[[Any], Awaitable[T]]) -> T:
    """Open the daemon's ``/mcp`` with the SDK's streamable HTTP client (``token``: the bearer)."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main() -> T:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60, read=120))
        async with http, streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await script(session)

    return anyio.run(main)


def text_of(result) -> str:
    return result.content[0].text


def assert_answer(result) -> dict:
    """A successful call: structured content, and the same object as JSON text."""
    assert not result.is_error, text_of(result)
    assert json.loads(text_of(result)) == result.structured_content
    return result.structured_content


def assert_refused(result, *needles: str) -> str:
    """An error result with one line of text containing every needle (and no traceback)."""
    assert result.is_error, result.structured_content
    text = text_of(result)
    assert "\n" not in text and "Traceback" not in text, text
    for needle in needles:
        assert needle in text, text
    return text
