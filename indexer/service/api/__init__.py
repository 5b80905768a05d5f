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

from indexer.service.api.app import ApiBackend, create_app
from indexer.service.api.errors import ApiError
from indexer.service.api.models import ADMIN_DISABLED, API_VERSION, DEFAULT_MAX_REQUEST_BYTES
from indexer.service.api.server import ApiServer

__all__ = ["ADMIN_DISABLED", "API_VERSION", "ApiBackend", "ApiError", "ApiServer", "DEFAULT_MAX_REQUEST_BYTES",
           "create_app"]
