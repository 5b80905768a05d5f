"""Error answers: one JSON shape, backend failures mapped to status codes, never a traceback."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError

from indexer.core.errors import Failure, Problem
from indexer.runtime.logs import should_log
from indexer.runtime.storage_errors import StorageCause, StorageFault, classify
from indexer.search.retrieval import DocumentNotFound
from indexer.service.api.models import _M, MAX_ERROR_DETAILS, RETRY_AFTER_SECONDS, UNAVAILABLE

log = structlog.get_logger("indexer.api")


# A domain failure's kind as an HTTP status (indexer.core.errors.Problem).
HTTP_STATUS = {Problem.INVALID: 422, Problem.NOT_FOUND: 404, Problem.UNAVAILABLE: 503, Problem.FAILED: 503}


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


def _storage_refusal(route: str, fault: StorageFault) -> _Refused:
    """A backend call that failed for a storage cause: 507 for a full disk (the server cannot store
    what the request needs, RFC 4918), 503 for the others; the answer names the cause, the folder
    and the fix, and so does the log event (with the error that showed the cause, never a rollback's)."""
    if should_log(f"api.storage_error:{route}:{fault.cause}", 30.0):
        log.error("api.storage_error", route=route, error=fault.error, **fault.log_fields())
    status = 507 if fault.cause is StorageCause.DISK_FULL else 503
    return _Refused(status, fault.message, {"Retry-After": str(RETRY_AFTER_SECONDS)})


def _call(route: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Call the backend; turn its errors into HTTP answers (never a traceback to the client)."""
    try:
        return fn(*args)
    except DocumentNotFound as exc:
        raise _Refused(404, str(exc) or "document not found") from None
    except Failure as exc:  # SearchError and every other domain failure: its kind names the status
        status = HTTP_STATUS[exc.problem]
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
        fault = classify(exc)  # a StorageFailure brings its own, pinned to a folder by the backend
        if fault is not None:
            raise _storage_refusal(route, fault) from None
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

