"""``ledger-indexer mcp --persona P [--session L] [--scope persona|project|session]``: MCP over stdio.

One server per agent process. The persona, the session and the widest scope
come from these arguments (the agent runtime that starts the server sets
them), never from a tool call (:mod:`indexer.service.mcp_tools`).

Who answers, decided per call:

- a daemon running on this index (it holds the writer lock as ``run``): its
  HTTP API, found as the CLI finds it (``indexer.cli.remote.DaemonApi``).
  Nothing heavy is loaded here — no model, no LanceDB — so the agent's first
  call answers in milliseconds; if the daemon stops answering, the call falls
  back to the index;
- otherwise the index itself (``Searcher``, ``get_document``: the daemon's
  own code paths), kept open. When no daemon runs at start-up, it is opened
  (model included) in the background at once, while the client connects.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import structlog

from indexer.cli.common import EXIT_OK, EXIT_USAGE, CliError
from indexer.cli.remote import RequestTooLarge
from indexer.runtime.config import Config
from indexer.runtime.logs import should_log

log = structlog.get_logger("indexer.mcp")

FORWARD_TIMEOUT_S = 30.0


class _IndexBackend:
    """``search``/``get`` over the index opened in this process, as the daemon answers them."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._searcher = None

    def searcher(self):
        with self._lock:
            if self._searcher is None:
                from indexer.search.searcher import Searcher

                started = time.perf_counter()
                searcher = Searcher.open(self.config)  # SearchError("no index at …") without one
                searcher.warm_up()
                self._searcher = searcher
                log.info("mcp.index_opened", index_dir=str(self.config.index.dir),
                         seconds=round(time.perf_counter() - started, 2))
            return self._searcher

    def state(self):
        return self.searcher().state

    def warm_in_background(self) -> None:
        def warm() -> None:
            try:
                self.searcher()
            except Exception as exc:  # no index yet, …: the first call says so
                log.info("mcp.index_not_opened", error=str(exc)[:300])

        threading.Thread(target=warm, name="mcp-warm-up", daemon=True).start()

    def search(self, request):
        return self.searcher().search(request)

    def get(self, persona: str, path: str, from_line: int, lines: int | None, session: str | None):
        from indexer.search.retrieval import get_document

        return get_document(self.config, persona, path, from_line=from_line, lines=lines, session=session,
                            state=self.state())

    def close(self) -> None:
        if self._searcher is not None:
            self._searcher.close()


class _DaemonGone(Exception):
    """The daemon did not answer (stopped, restarting): the call falls back to the index."""


class _DaemonDoor:
    """The tools answered by a running daemon's HTTP API (``/v1/memory_search``, ``/v1/memory_get``)."""

    name = "daemon"

    def __init__(self, base_url: str, state) -> None:
        import httpx2

        self.base_url = base_url
        self._httpx = httpx2
        # Plain HTTP on this machine: no TLS context to build, no proxy from the environment.
        self._client = httpx2.AsyncClient(base_url=base_url, timeout=FORWARD_TIMEOUT_S, verify=False,
                                          trust_env=False)
        self._state = state  # for the narrowed scopes' check, opened here on first use

    async def _call(self, tool: str, method: str, path: str, **kwargs: Any) -> dict:
        from indexer.service.mcp_tools import ToolFailure

        try:
            response = await self._client.request(method, path, **kwargs)
        except self._httpx.TransportError as exc:
            raise _DaemonGone(str(exc)) from None
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code == 200 and isinstance(body, dict):
            return body
        if response.status_code == 413:
            # The CLI's error for the same refusal: the call is answered from the index opened here.
            raise RequestTooLarge(str(body.get("error") if isinstance(body, dict) else response.status_code))
        message = body.get("error") if isinstance(body, dict) else None
        reason = "not_found" if response.status_code == 404 else ("unavailable" if response.status_code >= 500
                                                                   else "refused")
        raise ToolFailure(f"{tool}: {message or f'the daemon answered {response.status_code}'}", reason)

    async def search(self, request) -> dict:
        return await self._call("memory_search", "POST", "/v1/memory_search", json=request.model_dump(mode="json"))

    async def get(self, principal, path: str, from_line: int, lines: int | None) -> dict:
        import anyio.to_thread

        from indexer.service.mcp_tools import document_visible, not_found

        def visible() -> bool:  # on a worker thread: opening and reading SQLite blocks
            return document_visible(self._state(), principal, path)

        if principal.narrowed and not await anyio.to_thread.run_sync(visible):
            raise not_found(principal, path)
        body: dict[str, Any] = {"persona": principal.persona, "path": path, "from": from_line}
        if lines is not None:
            body["lines"] = lines
        if principal.session is not None:
            body["session"] = principal.session
        # A body, not a query string: a label has no cap, and a long one does not fit a request line.
        return await self._call("memory_get", "POST", "/v1/memory_get", json=body)

    async def aclose(self) -> None:
        await self._client.aclose()


def daemon_url(config: Config) -> str | None:
    """The running daemon's API, or None when no daemon holds this index (found as every CLI
    command finds it: :class:`indexer.cli.remote.DaemonApi`) or its API answers only bearer tokens
    (it listens off loopback; this server holds none): the index is then opened here."""
    from indexer.cli.remote import DaemonApi

    daemon = DaemonApi.running(config)
    return daemon.base if daemon is not None and not daemon.tokens_required else None


class StdioDoor:
    """Per call: the running daemon when there is one, else the index opened here."""

    def __init__(self, config: Config, index: _IndexBackend | None = None) -> None:
        from indexer.service.mcp_server import BackendDoor

        self.config = config
        self.index = index or _IndexBackend(config)
        self.local = BackendDoor(self.index, self.index.state, "local")
        self._daemon: _DaemonDoor | None = None
        self._state = None
        self._state_lock = threading.Lock()
        self.name = "local"

    def daemon_url(self) -> str | None:
        return daemon_url(self.config)

    def forwarder(self) -> _DaemonDoor | None:
        """The running daemon's door (made once per daemon address), None when no daemon runs."""
        url = self.daemon_url()
        if url is None:
            return None
        if self._daemon is None or self._daemon.base_url != url:
            self._daemon = _DaemonDoor(url, self._state_db)
        return self._daemon

    def _state_db(self):
        """The state DB read here when a daemon answers (the narrowed scopes of ``memory_get``)."""
        with self._state_lock:
            if self._state is None:
                from indexer.state.db import StateDB

                self._state = StateDB(self.config.state_db_path)
            return self._state

    async def _route(self, op: str, *args):
        daemon = self.forwarder()
        if daemon is not None:
            try:
                self.name = daemon.name
                return await getattr(daemon, op)(*args)
            except _DaemonGone as exc:
                if should_log("mcp.daemon_unreachable", 60.0):
                    log.warning("mcp.daemon_unreachable", url=daemon.base_url, error=str(exc)[:200],
                                fallback="index opened here")
            except RequestTooLarge as exc:
                log.info("mcp.answered_here", reason="request_too_large", error=str(exc)[:200])
        self.name = self.local.name
        return await getattr(self.local, op)(*args)

    async def search(self, request) -> dict:
        return await self._route("search", request)

    async def get(self, principal, path: str, from_line: int, lines: int | None) -> dict:
        return await self._route("get", principal, path, from_line, lines)

    def close(self) -> None:
        self.index.close()
        if self._state is not None:
            self._state.close()


def _check_persona_known(config: Config, persona: str) -> None:
    """A persona the local index does not hold would start a server that fails every call: refuse
    it now. One small file read (the live-table pointer); no check before the first sync, or when
    the index lives on object storage (the reader finds out at the first call)."""
    import json

    if config.index.object_store or "lancedb" not in config.index.sinks:
        return
    try:
        known = sorted(json.loads((config.lancedb_dir / "active.json").read_text(encoding="utf-8"))["personas"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    if known and persona not in known:
        raise CliError(f"mcp: unknown persona {persona!r}: the index holds {', '.join(map(repr, known))} "
                       "(names are case-sensitive)", EXIT_USAGE)


def run_mcp(config: Config, *, persona: str, session: str | None, scope: str) -> int:
    """Serve MCP on stdin/stdout until the client closes it."""
    from indexer.service.mcp_tools import McpPrincipal

    try:
        principal = McpPrincipal(persona=persona, session=session, max_scope=scope, name="stdio")
    except ValueError as exc:
        raise CliError(f"mcp: {exc}", EXIT_USAGE) from None
    _check_persona_known(config, persona)
    index = _IndexBackend(config)
    daemon = daemon_url(config)
    if daemon is None:
        index.warm_in_background()  # overlaps the SDK's import and the client's handshake
    from indexer.service.mcp_server import build_server
    from indexer.service.mcp_stdio import run_stdio

    door = StdioDoor(config, index)
    if daemon is not None:
        door.forwarder()  # its HTTP client is ready before the first call
    server = build_server(door, lambda: principal)
    log.info("mcp.stdio_started", persona=principal.persona, max_scope=principal.max_scope.value, daemon=daemon)
    try:
        run_stdio(server)  # the SDK's stdio transport, answering every line it cannot read
    finally:
        door.close()
    log.info("mcp.stdio_stopped", persona=principal.persona)
    return EXIT_OK
