"""MCP over streamable HTTP on the daemon: ``/mcp``, one principal per bearer token.

The token file (``[mcp] token_file``) holds JSON lines, one token each::

    {"token": "…32+ random characters…", "persona": "atlas"}
    {"token": "…", "persona": "atlas", "session": "main", "max_scope": "project", "name": "atlas-laptop"}

``token`` (at least 16 characters, no whitespace) and ``persona`` are
required; ``session`` is the caller's session label (its private session
becomes visible, and the ``project``/``session`` scopes are relative to it);
``max_scope`` (``persona`` by default) the widest scope the token may search;
``name`` labels the token in logs (default ``line N``). Blank lines and lines
starting with ``#`` are skipped. The file is read once at start-up; a bad line
stops start-up with the file, the line and the reason (never the token).

No token file configured: ``/mcp`` answers 404 with a message (no access for
anyone). No token, or an unknown one: 401. Tokens are compared in constant
time and never logged. The MCP SDK is imported only when tokens are configured.

Stateless: each call is one POST and its answer. Any other method (a GET that
would open an event stream, a DELETE that would end a session) is answered 405
with ``Allow: POST``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from indexer.runtime.logs import should_log
from indexer.service.mcp_tools import McpPrincipal

log = structlog.get_logger("indexer.mcp")

MCP_PATH = "/mcp"
MIN_TOKEN_CHARS = 16
_KEYS = ("token", "persona", "session", "max_scope", "name")
STATELESS_NOTE = ("MCP here is stateless: each call is one POST and its answer; there is no stream to open and "
                  "no session to end")
DISABLED = ("MCP over HTTP is off on this daemon: set [mcp] token_file (see README \"MCP\"), or run "
            "`ledger-indexer mcp --persona P` over stdio")


class TokenFileError(ValueError):
    """The token file cannot be used; ``str()`` names the file, the line and the reason."""


@dataclass(frozen=True, slots=True)
class _Entry:
    digest: bytes  # sha256 of the token: fixed-length, constant-time comparisons
    principal: McpPrincipal


class TokenTable:
    """Bearer token → :class:`McpPrincipal`."""

    def __init__(self, entries: list[_Entry], path: Path) -> None:
        self._entries = tuple(entries)
        self.path = path

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, presented: str) -> McpPrincipal | None:
        digest = hashlib.sha256(presented.encode("utf-8", "surrogatepass")).digest()
        found = None
        for entry in self._entries:  # every entry, always: the time taken says nothing about the token
            if hmac.compare_digest(digest, entry.digest):
                found = entry.principal
        return found


def load_token_file(path: Path) -> TokenTable:
    """Parse the token file; :class:`TokenFileError` on the first bad line."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise TokenFileError(f"[mcp] token_file {path}: cannot read it ({reason})") from None
    entries: list[_Entry] = []
    seen: dict[bytes, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue

        def bad(reason: str, number: int = number) -> TokenFileError:
            return TokenFileError(f"[mcp] token_file {path} line {number}: {reason}")

        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise bad(f"not a JSON object ({exc.msg} at column {exc.colno})") from None
        if not isinstance(item, dict):
            raise bad('not a JSON object: expected {"token": …, "persona": …}')
        unknown = sorted(set(item) - set(_KEYS))
        if unknown:
            raise bad(f"unknown key(s) {', '.join(map(repr, unknown))} (keys: {', '.join(_KEYS)})")
        token = item.get("token")
        if not isinstance(token, str) or len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
            raise bad(f"'token' must be a string of at least {MIN_TOKEN_CHARS} characters without whitespace")
        for key in ("persona", "session", "max_scope", "name"):
            if key in item and not isinstance(item[key], str) and not (key == "session" and item[key] is None):
                raise bad(f"{key!r} must be a string")
        if "persona" not in item:
            raise bad("'persona' is required")
        try:
            principal = McpPrincipal(persona=item["persona"], session=item.get("session"),
                                     max_scope=item.get("max_scope") or "persona",
                                     name=item.get("name") or f"line {number}")
        except ValueError as exc:
            raise bad(str(exc)) from None
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        if digest in seen:
            raise bad(f"the same token as line {seen[digest]}: each token maps to one principal")
        seen[digest] = number
        entries.append(_Entry(digest, principal))
    return TokenTable(entries, path)


def load_configured_tokens(token_file: Path | None) -> TokenTable | None:
    """The configured token table, or None when ``[mcp] token_file`` is not set. The same table
    answers ``/mcp`` and the API's search and get (:mod:`indexer.service.api.auth`)."""
    if token_file is None:
        return None
    table = load_token_file(token_file)
    if not len(table):
        log.warning("mcp.no_tokens", file=str(token_file),
                    hint="every /mcp request and every bearer token on the API is refused (401)")
    return table


class _Verifier:
    """The SDK's ``TokenVerifier``: a known token becomes an access token carrying its principal."""

    def __init__(self, table: TokenTable) -> None:
        self.table = table

    async def verify_token(self, token: str):
        principal = self.table.lookup(token)
        if principal is None:
            if should_log("mcp.auth_refused", 60.0):
                log.info("mcp.auth_refused", reason="unknown bearer token")
            return None
        # The token itself is not kept: the SDK's record carries the name instead.
        return _principal_token()(token=principal.name, client_id=principal.name, scopes=[], principal=principal)


@functools.cache
def _principal_token():
    from mcp.server.auth.provider import AccessToken
    from pydantic import ConfigDict

    class PrincipalToken(AccessToken):
        model_config = ConfigDict(arbitrary_types_allowed=True)
        principal: McpPrincipal

    return PrincipalToken


def _token_principal() -> McpPrincipal | None:
    from mcp.server.auth.middleware.auth_context import get_access_token

    return getattr(get_access_token(), "principal", None)


def _transport_security(host: str):
    """Host/Origin checks against DNS rebinding: the loopback names and the bind host; none for a
    wildcard bind (every request still needs a bearer token)."""
    from mcp.server.transport_security import TransportSecuritySettings

    if host in ("0.0.0.0", "::", ""):
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    names = ["127.0.0.1", "localhost", "[::1]"]
    bound = f"[{host}]" if ":" in host else host
    if bound not in names:
        names.append(bound)
    return TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                     allowed_hosts=[f"{n}:*" for n in names] + names,
                                     allowed_origins=[f"http://{n}:*" for n in names] + [f"http://{n}" for n in names])


async def _disabled(request) -> Any:
    from starlette.responses import JSONResponse

    return JSONResponse({"error": DISABLED}, status_code=404)


class _PostOnly:
    """The SDK's stateless streamable-HTTP app for POST; every other method is answered 405 with
    ``Allow: POST``. Stateless MCP sends nothing unasked and keeps no session: the SDK would
    answer a GET with an event stream that never carries a message nor ends (the spec's answer
    for a server without that stream is 405), and a DELETE with 405 without ``Allow``. The MCP
    SDK has no option for this (mcp 2.3: ``streamable_http_app`` takes none). An ASGI class, not
    a function: Starlette's ``Route`` calls a function endpoint with a request."""

    def __init__(self, asgi: Callable) -> None:
        self.asgi = asgi

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http" or scope["method"] == "POST":
            await self.asgi(scope, receive, send)
            return
        from starlette.responses import JSONResponse

        message = f"method {scope['method']} not allowed here; allowed: POST ({STATELESS_NOTE})"
        await JSONResponse({"error": message}, status_code=405, headers={"Allow": "POST"})(scope, receive, send)


def mount_mcp(app, backend, state: Callable[[], Any], tokens: TokenTable | None, *, host: str) -> bool:
    """Serve MCP at ``/mcp`` on the daemon's FastAPI ``app`` (after its routes), answered by
    ``backend`` (an ``ApiBackend``: the daemon) with ``state()`` for the narrowed scopes.

    Returns True when MCP is served: the app's lifespan must then run (it runs the SDK's
    session manager; ``ApiServer(..., lifespan="on")``). With ``tokens`` None, ``/mcp`` answers
    404 with :data:`DISABLED` and nothing else changes."""
    from starlette.routing import Route

    if tokens is None:
        app.router.routes.append(Route(MCP_PATH, _disabled, methods=["GET", "POST", "DELETE"],
                                       include_in_schema=False))
        return False
    from mcp.server.auth.settings import AuthSettings

    from indexer.service.mcp_server import BackendDoor, build_server

    server = build_server(BackendDoor(backend, state, "daemon"), _token_principal, token_verifier=_Verifier(tokens),
                          # Only the resource-server half is used: static bearer tokens, no OAuth routes.
                          auth=AuthSettings(issuer_url="https://auth.invalid", resource_server_url=None))
    asgi = server.streamable_http_app(streamable_http_path=MCP_PATH, stateless_http=True, json_response=True,
                                      transport_security=_transport_security(host))
    # Stateless: no stream for a GET to open, no session for a DELETE to end (see _PostOnly).
    app.router.routes.append(Route(MCP_PATH, _PostOnly(asgi), include_in_schema=False))
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(a):
        async with server.session_manager.run():
            async with inner(a) as state_:
                yield state_

    app.router.lifespan_context = lifespan
    log.info("mcp.http_enabled", path=MCP_PATH, tokens=len(tokens))
    return True
