"""Who may call ``memory_search`` and ``memory_get``: the trusted loopback mode, bearer tokens, and
the rule off loopback.

The API takes the same bearer tokens as ``/mcp`` (``[mcp] token_file``, read by
:func:`indexer.service.mcp_http.load_token_file`): a token is one
:class:`~indexer.service.mcp_tools.McpPrincipal`, a persona, optionally the
caller's session, and the widest scope.

- **A request with a token** is confined to it: the ``persona`` it names must be
  the token's, a ``session`` it names must be the token's (left out: the token's),
  a ``scope`` it names may only narrow the token's (left out: the token's widest).
  Anything else is refused (403, one line saying why). An unknown token: 401.
- **A request without a token** is trusted for persona and session (an agent
  runtime on the same machine), as before tokens existed, while the API listens
  on loopback (127.0.0.0/8, ``::1``, ``localhost``).
- **Off loopback** (any other address, a wildcard one included) search and get
  need a token (401 with ``WWW-Authenticate: Bearer``), and ``/v1/status`` and
  ``/metrics`` (every persona's names and figures) the admin token. Without a
  token file the server refuses to start (:func:`unprotected_bind`), unless
  ``[api] insecure_allow_unauthenticated`` is set: then off loopback works as on
  loopback, and a warning is logged at every start.

``/healthz``, ``/readyz``, ``/openapi.json`` and ``/docs`` stay open (probes,
no memory); admin routes keep their admin token. Tokens are compared in
constant time (:meth:`TokenTable.lookup`) and never logged.
"""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

from indexer.core.scopes import Scope
from indexer.runtime.logs import should_log
from indexer.search.searcher import SearchRequest
from indexer.service.api.errors import _Refused

if TYPE_CHECKING:  # imported at run time they would be a cycle: mcp_tools imports this package's models
    from indexer.service.mcp_http import TokenTable
    from indexer.service.mcp_tools import McpPrincipal

log = structlog.get_logger("indexer.api")

SEARCH_PATH = "/v1/memory_search"
GET_PATH = "/v1/memory_get"
CALLER_PATHS = frozenset({SEARCH_PATH, GET_PATH})
#: Every persona's names and figures: the admin token's off loopback.
OPERATOR_PATHS = frozenset({"/v1/status", "/metrics"})
OPT_OUT = "[api] insecure_allow_unauthenticated"
OPT_OUT_ENV = "LEDGER_INDEXER_API_INSECURE_ALLOW_UNAUTHENTICATED"
CHALLENGE = {"WWW-Authenticate": "Bearer"}
BAD_TOKEN = {"WWW-Authenticate": 'Bearer error="invalid_token"'}


def is_loopback(host: str) -> bool:
    """Whether ``host`` (``[api] host``) is a loopback address: 127.0.0.0/8, ``::1`` or ``localhost``.
    A wildcard (``0.0.0.0``, ``::``) or any other name is not."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def unprotected_bind(host: str, port: int, *, tokens: bool, opt_out: bool) -> str | None:
    """The start-up error (one line) for an API that would serve every persona's memory off
    loopback to anyone: None when it is on loopback, has tokens, or the opt-out is set."""
    if is_loopback(host) or tokens or opt_out:
        return None
    return (f"the API listens on {host}:{port}, off loopback, and [mcp] token_file is not set: anyone who can reach "
            "the port could read every persona's memory. Set [mcp] token_file (bearer tokens fixing persona, "
            "session and widest scope; README \"HTTP API\"), or bind [api] host = \"127.0.0.1\", or set "
            f"{OPT_OUT} = true ({OPT_OUT_ENV}=true) to serve it without tokens")


@dataclass(frozen=True, slots=True)
class ApiAccess:
    """The API's access rule: the token table (None: no token file) and whether search and get
    need a token (off loopback, without the opt-out)."""

    tokens: TokenTable | None = None
    tokens_required: bool = False

    @classmethod
    def for_bind(cls, host: str, port: int, tokens: TokenTable | None, *, opt_out: bool) -> ApiAccess:
        """The rule for an API bound to ``host``; :class:`UnprotectedBind` when it must not start.
        Logs ``api.insecure_unauthenticated`` (a warning) when the opt-out lets it start open."""
        problem = unprotected_bind(host, port, tokens=tokens is not None, opt_out=opt_out)
        if problem is not None:
            raise UnprotectedBind(problem)
        off_loopback = not is_loopback(host)
        if off_loopback and opt_out:
            log.warning("api.insecure_unauthenticated", host=host, port=port, setting=OPT_OUT,
                        tokens=len(tokens) if tokens is not None else 0,
                        hint="memory_search and memory_get answer any caller off loopback for any persona and "
                             "session; set [mcp] token_file and remove the setting")
        return cls(tokens, off_loopback and not opt_out)


class UnprotectedBind(ValueError):
    """The API would listen off loopback without tokens: ``str()`` is the one-line start-up error."""


@dataclass(frozen=True, slots=True)
class Refusal:
    status: int
    message: str
    headers: dict[str, str]


def _bearer(authorization: str | None) -> str | None:
    scheme, _, presented = (authorization or "").strip().partition(" ")
    presented = presented.strip()
    return presented if scheme.lower() == "bearer" and presented else None


def caller(access: ApiAccess, authorization: str | None) -> McpPrincipal | Refusal | None:
    """Who a search or get answers for: the token's principal, None for the trusted mode
    (no token, allowed), or the refusal (401). ``authorization``: the raw header.

    Without a token file a bearer header is ignored (as before tokens existed); with one, a
    presented token must be known: ignoring a mistyped one would widen the caller."""
    presented = _bearer(authorization)
    if presented is not None and access.tokens is not None:
        principal = access.tokens.lookup(presented)
        if principal is None:
            return Refusal(401, "unknown bearer token: use a token from [mcp] token_file", BAD_TOKEN)
        return principal
    if access.tokens_required:
        return Refusal(401, "a bearer token is required: this API listens off loopback; send "
                            "'Authorization: Bearer <token>' with a token from [mcp] token_file", CHALLENGE)
    return None


def operator_refusal(access: ApiAccess, admin_token: bytes | None, authorization: str | None) -> Refusal | None:
    """Off loopback (tokens required), ``/v1/status`` and ``/metrics`` need the admin token: they
    name every persona. None when allowed."""
    if not access.tokens_required:
        return None
    if admin_token is None:
        return Refusal(403, "off loopback /v1/status and /metrics need the admin token: set [api] admin_token_file",
                       {})
    presented = _bearer(authorization)
    if presented is None:
        return Refusal(401, "off loopback /v1/status and /metrics need the admin token: send "
                            "'Authorization: Bearer <admin token>'", CHALLENGE)
    # Header values arrive latin-1 decoded: re-encode to the bytes the client sent, compare in constant time.
    if not hmac.compare_digest(presented.encode("latin-1", errors="replace"), admin_token):
        return Refusal(401, "wrong admin token", BAD_TOKEN)
    return None


def log_refusal(route: str, refusal: Refusal) -> None:
    if should_log(f"api.auth_refused:{route}:{refusal.status}", 60.0):  # a client can repeat it at will
        log.info("api.auth_refused", route=route, status=refusal.status, reason=refusal.message)


def refused(route: str, refusal: Refusal) -> _Refused:
    log_refusal(route, refusal)
    return _Refused(refusal.status, refusal.message, refusal.headers or None)


# -- confinement ---------------------------------------------------------------------------------------


def _forbidden(route: str, principal: McpPrincipal, reason: str, message: str) -> _Refused:
    """403 with ``message``; the log gets the token's name and ``reason``, a short code (never what
    the request named: a session label can be a phone number)."""
    if should_log(f"api.token_confined:{route}:{reason}", 60.0):
        log.info("api.token_confined", route=route, token=principal.name, reason=reason)
    return _Refused(403, f"{message} (token {principal.name!r}: {principal.describe()})")


def _session(route: str, principal: McpPrincipal, asked: str | None) -> str | None:
    if asked is not None and asked != principal.session:
        mine = f"session {principal.session!r}" if principal.session is not None else "no session"
        raise _forbidden(route, principal, "other_session",
                         f"this token answers for {mine}, not session {asked!r}: give the token's session or none")
    return principal.session


def _persona(route: str, principal: McpPrincipal, asked: str) -> None:
    if asked != principal.persona:
        raise _forbidden(route, principal, "other_persona",
                         f"this token answers for persona {principal.persona!r} only, not {asked!r}")


def confine_search(body: Any, principal: McpPrincipal) -> SearchRequest:
    """The search a token may run for ``body`` (a ``SearchRequestBody``): its persona and session,
    the scope asked for when it is not wider than the token's (left out: the token's widest)."""
    _persona(SEARCH_PATH, principal, body.persona)
    given = body.model_fields_set
    session = _session(SEARCH_PATH, principal, body.session if "session" in given else None)
    if "scope" in given:
        from indexer.service.mcp_tools import ToolFailure

        try:
            scope = principal.scope_for(body.scope)
        except ToolFailure:
            raise _forbidden(SEARCH_PATH, principal, "scope_wider",
                             f"scope {Scope(body.scope).value!r} is wider than this token allows (at most "
                             f"{principal.max_scope.value!r})") from None
    else:
        scope = principal.max_scope
    return SearchRequest.model_validate({**dict(body), "persona": principal.persona, "session": session,
                                         "scope": scope})


def confine_get(principal: McpPrincipal, persona: str, session: str | None) -> tuple[str | None, Scope]:
    """The session and the widest scope a token's ``memory_get`` of ``persona`` is answered with."""
    _persona(GET_PATH, principal, persona)
    return _session(GET_PATH, principal, session), principal.max_scope


# -- before the body is read ---------------------------------------------------------------------------


async def _send_refusal(send: Any, refusal: Refusal) -> None:
    from indexer.service.api.middleware import _send_json

    await _send_json(send, refusal.status, {"error": refusal.message},
                     [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in refusal.headers.items()])


class CallerAuthMiddleware:
    """Refuses search and get without a needed token, or with an unknown one (401), and, off
    loopback, status and metrics without the admin token, before a body is read or parsed: an
    unauthenticated client gets 401, never a body-validation answer. The endpoints check again
    and confine the principal (:func:`caller`)."""

    def __init__(self, app: Any, access: ApiAccess, admin_token: bytes | None) -> None:
        self.app = app
        self.access = access
        self.admin_token = admin_token

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path in CALLER_PATHS or (path in OPERATOR_PATHS and self.access.tokens_required):
            header = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"authorization"), None)
            if path in CALLER_PATHS:
                found = caller(self.access, header)
                refusal = found if isinstance(found, Refusal) else None
            else:
                refusal = operator_refusal(self.access, self.admin_token, header)
            if refusal is not None:
                log_refusal(path, refusal)
                await _send_refusal(send, refusal)
                return
        await self.app(scope, receive, send)
