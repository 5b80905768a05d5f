"""Fuzz the HTTP API from its own OpenAPI document (schemathesis 4).

Schema-valid and schema-invalid requests (both generation modes, plus the
coverage phase's boundary cases) go to every operation with the right admin
token; admin operations are also sent with a wrong token and with none (401
expected), and to an app with admin calls disabled (403). The backend is the
daemon's real one (demo ledger, real LanceDB, real model, its sync worker
running reindex jobs the fuzz asks for), healthy, so the rule is strict: no
5xx at all (a 503 would mean the API blamed the backend for a client's input). The authorised
call also runs schemathesis' conformance checks: documented status codes,
response bodies matching their schemas, invalid data rejected with 4xx.
Bounded to finish well within a minute.
"""

from __future__ import annotations

import os

import hypothesis
import schemathesis
from hypothesis import HealthCheck, settings

from indexer.service.api import create_app
from tests.real_backend import LazyBackend
from tests.test_api import TOKEN, FakeBackend

APP = create_app(LazyBackend(), admin_token=TOKEN, max_request_bytes=64_000)
# Invalid data must be refused with a 4xx the API documents; 413 (body over the limit) is a fine refusal too.
CONFIG = schemathesis.Config.from_dict({"checks": {"negative_data_rejection": {
    "expected-statuses": ["400", "401", "403", "404", "405", "413", "415", "422"]}}})
schema = schemathesis.openapi.from_asgi("/openapi.json", APP, config=CONFIG)

# `API_FUZZ_EXAMPLES=1000 pytest tests/test_api_fuzz.py` for a longer run.
MAX_EXAMPLES = int(os.environ.get("API_FUZZ_EXAMPLES", "100"))
GOOD = {"Authorization": f"Bearer {TOKEN}"}
BAD = {"Authorization": "Bearer not-the-token"}


def _no_server_error(response, label: str, case) -> None:
    assert response.status_code < 500, (
        f"{label}: {case.method} {case.formatted_path} -> {response.status_code} {response.text[:300]}"
    )
    assert "Traceback" not in response.text


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck), phases=[p for p in hypothesis.Phase if p.name != "explain"])
def test_api_fuzz(case):
    response = case.call_and_validate(headers=GOOD)
    _no_server_error(response, "authorised", case)
    if case.path.startswith("/v1/admin/"):
        for label, headers in (("wrong token", BAD), ("no token", None)):
            r = case.call(headers=headers) if headers else case.call()
            _no_server_error(r, label, case)
            if "authorization" not in {k.lower() for k in (case.headers or {})}:
                assert r.status_code == 401, (label, r.status_code, r.text[:200])


def test_fuzz_covers_every_operation():
    operations = {f"{op.method.upper()} {op.path}" for op in (r.ok() for r in schema.get_all_operations())}
    assert operations == {
        "POST /v1/memory_search", "GET /v1/memory_get", "POST /v1/memory_get", "GET /v1/status", "GET /healthz", "GET /readyz",
        "GET /metrics", "POST /v1/admin/reindex", "GET /v1/admin/reindex", "GET /v1/admin/projects",
        "POST /v1/admin/projects/{name}/sessions", "POST /v1/admin/projects/{name}/sessions/remove",
        "PUT /v1/admin/sessions/visibility",
    }


# With no admin token configured, every admin call is refused with 403, whatever it carries
# (before any backend method is reached: the fake stands in, and is never called).
DISABLED_APP = create_app(FakeBackend(), admin_token=None)
disabled_admin = schemathesis.openapi.from_asgi("/openapi.json", DISABLED_APP).include(tag="admin")


@disabled_admin.parametrize()
@settings(max_examples=15, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck), phases=[p for p in hypothesis.Phase if p.name != "explain"])
def test_admin_fuzz_when_disabled(case):
    for headers in (GOOD, BAD, None):
        r = case.call(headers=headers) if headers else case.call()
        _no_server_error(r, "admin disabled", case)
        assert r.status_code == 403, (case.method, case.formatted_path, r.status_code, r.text[:200])
