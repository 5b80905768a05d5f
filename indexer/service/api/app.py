"""The FastAPI app over an :class:`ApiBackend` (the daemon implements it; tests use a fake)."""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Annotated, Protocol, runtime_checkable

import structlog
from fastapi import Body, FastAPI, Query, Request, Security
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException
from starlette.routing import Match

from indexer.core.scopes import Scope
from indexer.runtime.logs import should_log
from indexer.search.retrieval import GetResult
from indexer.search.searcher import SearchRequest, SearchResponse
from indexer.service.api.auth import (
    ApiAccess,
    CallerAuthMiddleware,
    Refusal,
    caller,
    confine_get,
    confine_search,
)
from indexer.service.api.auth import refused as auth_refused
from indexer.service.api.errors import _call, _conform, _error, _json, _Refused, _validation_response
from indexer.service.api.middleware import (
    AdminAuthMiddleware,
    BodyLimitMiddleware,
    HostCheckMiddleware,
    RequestLogMiddleware,
    _route_label,
    admin_refusal,
    allowed_host_names,
)
from indexer.service.api.models import (
    _BODY_ERRORS,
    API_VERSION,
    DEFAULT_MAX_REQUEST_BYTES,
    RETRY_AFTER_SECONDS,
    DocPath,
    GetRequestBody,
    GetResponseModel,
    Label,
    LabelsRequest,
    Persona,
    ProjectAdded,
    ProjectList,
    ProjectName,
    ProjectRemoved,
    ReindexJob,
    ReindexRequest,
    SearchRequestBody,
    SearchResponseModel,
    StatusReport,
    StatusText,
    VisibilityRequest,
    VisibilityResponse,
    _errors,
)
from indexer.service.metrics import CONTENT_TYPE, Metrics

log = structlog.get_logger("indexer.api")


@runtime_checkable
class ApiBackend(Protocol):
    """What the API needs from the daemon. All methods are synchronous and may block.

    Errors: raise a :class:`indexer.core.errors.Failure` such as ``SearchError`` (its ``problem``
    names the status: ``errors.HTTP_STATUS``), :class:`ApiError` (its ``status``) or
    ``DocumentNotFound`` (404).
    An exception with a storage cause (``indexer.runtime.storage_errors``: a
    full disk, a read-only file system, ...) is answered 507 (disk full) or 503
    naming the cause and the fix, logged as ``api.storage_error``; any other is
    answered 503 "index unavailable, retry" and logged as ``api.backend_error``.

    Optional (not part of the protocol): ``not_ready_reason() -> str | None``, one line on why the
    backend is not ready (e.g. the first sync failing on a full disk, with the folder and the fix),
    given as ``reason`` by ``/readyz``.
    """

    def search(self, request: SearchRequest) -> SearchResponse:
        """``memory_search``; SearchError: invalid (422) for scope errors, unavailable (503) when no index."""
        ...

    def get(self, persona: str, path: str, from_line: int, lines: int | None, session: str | None) -> GetResult:
        """``memory_get``; DocumentNotFound when absent *or not visible to ``session``*. For a
        token narrower than the persona the API adds ``scope=`` (a :class:`Scope`): DocumentNotFound
        too when the document lies outside that scope of ``session``."""
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
        """``{"project": name, "sessions": [members after the change], "unknown": [labels no indexed
        session has yet]}`` (extra keys are passed through)."""
        ...

    def project_remove(self, name: str, labels: list[str]) -> dict:
        """``{"project": name, "sessions": [members after the change], "removed": n}`` (extra keys
        are passed through)."""
        ...

    def projects(self) -> dict[str, list[str]]:
        """Every project and its session labels."""
        ...

    def set_visibility(self, label: str, visibility: str) -> bool:
        """``visibility`` is "private" or "shared"; False when the session is unknown."""
        ...





def create_app(backend: ApiBackend, *, admin_token: str | None, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
               metrics: Metrics | None = None, bind_host: str | None = None,
               access: ApiAccess | None = None) -> FastAPI:
    """The API over ``backend``. ``admin_token``: the bearer token for admin calls (None or empty:
    admin calls are refused with 403; surrounding whitespace, e.g. a token file's newline, is
    ignored). ``metrics``: shared with the daemon so /metrics shows sync and query series
    together (a fresh :class:`Metrics` when None). ``bind_host``: the address the server listens
    on; requests naming another host are refused (421; None: no check, as for in-process tests).
    ``access``: who may search and get (:mod:`indexer.service.api.auth`: bearer tokens, required
    off loopback; None: no tokens, every caller trusted as on loopback).
    The app is exposed as ``app.state.metrics``."""
    if max_request_bytes < 1:
        raise ValueError("max_request_bytes must be positive")
    metrics = metrics if metrics is not None else Metrics()
    token = (admin_token or "").strip().encode("utf-8") or None
    access = access if access is not None else ApiAccess()

    app = FastAPI(
        title="ledger-indexer",
        version=API_VERSION,
        description="Cross-session memory for AI agents: scoped `memory_search` and `memory_get` over the "
                    "Agents Ledger index, plus status, health, metrics and admin calls. Every error body is "
                    "`{\"error\": \"...\"}`.",
        docs_url=None,  # served below from the fastapi-offline package: no CDN, the page renders offline
        redoc_url=None,
    )
    _mount_offline_docs(app)
    app.state.metrics = metrics
    app.state.backend = backend
    # Outermost last: the request log sees every answer, including the middlewares' 401/403/413.
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_request_bytes)
    app.add_middleware(AdminAuthMiddleware, token=token)  # before the body is read or parsed
    app.add_middleware(CallerAuthMiddleware, access=access, admin_token=token)  # likewise
    app.add_middleware(RequestLogMiddleware, metrics=metrics, router=app.router)
    if bind_host is not None:  # outermost: a rebinding page gets nothing, not even a log line's worth of work
        app.add_middleware(HostCheckMiddleware, allowed=allowed_host_names(bind_host))

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
        elif exc.status_code == 400 and message == "There was an error parsing the body":
            # FastAPI's words for a body json.loads raised on other than a syntax error
            message = "the request body is not readable JSON: send UTF-8 JSON nested at most a few hundred levels"
        return _error(exc.status_code, message, headers or None)

    @app.exception_handler(_Refused)
    async def _on_refused(request: Request, exc: _Refused) -> JSONResponse:
        extra = {"details": exc.details} if exc.details else {}
        return _error(exc.status, exc.message, exc.headers, **extra)

    @app.exception_handler(Exception)
    async def _on_bug(request: Request, exc: Exception) -> JSONResponse:
        log.error("api.internal_error", method=request.method, route=_route_label(request.scope, app.router.routes),
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

    # -- caller tokens (search and get) --

    caller_bearer = HTTPBearer(auto_error=False, scheme_name="callerToken",
                               description="A token from [mcp] token_file: it fixes persona, session and widest "
                                           "scope. Required when the API listens off loopback; without one a "
                                           "loopback caller is trusted for persona and session.")

    def principal_for(route: str):
        async def principal(request: Request, _: HTTPAuthorizationCredentials | None = Security(caller_bearer)):
            # CallerAuthMiddleware already refused before the body was read; this repeats the check
            # (defence in depth) and declares the bearer scheme in /openapi.json.
            found = caller(access, request.headers.get("authorization"))
            if isinstance(found, Refusal):
                raise auth_refused(route, found)
            return found

        return principal

    search_caller = principal_for("/v1/memory_search")
    get_caller = principal_for("/v1/memory_get")
    caller_errors = _errors(401, 403, e401="Missing (off loopback) or unknown bearer token.",
                            e403="The request names another persona or session than its token, or a wider scope.")
    # Security requirements are alternatives: `{}` beside the token says a call without one is accepted
    # (on loopback). Off loopback the token alone is listed: the schema says what the server enforces.
    token_optional = None if access.tokens_required else {"security": [{}]}

    # -- search and get --

    @app.post("/v1/memory_search", response_model=SearchResponseModel, tags=["memory"],
              responses={**caller_errors,
                         **_errors(*_BODY_ERRORS, 404, 503, e404="Unknown persona: no index holds it.")},
              summary="Scoped hybrid search over a persona's memory", openapi_extra=token_optional,
              description="Vector + BM25 fused, each turn read in its conversation (its neighbours, its "
                          "session); dates named in the query (\"last week\", \"on 2025-03-01\", \"in July\") "
                          "favour what was said then. Scores are 0..1 and comparable across queries.")
    def memory_search(body: SearchRequestBody, principal=Security(search_caller)) -> JSONResponse:
        request = body.plain() if principal is None else confine_search(body, principal)
        started = time.perf_counter()
        response = _call("/v1/memory_search", backend.search, request)
        elapsed = time.perf_counter() - started
        out = _conform("/v1/memory_search", SearchResponseModel,
                       response.as_dict() if isinstance(response, SearchResponse) else response)
        metrics.observe_query(out.mode, elapsed)
        metrics.observe_warnings(w.code for w in out.warnings)
        return _json(out)

    @app.get("/v1/memory_get", response_model=GetResponseModel, tags=["memory"],
             responses={**caller_errors,
                        **_errors(404, 422, 503, e404="No such document, or not visible to `session` (or to the "
                                                     "token's scope).")},
             summary="The text of one document (or a range of its lines)", openapi_extra=token_optional)
    def memory_get(
        persona: Annotated[Persona, Query(description="The ledger's persona_id.")],
        path: Annotated[DocPath, Query(description="A path from a search result.")],
        from_line: Annotated[int, Query(alias="from", ge=1, le=1_000_000_000,
                                        description="First line, 1-based.")] = 1,
        lines: Annotated[int | None, Query(ge=1, le=10_000,
                                           description="How many lines (default: to the end).")] = None,
        session: Annotated[Label | None, Query(description="The caller's session label (private sessions "
                                                           "are visible only to themselves).")] = None,
        principal=Security(get_caller),
    ) -> JSONResponse:
        return _get(persona, path, from_line, lines, session, principal)

    @app.post("/v1/memory_get", response_model=GetResponseModel, tags=["memory"],
              responses={**caller_errors, **_errors(*_BODY_ERRORS, 404, 503, e404="No such document, or not "
                                                    "visible to `session` (or to the token's scope).")},
              summary="The same as GET, the parameters in a JSON body (a label too long for a URL)",
              openapi_extra=token_optional)
    def memory_get_body(body: GetRequestBody, principal=Security(get_caller)) -> JSONResponse:
        return _get(body.persona, body.path, body.from_line, body.lines, body.session, principal)

    def _get(persona: str, path: str, from_line: int, lines: int | None, session: str | None,
             principal) -> JSONResponse:
        fetch = backend.get
        if principal is not None:
            session, scope = confine_get(principal, persona, session)
            if scope is not Scope.PERSONA:  # only then: a backend without narrowed tokens needs no `scope`
                fetch = functools.partial(backend.get, scope=scope)
        result = _call("/v1/memory_get", fetch, persona, path, from_line, lines, session)
        out = _conform("/v1/memory_get", GetResponseModel,
                       result.as_dict() if isinstance(result, GetResult) else result)
        return _json(out)

    # -- status, health, metrics --

    @app.get("/v1/status", response_model=StatusReport, tags=["operations"],
             responses=_errors(401, 403, 503, e401="Off loopback: missing or wrong admin bearer token.",
                               e403="Off loopback without an admin token configured ([api] admin_token_file)."),
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
        cache = getattr(backend, "cache_status", None)  # a reader on object storage: its local copy
        try:
            state = cache() if cache is not None else None
        except Exception:  # liveness must answer
            state = None
        return JSONResponse({"status": "ok", **({"cache": state} if state else {})})

    @app.get("/readyz", response_model=StatusText, tags=["operations"],
             responses={503: {"model": StatusText, "description": "Still starting (index not open or first sync "
                                                                   "not done); `reason` says why, e.g. the first "
                                                                   "sync failing on a full disk."}},
             summary="Readiness: 200 once the index is open and the first sync is done")
    def readyz() -> JSONResponse:
        ready = _is_ready(backend)
        metrics.set_ready(ready)
        if ready:
            return JSONResponse({"status": "ready"})
        reason = _not_ready_reason(backend)
        return JSONResponse({"status": "starting", **({"reason": reason} if reason else {})}, status_code=503,
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

    @app.post("/v1/admin/projects/{name}/sessions", response_model=ProjectAdded, dependencies=admin,
              tags=["admin"], responses={**admin_errors, **_errors(*_BODY_ERRORS, 503)},
              summary="Add sessions to a project (their documents become visible to it at once)")
    def project_add(name: ProjectName, body: LabelsRequest) -> JSONResponse:
        route = "/v1/admin/projects/{name}/sessions"
        return _json(_conform(route, ProjectAdded, _call(route, backend.project_add, name, list(body.labels))))

    @app.post("/v1/admin/projects/{name}/sessions/remove", response_model=ProjectRemoved, dependencies=admin,
              tags=["admin"], responses={**admin_errors, **_errors(*_BODY_ERRORS, 503)},
              summary="Remove sessions from a project (hidden from it at once)")
    def project_remove(name: ProjectName, body: LabelsRequest) -> JSONResponse:
        route = "/v1/admin/projects/{name}/sessions/remove"
        return _json(_conform(route, ProjectRemoved, _call(route, backend.project_remove, name, list(body.labels))))

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

    _answer_head(app)
    return app


def _answer_head(app: FastAPI) -> None:
    """HEAD wherever GET is served: the same endpoint, dependencies (the admin check) and headers;
    the server sends no body (HTTP says a HEAD answer has none). Probes, load balancers and
    link checkers ask HEAD; FastAPI routes answer GET only. Not in the schema: it mirrors GET."""
    for route in list(app.router.routes):
        if isinstance(route, APIRoute) and "GET" in route.methods and "HEAD" not in route.methods:
            app.add_api_route(route.path, route.endpoint, methods=["HEAD"], dependencies=route.dependencies,
                              response_model=None, include_in_schema=False)


DOCS_ASSETS = "/docs/assets"


def _mount_offline_docs(app: FastAPI) -> None:
    """``/docs``: Swagger UI 5 (it reads the OpenAPI 3.1 document FastAPI writes) from the assets the
    fastapi-offline package ships (FastAPI's default page loads them from a CDN, which an always-on box
    without internet cannot reach). tests/test_docs_browser.py renders it in headless Chromium."""
    from fastapi.openapi.docs import get_swagger_ui_html
    from starlette.staticfiles import StaticFiles

    app.mount(DOCS_ASSETS, StaticFiles(directory=docs_assets_dir()), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def docs() -> Response:
        return get_swagger_ui_html(openapi_url=app.openapi_url or "/openapi.json", title=f"{app.title} API",
                                   swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
                                   swagger_favicon_url=f"{DOCS_ASSETS}/favicon.png")


def docs_assets_dir() -> Path:
    """The folder of Swagger UI's packaged files (``swagger-ui-bundle.js``, ``swagger-ui.css``, ``favicon.png``)."""
    import fastapi_offline

    return Path(fastapi_offline.__file__).parent / "static"


def _is_ready(backend: ApiBackend) -> bool:
    try:
        return bool(backend.is_ready())
    except Exception as exc:
        if should_log("api.ready_failed", 30.0):
            log.warning("api.ready_check_failed", error_type=type(exc).__name__, error=str(exc)[:500])
        return False


def _not_ready_reason(backend: ApiBackend) -> str | None:
    reason = getattr(backend, "not_ready_reason", None)  # optional: test fakes and older backends lack it
    try:
        return reason() if callable(reason) else None
    except Exception as exc:  # /readyz must answer
        if should_log("api.ready_reason_failed", 30.0):
            log.warning("api.ready_reason_failed", error_type=type(exc).__name__, error=str(exc)[:500])
        return None


def _allowed_methods(app: FastAPI, scope: dict) -> list[str]:
    methods: set[str] = set()
    for route in app.router.routes:
        match, _ = route.matches(scope)
        if match is not Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    return sorted(methods)


