"""Serving the app from the daemon: uvicorn in a background thread."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import structlog

log = structlog.get_logger("indexer.api")


def listening_socket(host: str, port: int, backlog: int = 128) -> socket.socket:
    """A TCP listening socket created with ``proto=IPPROTO_TCP``. asyncio sets TCP_NODELAY on a
    connection only when its socket says IPPROTO_TCP, and accepted sockets inherit the
    listener's proto: ``socket.create_server`` leaves it 0, so every response (headers, then
    body: two writes) waited for the client's delayed ACK — 40 ms on every request."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock


class ApiServer:
    """uvicorn in a background thread of the daemon.

    ::

        server = ApiServer(create_app(daemon, admin_token=token, metrics=metrics),
                           config.api.host, config.api.port)
        server.start()        # raises OSError now if the port is taken
        ...
        server.stop()         # on SIGTERM, before closing the index

    The socket is bound in the caller's thread, so "address already in use" is an
    ``OSError`` at start-up (not a ``sys.exit`` inside uvicorn's thread). uvicorn
    runs with ``log_config=None`` (its records go through configure_logging's
    handler), ``access_log=False`` (its access lines would carry query strings;
    RequestLogMiddleware logs route templates at debug instead), no lifespan
    unless ``lifespan="on"`` (the MCP endpoint needs it: its session manager runs
    in the app's lifespan, ``indexer.service.mcp_http``), and no signal handlers
    (it is not the main thread; the daemon owns SIGTERM).
    """

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 8765, *,
                 graceful_shutdown_s: int = 5, lifespan: str = "off") -> None:
        import uvicorn

        if lifespan not in ("on", "off"):
            raise ValueError("lifespan must be 'on' or 'off'")
        self.host = host
        self.requested_port = port
        self._config = uvicorn.Config(app, log_config=None, access_log=False, lifespan=lifespan,
                                      server_header=False, timeout_graceful_shutdown=graceful_shutdown_s,
                                      timeout_keep_alive=5)
        self._server = uvicorn.Server(self._config)
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self._error: BaseException | None = None
        self._port: int | None = None

    @property
    def port(self) -> int:
        """The bound port (useful with ``port=0``)."""
        if self._port is None:
            raise RuntimeError("ApiServer is not started")
        return self._port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout: float = 10.0) -> None:
        try:
            self._socket = listening_socket(self.host, self.requested_port)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot listen on {self.host}:{self.requested_port} ({exc.strerror}): "
                                     "set [api] port, or stop the process using it") from None
        self._port = self._socket.getsockname()[1]
        self._thread = threading.Thread(target=self._run, name="api-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError(f"the API server stopped during start-up: {self._error!r}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"the API server did not start within {timeout} s")
            time.sleep(0.01)
        log.info("api.listening", url=self.url)

    def _run(self) -> None:
        try:
            self._server.run(sockets=[self._socket])
        except BaseException as exc:  # SystemExit from uvicorn included: report it, never kill the daemon
            self._error = exc
            log.error("api.server_failed", error_type=type(exc).__name__, error=str(exc)[:500])

    def request_stop(self) -> None:
        """Begin shutting down without waiting (the daemon stops its worker meanwhile)."""
        self._server.should_exit = True

    def stop(self, timeout: float = 10.0) -> None:
        """Stop accepting, let in-flight requests finish (up to graceful_shutdown_s), join the thread."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                self._server.force_exit = True
                self._thread.join(2.0)
        if self._socket is not None:
            try:
                self._socket.close()
            except OSError:
                pass

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and self._server.started

