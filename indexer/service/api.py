"""The HTTP API: ``memory_search``, ``memory_get``, status, health, metrics, admin.

``create_app(backend, admin_token=…)`` builds a FastAPI app over an
:class:`ApiBackend` (the daemon implements it; tests use a fake). The app
holds no index state of its own: every answer comes from the backend.

Contract for clients (ARCHITECTURE.md "Search and scopes", "Runtime"):

- every error body is ``{"error": "<one line saying what to fix>"}``;
  validation errors add ``"details": [{"field", "message", "type"}]`` (422);
- 400 malformed JSON, 413 body over ``max_request_bytes``, 415 body not JSON,
  422 invalid fields (or a search the scope rules refuse), 404 unknown
  document/session/job, 401/403 admin auth, 503 index not available (retry;
  ``Retry-After`` is set). Nothing a client sends produces a 5xx: a 5xx means
  the backend failed (503) or a bug (500, never with a stack trace);
- admin endpoints need ``Authorization: Bearer <token>`` (the
  ``[api] admin_token_file`` contents); without a configured token they are
  refused with 403.

Endpoints are plain ``def`` functions: FastAPI runs them in its threadpool,
so the backend's blocking calls (LanceDB, SQLite, ONNX) never stall the event
loop. Query text is never logged; requests are logged at debug level with
method, route template, status and duration only.
"""

from __future__ import annotations

import hmac
import json
import socket
import threading
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal, Protocol, TypeVar, runtime_checkable

import structlog
from fastapi import Body, FastAPI, Path, Query, Request, Security
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, ValidationInfo,
                      field_validator)
from pydantic_core import PydanticCustomError
from starlette.exceptions import HTTPException
from starlette.routing import Match

from indexer.runtime.logs import should_log
from indexer.service.metrics import CONTENT_TYPE, Metrics
from indexer.search.retrieval import DocumentNotFound, GetResult
from indexer.core.scopes import Scope
from indexer.search.searcher import MAX_QUERY_CHARS, Mode, SearchError, SearchRequest, SearchResponse

__all__ = ["ApiBackend", "ApiError", "ApiServer", "create_app", "API_VERSION", "DEFAULT_MAX_REQUEST_BYTES"]

log = structlog.get_logger("indexer.api")

API_VERSION = "1.0.0"
DEFAULT_MAX_REQUEST_BYTES = 64_000
RETRY_AFTER_SECONDS = 5
ADMIN_DISABLED = "admin calls are disabled: set [api] admin_token_file"
MAX_LABELS = 1000
UNAVAILABLE = "index unavailable, retry"
MAX_ERROR_DETAILS = 20


# -- the backend the daemon implements ------------------------------------------------------


class ApiError(Exception):
    """A request the backend refuses for a reason the client can fix (or look up).

    Raise it from any :class:`ApiBackend` method: ``status`` becomes the HTTP
    status (422 by default; 404 for something that does not exist, e.g. an
    unknown persona in a reindex request; 409, 503 also make sense) and
    ``message`` the ``error`` text.
    """

    def __init__(self, message: str, status: int = 422):
        super().__init__(message)
        self.status = status


@runtime_checkable
class ApiBackend(Protocol):
    """What the API needs from the daemon. All methods are synchronous and may block.

    Errors: raise :class:`indexer.search.SearchError` (its ``http_status`` is
    used), :class:`ApiError` (its ``status``) or ``DocumentNotFound`` (404).
    Any other exception is answered 503 "index unavailable, retry" and logged
    as ``api.backend_error``.
    """

    def search(self, request: SearchRequest) -> SearchResponse:
        """``memory_search``; SearchError(http_status=422) for scope/usage errors, 503 when no index."""
        ...

    def get(self, persona: str, path: str, from_line: int, lines: int | None, session: str | None) -> GetResult:
        """``memory_get``; DocumentNotFound when absent *or not visible to ``session``*."""
        ...

    def status(self) -> dict:
        """JSON-able; ``{"personas": {persona: {cursor, ledger_head, lag, documents, chunks, last_sync_at,
        last_sync_seconds, bad_rows_skipped, model, index_meta}}, ...}``."""
        ...

    def is_ready(self) -> bool:
        """Index open and first sync done."""
        ...

    def request_reindex(self, personas: list[str] | None) -> dict:
        """Start a reindex (None: every persona), or return the job already running:
        ``{"job_id", "state": "queued|running|done|failed", "personas", "progress": {persona: {"done",
        "total"}}, "error"}`` (extra keys such as ``started_at`` are passed through)."""
        ...

    def reindex_status(self) -> dict | None:
        """The running or last job (same shape as ``request_reindex``), None when there was none."""
        ...

    def project_add(self, name: str, labels: list[str]) -> dict:
        """``{"project": name, "sessions": [members after the change], "unknown": [labels not indexed
        yet]}`` (``unknown`` optional; extra keys are passed through)."""
        ...

    def project_remove(self, name: str, labels: list[str]) -> dict:
        """``{"project": name, "sessions": [members after the change], "removed": n}`` (``removed``
        optional; extra keys are passed through)."""
        ...

    def projects(self) -> dict[str, list[str]]:
        """Every project and its session labels."""
        ...

    def set_visibility(self, label: str, visibility: str) -> bool:
        """``visibility`` is "private" or "shared"; False when the session is unknown."""
        ...


# -- request and response models (they make /openapi.json precise) -------------------------

_NO_NUL = r"^[^\x00]*$"


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


def _json_int(value: Any) -> Any:
    if isinstance(value, (bool, str)):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value


def _text(max_length: int) -> Any:
    return Field(min_length=1, max_length=max_length, json_schema_extra={"pattern": _NO_NUL})


Persona = Annotated[str, _text(256), AfterValidator(_no_nul)]
Label = Annotated[str, _text(1024), AfterValidator(_no_nul)]
ProjectName = Annotated[str, Path(min_length=1, max_length=256, json_schema_extra={"pattern": _NO_NUL},
                                  description="Project name."), AfterValidator(_no_nul)]
DocPath = Annotated[str, _text(4096), AfterValidator(_no_nul)]


class SearchRequestBody(SearchRequest):
    """:class:`indexer.search.SearchRequest` as the HTTP body, checked strictly.

    Same fields, defaults and validators, but without pydantic's lax coercions
    (``"6"`` or ``6.0`` for ``max_results``, ``false`` for ``min_score`` are
    refused, not silently converted), no NUL in ``persona``/``session``, and
    the query rule (a non-blank character, no NUL) written into the schema so
    that /openapi.json states what the server enforces. The endpoint hands the
    backend a plain ``SearchRequest`` built from it.
    """

    model_config = ConfigDict(strict=True, title="SearchRequest", json_schema_extra={
        # The session and project scopes need the caller's session (indexer.scopes.resolve).
        "if": {"properties": {"scope": {"enum": [Scope.SESSION.value, Scope.PROJECT.value]}}, "required": ["scope"]},
        "then": {"properties": {"session": {"type": "string", "minLength": 1}}, "required": ["session"]},
    })

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS,
                       description="Free text: at least one non-blank character, no NUL.",
                       json_schema_extra={"pattern": r"^[^\x00]*[^\s\x00][^\x00]*$"})
    persona: Persona = Field(description="The ledger's persona_id.")
    session: Annotated[str, Field(max_length=1024, json_schema_extra={"pattern": _NO_NUL}),
                       AfterValidator(_no_nul)] | None = Field(
        None, description="The caller's session label (needed by the session and project scopes).")
    scope: Annotated[Scope, Field(strict=False)] = Scope.PERSONA  # strict enums would refuse their JSON strings
    # JSON Schema's "integer" includes 18.0; lax int takes it (and refuses 18.5), _json_int refuses "18" and true.
    max_results: Annotated[int, Field(ge=1, le=100, strict=False), BeforeValidator(_json_int)] = 6
    mode: Annotated[Mode, Field(strict=False)] = Mode.HYBRID

    @field_validator("scope")
    @classmethod
    def _scope_needs_session(cls, value: Scope, info: ValidationInfo) -> Scope:
        if value in (Scope.SESSION, Scope.PROJECT) and "session" in info.data and not info.data["session"]:
            raise ValueError(f"scope '{value.value}' needs the caller's session label in 'session'")
        return value

    def plain(self) -> SearchRequest:
        return SearchRequest.model_validate(dict(self))


class ErrorDetail(BaseModel):
    field: str = Field(description="Where the problem is: a body key (dotted for nested ones) or a parameter.")
    message: str
    type: str


class ErrorBody(BaseModel):
    error: str = Field(description="What went wrong and what to do about it.")
    details: list[ErrorDetail] | None = Field(None, description="One entry per invalid field (422 only).")


class SearchResultModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str
    source: Literal["sessions", "memory"]
    persona: str
    session: str | None = Field(description="The ledger's session label; null for the memory source.")
    turn_id: str | None
    kind: Literal["turn", "compaction", "memory"]
    start_line: int
    end_line: int
    score: float = Field(ge=0.0, le=1.0, allow_inf_nan=False, description="0..1, higher is better.")
    snippet: str
    timestamp: str | None = Field(description="ISO-8601, when known.")


class SearchWarningModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str
    message: str


class SearchResponseModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    results: list[SearchResultModel]
    mode: Literal["hybrid", "vector", "keyword"]
    model: str
    took_ms: float = Field(ge=0.0, allow_inf_nan=False)
    warnings: list[SearchWarningModel] = Field(default_factory=list, description=(
        "Present parts of the answer that are missing: e.g. `fts_unavailable` when the full-text stage "
        "failed and the results come from the vector stage only. Empty when the answer is complete."))


class GetResponseModel(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    persona: str
    path: str
    from_line: int = Field(alias="from", ge=1)
    lines: int = Field(ge=0, description="Lines returned.")
    total_lines: int = Field(ge=0)
    text: str


class ReindexProgress(BaseModel):
    model_config = ConfigDict(extra="allow")

    done: int = Field(ge=0)
    total: int | None = Field(None, ge=0)


class ReindexJob(BaseModel):
    model_config = ConfigDict(extra="allow")

    job_id: str
    state: Literal["queued", "running", "done", "failed"]
    personas: list[str] | None = Field(None, description="null: every persona.")
    progress: dict[str, ReindexProgress] = Field(default_factory=dict)
    error: str | None = None


class ReindexRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    personas: list[Persona] | None = Field(None, min_length=1, max_length=MAX_LABELS,
                                           description="Personas to reindex; null or absent: every persona.")


class LabelsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    labels: list[Label] = Field(min_length=1, max_length=MAX_LABELS, description="Session labels, verbatim.")


class ProjectChange(BaseModel):
    model_config = ConfigDict(extra="allow")

    project: str
    sessions: list[str] = Field(description="The project's session labels after the change.")


class ProjectList(BaseModel):
    projects: dict[str, list[str]]


class VisibilityRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    label: Label
    visibility: Literal["private", "shared"]


class VisibilityResponse(BaseModel):
    label: str
    visibility: Literal["private", "shared"]


class PersonaStatus(BaseModel):
    """One persona in ``GET /v1/status``; every key optional, extra keys passed through."""

    model_config = ConfigDict(extra="allow")

    cursor: int | None = Field(None, description="Last session_history.id processed.")
    ledger_head: int | None = Field(None, description="Highest session_history.id in the ledger.")
    lag: int | None = Field(None, description="ledger_head - cursor.")
    documents: int | None = None
    chunks: int | None = None
    last_sync_at: float | str | None = Field(None, description="Time of the last sync batch (Unix seconds or "
                                                               "ISO-8601).")
    last_sync_seconds: float | None = None
    bad_rows_skipped: int | None = None
    model: str | None = Field(None, description="Embedding model.")
    index_meta: dict[str, Any] | None = None


class StatusReport(BaseModel):
    model_config = ConfigDict(extra="allow")

    personas: dict[str, PersonaStatus]


class StatusText(BaseModel):
    status: str


_M = TypeVar("_M", bound=BaseModel)

_ERROR_TEXT = {
    400: "Malformed request (e.g. the body is not valid JSON).",
    401: "Missing or wrong admin bearer token.",
    403: "Admin calls are disabled (no [api] admin_token_file).",
    404: "Not found.",
    413: "Request body larger than the configured limit.",
    415: "The request body must be JSON (Content-Type: application/json).",
    422: "Invalid request: `details` names each invalid field.",
    503: "Index unavailable (starting, reindex swap, or a backend failure): retry later.",
}


def _errors(*codes: int, **texts: str) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": ErrorBody, "description": texts.get(f"e{code}", _ERROR_TEXT[code])} for code in codes}


_BODY_ERRORS = (400, 413, 415, 422)


# -- errors -------------------------------------------------------------------------------


def _error(status: int, message: str, headers: dict[str, str] | None = None, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": message, **extra}, status_code=status, headers=headers)


def _field_name(loc: tuple | list) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "query", "path", "header", "cookie") and len(parts) > 1:
        parts = parts[1:]
    return ".".join(parts) or "body"


def _media_is_json(content_type: str | None) -> bool:
    if not content_type:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def _validation_response(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = list(exc.errors())
    first = errors[0] if errors else {"loc": ("body",), "msg": "invalid request", "type": "value_error"}
    if first.get("type") == "json_invalid":
        reason = (first.get("ctx") or {}).get("error") or "JSON decode error"
        pos = first["loc"][1] if len(first.get("loc", ())) > 1 else None
        where = f" at character {pos}" if isinstance(pos, int) else ""
        return _error(400, f"request body is not valid JSON: {reason}{where}")
    body_level = [e for e in errors if tuple(e.get("loc", ()))[:1] == ("body",) and len(e.get("loc", ())) == 1]
    if body_level:
        if body_level[0].get("type") == "missing":
            return _error(422, "request body is required: send a JSON object",
                          details=[{"field": "body", "message": "Field required", "type": "missing"}])
        if isinstance(exc.body, (bytes, bytearray)) and not _media_is_json(request.headers.get("content-type")):
            return _error(415, "the request body must be JSON: send it with Content-Type: application/json")
    details = [{"field": _field_name(e.get("loc", ())),
                "message": str(e.get("msg", "invalid")).removeprefix("Value error, "),
                "type": str(e.get("type", "value_error"))} for e in errors[:MAX_ERROR_DETAILS]]
    head = details[0] if details else {"field": "body", "message": "invalid request"}
    message = f"invalid request: {head['field']}: {head['message']}"
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more)"
    return _error(422, message, details=details)


class _Refused(Exception):
    """An answer decided while calling the backend (status + message)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None,
                 details: list[dict[str, str]] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers
        self.details = details


def _unavailable(message: str) -> _Refused:
    return _Refused(503, message, {"Retry-After": str(RETRY_AFTER_SECONDS)})


def _call(route: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Call the backend; turn its errors into HTTP answers (never a traceback to the client)."""
    try:
        return fn(*args)
    except DocumentNotFound as exc:
        raise _Refused(404, str(exc) or "document not found") from None
    except SearchError as exc:
        status = exc.http_status if 400 <= exc.http_status < 600 else 503
        if status >= 500:
            if should_log(f"api.unavailable:{route}", 30.0):
                log.warning("api.unavailable", route=route, error=str(exc))
            raise _unavailable(str(exc) or UNAVAILABLE) from None
        raise _Refused(status, str(exc)) from None
    except ApiError as exc:
        status = exc.status if 400 <= exc.status < 600 else 503
        if status >= 500:
            raise _unavailable(str(exc) or UNAVAILABLE) from None
        raise _Refused(status, str(exc)) from None
    except Exception as exc:
        log.error("api.backend_error", route=route, error_type=type(exc).__name__, error=str(exc)[:500],
                  exc_info=True)
        raise _unavailable(UNAVAILABLE) from None


def _conform(route: str, model: type[_M], data: Any) -> _M:
    """Check what the backend returned against the documented response model."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        log.error("api.contract_error", route=route, model=model.__name__,
                  errors=[f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_input=False)])
        raise _Refused(500, "internal error: the backend's answer did not match the API contract "
                            "(see the daemon log)") from None


def _json(model: BaseModel, status: int = 200, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(model.model_dump(mode="json", by_alias=True), status_code=status, headers=headers)


# -- pure ASGI middleware --------------------------------------------------------------------


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
                return  # the client left; nobody to answer
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
    """Counts every answer in ``ledger_indexer_http_requests_total{route,status}`` and logs it at
    debug: method, route template (never the raw path or query string), status, duration."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # if the app raises before it starts a response

        async def send_wrapper(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = _route_label(scope)
            self.metrics.observe_request(route, status)
            log.debug("api.request", method=scope.get("method"), route=route, status=status,
                      duration_ms=round((time.perf_counter() - started) * 1000, 2))


def _route_label(scope: dict) -> str:
    """The route template (bounded label set), never the raw path of an unmatched request."""
    route = getattr(scope.get("route"), "path", None)
    if route:
        return route
    if scope.get("endpoint") is not None:  # plain Starlette routes (/openapi.json, /docs): no parameters
        return scope.get("path", "unmatched")
    return "unmatched"


# -- the app ---------------------------------------------------------------------------------


def create_app(backend: ApiBackend, *, admin_token: str | None, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
               metrics: Metrics | None = None) -> FastAPI:
    """The API over ``backend``. ``admin_token``: the bearer token for admin calls (None or empty:
    admin calls are refused with 403; surrounding whitespace, e.g. a token file's newline, is
    ignored). ``metrics``: shared with the daemon so /metrics shows sync and query series
    together (a fresh :class:`Metrics` when None). The app is exposed as ``app.state.metrics``."""
    if max_request_bytes < 1:
        raise ValueError("max_request_bytes must be positive")
    metrics = metrics if metrics is not None else Metrics()
    token = (admin_token or "").strip().encode("utf-8") or None

    app = FastAPI(
        title="ledger-indexer",
        version=API_VERSION,
        description="Cross-session memory for AI agents: scoped `memory_search` and `memory_get` over the "
                    "Agents Ledger index, plus status, health, metrics and admin calls. Every error body is "
                    "`{\"error\": \"...\"}`.",
    )
    app.state.metrics = metrics
    app.state.backend = backend
    # Outermost last: the request log sees every answer, including the middlewares' 401/403/413.
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_request_bytes)
    app.add_middleware(AdminAuthMiddleware, token=token)  # before the body is read or parsed
    app.add_middleware(RequestLogMiddleware, metrics=metrics)

    # -- error handlers --

    @app.exception_handler(RequestValidationError)
    async def _on_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _validation_response(request, exc)

    @app.exception_handler(HTTPException)
    async def _on_http(request: Request, exc: HTTPException) -> Response:
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(_allowed_methods(app, request.scope))
        if exc.status_code in (204, 304) or exc.status_code < 200:
            return Response(status_code=exc.status_code, headers=headers)
        message = exc.detail if isinstance(exc.detail, str) else "request refused"
        if exc.status_code == 404 and message == "Not Found":
            message = f"no such endpoint: {request.method} {request.url.path} (see /docs or /openapi.json)"
        elif exc.status_code == 405:
            message = f"method {request.method} not allowed here; allowed: {headers['Allow']}"
        return _error(exc.status_code, message, headers or None)

    @app.exception_handler(_Refused)
    async def _on_refused(request: Request, exc: _Refused) -> JSONResponse:
        extra = {"details": exc.details} if exc.details else {}
        return _error(exc.status, exc.message, exc.headers, **extra)

    @app.exception_handler(Exception)
    async def _on_bug(request: Request, exc: Exception) -> JSONResponse:
        log.error("api.internal_error", method=request.method, route=_route_label(request.scope),
                  error_type=type(exc).__name__,
                  exc_info=exc)
        return _error(500, "internal error (see the daemon log)")

    # -- admin auth --

    bearer = HTTPBearer(auto_error=False, scheme_name="adminToken",
                        description="The contents of [api] admin_token_file.")

    async def require_admin(request: Request, _: HTTPAuthorizationCredentials | None = Security(bearer)) -> None:
        # AdminAuthMiddleware already refused bad calls before their body was read; this repeats the
        # check (defence in depth) and declares the bearer scheme in /openapi.json.
        refusal = admin_refusal(token, request.headers.get("authorization"))
        if refusal is not None:
            raise _Refused(*refusal)

    admin = [Security(require_admin)]
    admin_errors = _errors(401, 403)

    # -- search and get --

    @app.post("/v1/memory_search", response_model=SearchResponseModel, tags=["memory"],
              responses=_errors(*_BODY_ERRORS, 503), summary="Scoped hybrid search over a persona's memory",
              description="Vector + BM25 fused, each turn read in its conversation (its neighbours, its "
                          "session); dates named in the query (\"last week\", \"on 2025-03-01\", \"in July\") "
                          "favour what was said then. Scores are 0..1 and comparable across queries.")
    def memory_search(body: SearchRequestBody) -> JSONResponse:
        request = body.plain()
        started = time.perf_counter()
        response = _call("/v1/memory_search", backend.search, request)
        elapsed = time.perf_counter() - started
        out = _conform("/v1/memory_search", SearchResponseModel,
                       response.as_dict() if isinstance(response, SearchResponse) else response)
        metrics.observe_query(out.mode, elapsed)
        metrics.observe_warnings(w.code for w in out.warnings)
        return _json(out)

    @app.get("/v1/memory_get", response_model=GetResponseModel, tags=["memory"],
             responses=_errors(404, 422, 503, e404="No such document, or not visible to `session`."),
             summary="The text of one document (or a range of its lines)")
    def memory_get(
        persona: Annotated[Persona, Query(description="The ledger's persona_id.")],
        path: Annotated[DocPath, Query(description="A path from a search result.")],
        from_line: Annotated[int, Query(alias="from", ge=1, le=1_000_000_000,
                                        description="First line, 1-based.")] = 1,
        lines: Annotated[int | None, Query(ge=1, le=10_000,
                                           description="How many lines (default: to the end).")] = None,
        session: Annotated[Label | None, Query(description="The caller's session label (private sessions "
                                                           "are visible only to themselves).")] = None,
    ) -> JSONResponse:
        result = _call("/v1/memory_get", backend.get, persona, path, from_line, lines, session)
        out = _conform("/v1/memory_get", GetResponseModel,
                       result.as_dict() if isinstance(result, GetResult) else result)
        return _json(out)

    # -- status, health, metrics --

    @app.get("/v1/status", response_model=StatusReport, tags=["operations"], responses=_errors(503),
             summary="Per persona: cursor, ledger head, lag, documents, last sync, model, index metadata")
    def status() -> JSONResponse:
        report = _conform("/v1/status", StatusReport, _call("/v1/status", backend.status))
        try:  # exactly what the backend reported: no null-filled optional keys
            return JSONResponse(jsonable_encoder(report.model_dump(mode="json", exclude_unset=True)))
        except Exception as exc:
            log.error("api.contract_error", route="/v1/status", error=str(exc)[:500])
            raise _Refused(500, "internal error: the status report is not JSON (see the daemon log)") from None

    @app.get("/healthz", response_model=StatusText, tags=["operations"], summary="Liveness: 200 while the process runs")
    def healthz() -> JSONResponse:
        return JSONResponse({"status": "ok"})

    @app.get("/readyz", response_model=StatusText, tags=["operations"],
             responses={503: {"model": StatusText, "description": "Still starting (index not open or first sync "
                                                                   "not done)."}},
             summary="Readiness: 200 once the index is open and the first sync is done")
    def readyz() -> JSONResponse:
        ready = _is_ready(backend)
        metrics.set_ready(ready)
        if ready:
            return JSONResponse({"status": "ready"})
        return JSONResponse({"status": "starting"}, status_code=503,
                            headers={"Retry-After": str(RETRY_AFTER_SECONDS)})

    @app.get("/metrics", tags=["operations"], summary="Prometheus metrics (text exposition format)",
             responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                              "description": "Prometheus text format."}})
    def metrics_endpoint() -> Response:
        metrics.set_ready(_is_ready(backend))
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    # -- admin --

    @app.post("/v1/admin/reindex", status_code=202, response_model=ReindexJob, dependencies=admin,
              tags=["admin"],
              responses={**admin_errors, **_errors(*_BODY_ERRORS, 404, 503, e404="Unknown persona.")},
              summary="Start a full reindex (beside the live index; search keeps answering)")
    def reindex_start(body: Annotated[ReindexRequest | None, Body()] = None) -> JSONResponse:
        personas = list(body.personas) if body is not None and body.personas is not None else None
        job = _conform("/v1/admin/reindex", ReindexJob, _call("/v1/admin/reindex", backend.request_reindex, personas))
        return _json(job, 202, {"Location": "/v1/admin/reindex"})

    @app.get("/v1/admin/reindex", response_model=ReindexJob, dependencies=admin, tags=["admin"],
             responses={**admin_errors, **_errors(404, 503, e404="No reindex has run since the daemon started.")},
             summary="The running or last reindex job")
    def reindex_status() -> JSONResponse:
        job = _call("/v1/admin/reindex", backend.reindex_status)
        if job is None:
            raise _Refused(404, "no reindex job: start one with POST /v1/admin/reindex")
        return _json(_conform("/v1/admin/reindex", ReindexJob, job))

    @app.get("/v1/admin/projects", response_model=ProjectList, dependencies=admin, tags=["admin"],
             responses={**admin_errors, **_errors(503)}, summary="Every project and its session labels")
    def projects() -> JSONResponse:
        found = _call("/v1/admin/projects", backend.projects)
        return _json(_conform("/v1/admin/projects", ProjectList, {"projects": found}))

    @app.post("/v1/admin/projects/{name}/sessions", response_model=ProjectChange, dependencies=admin,
              tags=["admin"], responses={**admin_errors, **_errors(*_BODY_ERRORS, 503)},
              summary="Add sessions to a project (their documents become visible to it at once)")
    def project_add(name: ProjectName, body: LabelsRequest) -> JSONResponse:
        route = "/v1/admin/projects/{name}/sessions"
        return _json(_conform(route, ProjectChange, _call(route, backend.project_add, name, list(body.labels))))

    @app.post("/v1/admin/projects/{name}/sessions/remove", response_model=ProjectChange, dependencies=admin,
              tags=["admin"], responses={**admin_errors, **_errors(*_BODY_ERRORS, 503)},
              summary="Remove sessions from a project (hidden from it at once)")
    def project_remove(name: ProjectName, body: LabelsRequest) -> JSONResponse:
        route = "/v1/admin/projects/{name}/sessions/remove"
        return _json(_conform(route, ProjectChange, _call(route, backend.project_remove, name, list(body.labels))))

    @app.put("/v1/admin/sessions/visibility", response_model=VisibilityResponse, dependencies=admin,
             tags=["admin"],
             responses={**admin_errors, **_errors(*_BODY_ERRORS, 404, 503, e404="Unknown session label.")},
             summary="Make a session private (visible only to itself) or shared")
    def set_visibility(body: VisibilityRequest) -> JSONResponse:
        route = "/v1/admin/sessions/visibility"
        if not _call(route, backend.set_visibility, body.label, body.visibility):
            raise _Refused(404, f"unknown session {body.label!r}: sync first, or check the label "
                                "(it is case-sensitive)")
        return _json(VisibilityResponse(label=body.label, visibility=body.visibility))

    return app


def _is_ready(backend: ApiBackend) -> bool:
    try:
        return bool(backend.is_ready())
    except Exception as exc:
        if should_log("api.ready_failed", 30.0):
            log.warning("api.ready_check_failed", error_type=type(exc).__name__, error=str(exc)[:500])
        return False


def _allowed_methods(app: FastAPI, scope: dict) -> list[str]:
    methods: set[str] = set()
    for route in app.router.routes:
        match, _ = route.matches(scope)
        if match is not Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    return sorted(methods)


# -- serving it from the daemon ----------------------------------------------------------------


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
    RequestLogMiddleware logs route templates at debug instead), no lifespan,
    and no signal handlers (it is not the main thread; the daemon owns SIGTERM).
    """

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 8765, *,
                 graceful_shutdown_s: int = 5) -> None:
        import uvicorn

        self.host = host
        self.requested_port = port
        self._config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off",
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
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        try:
            self._socket = socket.create_server((self.host, self.requested_port), family=family, backlog=128)
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
