"""Pure ASGI middleware: body limit, admin bearer check, request log and metrics."""

from __future__ import annotations

import hmac
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog
from starlette.requests import ClientDisconnect
from starlette.routing import Match

from indexer.runtime.logs import should_log
from indexer.service.api.models import ADMIN_DISABLED
from indexer.service.metrics import CLIENT_CLOSED_REQUEST, Metrics

log = structlog.get_logger("indexer.api")


async def _send_json(send: Callable, status: int, payload: dict, headers: list | None = None) -> None:
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


class BodyLimitMiddleware:
    """413 for request bodies over ``max_bytes``: checks Content-Length up front and counts the bytes
    actually received (chunked uploads, lying headers). The body is buffered (it is small by
    construction) and replayed to the app, so the app never sees a partial body."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self) -> dict:
        return {"error": f"request body too large: the limit is {self.max_bytes} bytes"}

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                text = value.decode("latin-1").strip()
                if not text.isdigit():
                    await _send_json(send, 400, {"error": "invalid Content-Length header"})
                    return
                if int(text) > self.max_bytes:
                    await _send_json(send, 413, self._too_large(), [(b"connection", b"close")])
                    return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left; nobody to answer (RequestLogMiddleware counts a 499)
            if message["type"] != "http.request":
                continue
            chunk = message.get("body", b"") or b""
            size += len(chunk)
            if size > self.max_bytes:
                await _send_json(send, 413, self._too_large(), [(b"connection", b"close")])
                return
            if chunk:
                chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


ADMIN_PREFIX = "/v1/admin"


def admin_refusal(token: bytes | None, authorization: str | None) -> tuple[int, str, dict[str, str]] | None:
    """None when ``authorization`` (the raw header) carries the admin token, else (status, error, headers)."""
    if token is None:
        return 403, ADMIN_DISABLED, {}
    scheme, _, presented = (authorization or "").strip().partition(" ")
    presented = presented.strip()
    if scheme.lower() != "bearer" or not presented:
        return 401, "admin token required: send 'Authorization: Bearer <token>'", {"WWW-Authenticate": "Bearer"}
    # Header values arrive latin-1 decoded: re-encode to the bytes the client sent, compare in constant time.
    if not hmac.compare_digest(presented.encode("latin-1", errors="replace"), token):
        return 401, "wrong admin token", {"WWW-Authenticate": 'Bearer error="invalid_token"'}
    return None


def allowed_host_names(bind_host: str) -> frozenset[str] | None:
    """The Host header names a request may carry for a daemon bound to ``bind_host``: the loopback
    names and the bind host itself. None for a wildcard bind (any name can reach it: put a
    firewall or a proxy in front, see README "HTTP API")."""
    if bind_host in ("0.0.0.0", "::", ""):
        return None
    names = {"127.0.0.1", "localhost", "::1", bind_host.strip("[]").lower()}
    return frozenset(names)


def _host_name(value: str) -> str:
    value = value.strip().lower()
    if value.startswith("["):  # [::1]:8765
        return value[1:value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class HostCheckMiddleware:
    """Refuses a request whose Host header names another machine (421): a web page that rebinds its
    own name to 127.0.0.1 must not reach the memory of every session through the browser (DNS
    rebinding; MCP at /mcp has the same check from its SDK)."""

    def __init__(self, app: Any, allowed: frozenset[str] | None) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if self.allowed is not None and scope["type"] == "http":
            header = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"host"), "")
            if _host_name(header) not in self.allowed:
                await _send_json(send, 421, {"error": f"this daemon answers requests for "
                                                      f"{', '.join(sorted(self.allowed))} only (Host header "
                                                      "refused: a guard against DNS rebinding)"}, [])
                return
        await self.app(scope, receive, send)


class AdminAuthMiddleware:
    """Refuses admin calls without the right bearer token before their body is read or parsed, so an
    unauthenticated client gets 401/403 — never a body-validation answer, never a 64 kB buffer."""

    def __init__(self, app: Any, token: bytes | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path == ADMIN_PREFIX or path.startswith(ADMIN_PREFIX + "/"):
            header = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"authorization"), None)
            refusal = admin_refusal(self.token, header)
            if refusal is not None:
                status, message, headers = refusal
                await _send_json(send, status, {"error": message},
                                 [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()])
                return
        await self.app(scope, receive, send)


class RequestLogMiddleware:
    """Counts every request in ``ledger_indexer_http_requests_total{route,status}`` and logs it at
    debug: method, route template (never the raw path or query string), status, duration.
    ``router``: the app's router, whose routes name the mounts and plain routes (see
    :func:`_route_label`).

    A client that leaves before any answer (it sent headers and part of a body, then closed) is
    counted as status 499, "client closed request" as nginx counts it, under the route it was
    sent to, and logged as ``http.client_disconnected``: it is the client's doing, and a 5xx
    alert must not fire on a flaky client. 500 stays for an app that failed to answer."""

    def __init__(self, app: Any, metrics: Metrics, router: Any = None) -> None:
        self.app = app
        self.metrics = metrics
        self.router = router

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        seen = _Exchange()

        async def receive_wrapper() -> dict:
            message = await receive()
            if message["type"] == "http.disconnect":
                seen.client_left = True
            elif message["type"] == "http.request":
                seen.body_bytes += len(message.get("body", b"") or b"")
            return message

        async def send_wrapper(message: dict) -> None:
            if message["type"] == "http.response.start":
                seen.status = int(message["status"])
            await send(message)

        failure: BaseException | None = None
        try:
            await self.app(scope, receive_wrapper, send_wrapper)
        except BaseException as exc:
            failure = exc
            raise
        finally:
            self._record(scope, seen, failure, time.perf_counter() - started)

    def _record(self, scope: dict, seen: _Exchange, failure: BaseException | None, seconds: float) -> None:
        routes = getattr(self.router, "routes", ())
        duration_ms = round(seconds * 1000, 2)
        if seen.status is None and seen.client_left and (failure is None or isinstance(failure, ClientDisconnect)):
            route = _route_label(scope, routes)
            if route == UNMATCHED:  # routing never ran (the body was still being read): match it here
                route = _matching_route(scope, routes)
            self.metrics.observe_request(route, CLIENT_CLOSED_REQUEST)
            if should_log(f"http.client_disconnected:{route}", 10.0):  # a client can repeat it at will
                log.info("http.client_disconnected", method=scope.get("method"), route=route,
                         status=CLIENT_CLOSED_REQUEST, received_bytes=seen.body_bytes,
                         content_length=_declared_length(scope), duration_ms=duration_ms)
            return
        status = seen.status if seen.status is not None else 500  # the app raised before it answered
        route = _route_label(scope, routes)
        self.metrics.observe_request(route, status)
        log.debug("api.request", method=scope.get("method"), route=route, status=status, duration_ms=duration_ms)


@dataclass(slots=True)
class _Exchange:
    """What one request's client and app did, as the request log saw it."""

    status: int | None = None  # of the answer, once the app started one
    client_left: bool = False  # an http.disconnect was received
    body_bytes: int = 0


def _declared_length(scope: dict) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isdigit() else None
    return None


UNMATCHED = "unmatched"


def _route_label(scope: dict, routes: Sequence[Any] = ()) -> str:
    """A label from a bounded set, never the raw path of a request.

    An API route's template (``/v1/memory_get``); a mount's prefix for every path under it, found
    or not (``/docs/assets``: one label, however many file names a client tries); a plain route's
    path (``/openapi.json``, ``/mcp``: they take no parameters). Anything else — no route matched,
    or a middleware answered before routing — is :data:`UNMATCHED`."""
    template = getattr(scope.get("route"), "path", None)
    if template:
        return template
    endpoint = scope.get("endpoint")
    if endpoint is None:
        return UNMATCHED
    for route in routes:  # the endpoint a mount or a plain route put in the scope names that route
        if endpoint is getattr(route, "app", None) or endpoint is getattr(route, "endpoint", None):
            return route.path
    return UNMATCHED


def _matching_route(scope: dict, routes: Sequence[Any]) -> str:
    """The label of the route ``scope``'s path and method lead to, for a request routing never saw;
    a route whose path matches but not its method is next best. Still a bounded set: route paths."""
    partial = None
    for route in routes:
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return route.path
        if match is Match.PARTIAL and partial is None:
            partial = route.path
    return partial or UNMATCHED
