"""The HTTP API layer (indexer/service/api/): its own logic over an in-memory fake backend.

What a client sees from the real backend (real ledger, LanceDB, model) is in
tests/test_api_real.py, and the schemathesis fuzz runs against the real
backend (tests/test_api_fuzz.py). The fake stays here because these tests need
failures the real backend cannot produce on demand: a backend crash
(``fail_with``), an off-contract answer, a backend that is not ready, a
reindex job held open, and exact knowledge of what reached the backend
(``searches``) to prove validation stopped a request before it. It
implements :class:`indexer.service.api.ApiBackend` with the daemon's error behaviour
(SearchError 422 for scope errors, DocumentNotFound, False for an unknown
session).
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid

import pytest
import structlog
from fastapi.testclient import TestClient
from structlog.testing import capture_logs

from indexer.core.errors import Problem
from indexer.core.scopes import Scope
from indexer.search.retrieval import DocumentNotFound, GetResult
from indexer.search.searcher import SearchError, SearchRequest, SearchResponse, SearchResult
from indexer.service.api import ADMIN_DISABLED, API_VERSION, ApiBackend, ApiError, create_app
from indexer.service.metrics import Metrics

TOKEN = "s3cret-admin-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SECRET_QUERY = "the launch codes are hunter2"


class FakeBackend:
    """In-memory ApiBackend. Never fails unless ``fail_with`` is set."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ready = True
        self.fail_with: Exception | None = None
        self.docs: dict[str, dict[str, tuple[str | None, str]]] = {
            "atlas": {
                "sessions/main/turns/t1.md": ("main", "Session: main\nTurn: t1\n\nUser: which database?\n"
                                                      "Assistant: we decided on LanceDB last week"),
                "sessions/dm_1/turns/t2.md": ("dm:+1 555/123", "Session: dm:+1 555/123\nTurn: t2\n\n"
                                                               "User: hello\nAssistant: hi"),
                "MEMORY.md": (None, "# Memory\nprefers short answers"),
            },
        }
        self.sessions: dict[str, str] = {"main": "shared", "dm:+1 555/123": "shared", "a/b": "shared"}
        self.project_members: dict[str, list[str]] = {}
        self.job: dict | None = None
        self.searches: list[SearchRequest] = []

    def _check(self) -> None:
        if self.fail_with is not None:
            raise self.fail_with

    # ApiBackend ----------------------------------------------------------------------------

    def search(self, request: SearchRequest) -> SearchResponse:
        self._check()
        if request.scope in (Scope.SESSION, Scope.PROJECT) and not request.session:
            raise SearchError(f"scope '{request.scope.value}' needs the caller's session label in 'session'",
                              Problem.INVALID)
        self.searches.append(request)
        words = {w.lower() for w in request.query.split()}
        results = []
        for path, (session, text) in self.docs.get(request.persona, {}).items():
            source = "memory" if session is None else "sessions"
            if source not in request.sources:
                continue
            if request.scope is Scope.SESSION and session not in (None, request.session):
                continue
            hits = sum(1 for w in words if w in text.lower())
            score = hits / max(1, len(words))
            if score <= 0 or score < request.min_score:
                continue
            kind = "memory" if session is None else "turn"
            results.append(SearchResult(path=path, source=source, persona=request.persona, session=session,
                                        turn_id=None if session is None else path.rsplit("/", 1)[-1][:-3],
                                        kind=kind, start_line=1, end_line=2, score=round(score, 4),
                                        snippet=text.split("\n")[0], timestamp="2025-11-13T02:13:20Z"))
        results.sort(key=lambda r: (-r.score, r.path))
        return SearchResponse(results=results[: request.max_results], mode=request.mode.value,
                              model="fake-model", took_ms=0.5)

    def get(self, persona: str, path: str, from_line: int, lines: int | None, session: str | None) -> GetResult:
        self._check()
        entry = self.docs.get(persona, {}).get(path)
        if entry is None or (entry[0] is not None and self.sessions.get(entry[0]) == "private"
                             and entry[0] != session):
            raise DocumentNotFound(f"no document {path!r} for persona {persona!r}")
        all_lines = entry[1].split("\n")
        chosen = all_lines[from_line - 1: (from_line - 1 + lines) if lines else None]
        return GetResult(persona, path, from_line, len(chosen), len(all_lines), "\n".join(chosen))

    def status(self) -> dict:
        self._check()
        return {"personas": {p: {"cursor": 10, "ledger_head": 12, "lag": 2, "documents": len(d), "chunks": len(d),
                                 "last_sync_at": "2025-11-13T02:13:20Z", "last_sync_seconds": 0.25,
                                 "bad_rows_skipped": 0, "model": "fake-model", "index_meta": {"dim": 384}}
                             for p, d in self.docs.items()}}

    def is_ready(self) -> bool:
        return self.ready

    def request_reindex(self, personas: list[str] | None) -> dict:
        self._check()
        with self.lock:
            if personas is not None and (unknown := [p for p in personas if p not in self.docs]):
                raise ApiError(f"unknown persona(s): {', '.join(unknown)}", 404)
            if self.job is None or self.job["state"] in ("done", "failed"):
                chosen = personas or sorted(self.docs)
                self.job = {"job_id": uuid.uuid4().hex, "state": "running", "personas": personas,
                            "progress": {p: {"done": 0, "total": len(self.docs[p])} for p in chosen},
                            "error": None, "started_at": "2025-11-13T02:13:20Z"}
            return dict(self.job)

    def finish_reindex(self) -> None:
        with self.lock:
            assert self.job is not None
            self.job["state"] = "done"
            self.job["progress"] = {p: {"done": v["total"], "total": v["total"]}
                                    for p, v in self.job["progress"].items()}

    def reindex_status(self) -> dict | None:
        self._check()
        with self.lock:
            return None if self.job is None else dict(self.job)

    def project_add(self, name: str, labels: list[str]) -> dict:
        self._check()
        with self.lock:
            members = self.project_members.setdefault(name, [])
            members.extend(lbl for lbl in labels if lbl not in members)
            return {"project": name, "sessions": list(members),
                    "unknown": [lbl for lbl in labels if lbl not in self.sessions]}

    def project_remove(self, name: str, labels: list[str]) -> dict:
        self._check()
        with self.lock:
            members = self.project_members.get(name, [])
            before = len(members)
            members[:] = [lbl for lbl in members if lbl not in labels]
            if not members:
                self.project_members.pop(name, None)
            return {"project": name, "sessions": list(members), "removed": before - len(members)}

    def projects(self) -> dict[str, list[str]]:
        self._check()
        with self.lock:
            return {k: list(v) for k, v in self.project_members.items()}

    def set_visibility(self, label: str, visibility: str) -> bool:
        self._check()
        with self.lock:
            if label not in self.sessions:
                return False
            self.sessions[label] = visibility
            return True


@pytest.fixture
def backend() -> FakeBackend:
    return FakeBackend()


@pytest.fixture
def client(backend: FakeBackend):
    app = create_app(backend, admin_token=TOKEN + "\n", max_request_bytes=4_000)
    with TestClient(app, raise_server_exceptions=True) as c:
        yield c


def search_body(**overrides) -> dict:
    return {"query": "database decided", "persona": "atlas", **overrides}


def assert_error(response, status: int, *needles: str) -> dict:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert isinstance(body.get("error"), str) and body["error"], body
    for needle in needles:
        assert needle in body["error"], (needle, body)
    assert "Traceback" not in response.text
    return body


def test_fake_backend_satisfies_protocol(backend):
    assert isinstance(backend, ApiBackend)


# -- memory_search ------------------------------------------------------------------------------


def test_search_ok_shape(client, backend):
    r = client.post("/v1/memory_search", json=search_body(max_results=5))
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"results", "mode", "model", "took_ms", "warnings"} and body["warnings"] == []
    assert body["mode"] == "hybrid" and body["model"] == "fake-model"
    assert body["results"], body
    first = body["results"][0]
    assert set(first) == {"path", "source", "persona", "session", "turn_id", "kind", "start_line", "end_line",
                          "score", "snippet", "timestamp", "sessions"}
    assert first["path"] == "sessions/main/turns/t1.md" and first["session"] == "main"
    assert 0.0 <= first["score"] <= 1.0
    # the request reached the backend as the validated SearchRequest
    assert backend.searches[-1] == SearchRequest(query="database decided", persona="atlas", max_results=5)


def test_search_integral_float_is_an_integer(client, backend):
    # JSON Schema's "integer" includes 6.0; "6" and true are refused (see the validation test).
    assert client.post("/v1/memory_search", json=search_body(max_results=6.0)).status_code == 200
    assert backend.searches[-1].max_results == 6


def test_search_memory_source_has_null_session(client):
    r = client.post("/v1/memory_search", json=search_body(query="short answers", sources=["memory"], mode="keyword"))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["mode"] == "keyword"
    assert [x["session"] for x in body["results"]] == [None]
    assert body["results"][0]["kind"] == "memory"


@pytest.mark.parametrize("body, field", [
    ({"query": "x"}, "persona"),
    ({"persona": "atlas"}, "query"),
    (search_body(query=""), "query"),
    (search_body(query="   \n\t"), "query"),
    (search_body(query="a\x00b"), "query"),
    (search_body(query="x" * 2001), "query"),
    (search_body(max_results=0), "max_results"),
    (search_body(max_results=1000), "max_results"),
    (search_body(max_results="many"), "max_results"),
    (search_body(max_results="6"), "max_results"),
    (search_body(max_results=6.5), "max_results"),
    (search_body(max_results=True), "max_results"),
    (search_body(min_score=False), "min_score"),
    (search_body(min_score="0.5"), "min_score"),
    (search_body(query=7), "query"),
    (search_body(sources="memory"), "sources"),
    (search_body(min_score=1.5), "min_score"),
    (search_body(mode="fuzzy"), "mode"),
    (search_body(scope="world"), "scope"),
    (search_body(sources=["email"]), "sources.0"),
    (search_body(sources=[]), "sources"),
    (search_body(persona=""), "persona"),
    (search_body(persona="at\x00las"), "persona"),
    (search_body(persona=["atlas"]), "persona"),
    (search_body(extra_key=1), "extra_key"),
])
def test_search_validation_names_the_field(client, body, field):
    r = client.post("/v1/memory_search", json=body)
    err = assert_error(r, 422, field)
    assert err["error"].startswith("invalid request: ")
    assert field in [d["field"] for d in err["details"]]
    assert all(set(d) == {"field", "message", "type"} for d in err["details"])


def test_search_validation_error_does_not_echo_input(client):
    r = client.post("/v1/memory_search", json=search_body(query=SECRET_QUERY, max_results=0))
    assert_error(r, 422, "max_results")
    assert "hunter2" not in r.text


def test_search_malformed_json_is_400(client):
    r = client.post("/v1/memory_search", content=b'{"query": "x", "persona": ',
                    headers={"content-type": "application/json"})
    assert_error(r, 400, "not valid JSON")
    r = client.post("/v1/memory_search", content=b"\xff\xfe\x00garbage", headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    r = client.post("/v1/memory_search", content=b"[" * 3000, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text


def test_search_json_array_body_is_422(client):
    r = client.post("/v1/memory_search", json=[search_body()])
    body = assert_error(r, 422, "body")
    assert body["details"][0]["field"] == "body"


def test_search_non_json_content_type_is_415(client):
    r = client.post("/v1/memory_search", content=json.dumps(search_body()), headers={"content-type": "text/plain"})
    assert_error(r, 415, "Content-Type: application/json")
    r = client.post("/v1/memory_search", data={"query": "x", "persona": "atlas"})  # form-encoded
    assert_error(r, 415)


def test_search_missing_body_is_422(client):
    r = client.post("/v1/memory_search")
    assert_error(r, 422, "body is required")


@pytest.mark.parametrize("scope", ["session", "project"])
def test_search_scope_without_session_is_422(client, backend, scope):
    for body in (search_body(scope=scope), search_body(scope=scope, session="")):
        err = assert_error(client.post("/v1/memory_search", json=body), 422, "needs the caller's session")
        assert err["details"][0]["field"] == "scope"
        assert err["details"][0]["message"].startswith(f"scope '{scope}' needs")
    assert backend.searches == []
    assert client.post("/v1/memory_search", json=search_body(scope=scope, session="main")).status_code == 200


def test_search_usage_error_from_the_backend_is_422(client, backend):
    backend.fail_with = SearchError("unknown persona 'x'", Problem.INVALID)
    assert_error(client.post("/v1/memory_search", json=search_body()), 422, "unknown persona")


def test_search_index_unavailable_is_503_with_retry_after(client, backend):
    backend.fail_with = SearchError("no index at /var/lib/ledger-indexer: run `ledger-indexer sync`")
    r = client.post("/v1/memory_search", json=search_body())
    assert_error(r, 503, "no index")
    assert r.headers["retry-after"].isdigit()


def test_backend_crash_is_503_logged_without_traceback(client, backend):
    backend.fail_with = RuntimeError("lance table corrupted: secret internals")
    with capture_logs() as logs:
        r = client.post("/v1/memory_search", json=search_body(query=SECRET_QUERY))
    body = assert_error(r, 503)
    assert body == {"error": "index unavailable, retry"}
    assert "secret internals" not in r.text
    events = [e for e in logs if e["event"] == "api.backend_error"]
    assert events and events[0]["route"] == "/v1/memory_search" and events[0]["error_type"] == "RuntimeError"
    # every other read endpoint maps the failure the same way
    for method, url in [("GET", "/v1/status"), ("GET", "/v1/memory_get?persona=atlas&path=MEMORY.md")]:
        assert_error(client.request(method, url), 503, "retry")


def test_backend_answer_off_contract_is_500_without_details(client, backend, monkeypatch):
    def bad_search(request):
        return SearchResponse(results=[], mode="hybrid", model="m", took_ms=float("nan"))

    monkeypatch.setattr(backend, "search", bad_search)
    with capture_logs() as logs:
        r = client.post("/v1/memory_search", json=search_body())
    assert_error(r, 500, "contract")
    assert any(e["event"] == "api.contract_error" for e in logs)


def test_query_text_is_never_logged(client):
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(0))  # let debug through
    try:
        with capture_logs() as logs:
            client.post("/v1/memory_search", json=search_body(query=SECRET_QUERY))
            client.post("/v1/memory_search", json=search_body(query=SECRET_QUERY, max_results=0))
            client.get("/v1/memory_get", params={"persona": "atlas", "path": "hunter2.md"})
    finally:
        structlog.configure(**saved)
    requests = [e for e in logs if e["event"] == "api.request"]
    assert len(requests) == 3
    assert {e["log_level"] for e in requests} == {"debug"}
    assert requests[0]["route"] == "/v1/memory_search" and requests[0]["status"] == 200
    assert requests[2]["route"] == "/v1/memory_get" and requests[2]["status"] == 404
    assert "hunter2" not in repr(logs)


# -- body size limit ------------------------------------------------------------------------------


def test_oversized_body_with_content_length_is_413(client, backend):
    r = client.post("/v1/memory_search", json=search_body(query="x " * 3000))
    assert_error(r, 413, "too large", "4000")
    assert backend.searches == []


def test_oversized_chunked_body_is_413(client, backend):
    def chunks():
        for _ in range(10):
            yield b"x" * 1000

    r = client.post("/v1/memory_search", content=chunks(), headers={"content-type": "application/json"})
    assert "content-length" not in {k.lower() for k in r.request.headers}
    assert r.request.headers.get("transfer-encoding") == "chunked"
    assert_error(r, 413, "too large")
    assert backend.searches == []


def test_small_chunked_body_is_reassembled(client):
    raw = json.dumps(search_body()).encode()

    def chunks():
        for i in range(0, len(raw), 7):
            yield raw[i:i + 7]

    r = client.post("/v1/memory_search", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text


def _raw_asgi(app, headers: list[tuple[bytes, bytes]], bodies: list[bytes]) -> tuple[int, dict]:
    """Drive the app directly: lets a client lie about Content-Length."""
    messages = [{"type": "http.request", "body": b, "more_body": i < len(bodies) - 1} for i, b in enumerate(bodies)]
    sent: list[dict] = []

    async def receive():
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/v1/memory_search", "raw_path": b"/v1/memory_search", "query_string": b"", "root_path": "",
             "headers": [(b"host", b"test"), (b"content-type", b"application/json"), *headers],
             "client": ("127.0.0.1", 1), "server": ("test", 80)}
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], json.loads(body)


def test_lying_content_length_is_413(backend):
    app = create_app(backend, admin_token=None, max_request_bytes=1_000)
    status, body = _raw_asgi(app, [(b"content-length", b"10")], [b"{" + b" " * 600, b" " * 600 + b"}"])
    assert status == 413 and "too large" in body["error"]
    status, body = _raw_asgi(app, [(b"content-length", b"ten")], [b"{}"])
    assert status == 400 and "Content-Length" in body["error"]
    status, body = _raw_asgi(app, [], [json.dumps(search_body()).encode()[:5], json.dumps(search_body()).encode()[5:]])
    assert status == 200, body


# -- memory_get -------------------------------------------------------------------------------------


def test_get_ok_and_line_range(client):
    r = client.get("/v1/memory_get", params={"persona": "atlas", "path": "sessions/main/turns/t1.md",
                                             "from": 2, "lines": 2})
    assert r.status_code == 200, r.text
    assert r.json() == {"persona": "atlas", "path": "sessions/main/turns/t1.md", "from": 2, "lines": 2,
                        "total_lines": 5, "text": "Turn: t1\n"}


def test_get_unknown_document_is_404(client):
    r = client.get("/v1/memory_get", params={"persona": "atlas", "path": "sessions/nope/turns/x.md"})
    assert_error(r, 404, "no document", "sessions/nope/turns/x.md")

# memory_get of a private session: tests/test_api_real.py (the rule is the real backend's)


@pytest.mark.parametrize("params, field", [
    ({"path": "MEMORY.md"}, "persona"),
    ({"persona": "atlas"}, "path"),
    ({"persona": "atlas", "path": "MEMORY.md", "from": 0}, "from"),
    ({"persona": "atlas", "path": "MEMORY.md", "from": "two"}, "from"),
    ({"persona": "atlas", "path": "MEMORY.md", "lines": 0}, "lines"),
    ({"persona": "atlas", "path": "MEMORY.md", "lines": 10_001}, "lines"),
    ({"persona": "atlas", "path": "MEMORY.md", "from": 10**30}, "from"),
    ({"persona": "at\x00las", "path": "MEMORY.md"}, "persona"),
])
def test_get_validation_names_the_field(client, params, field):
    r = client.get("/v1/memory_get", params=params)
    err = assert_error(r, 422, field)
    assert field in [d["field"] for d in err["details"]]


# -- status, health, readiness, metrics -------------------------------------------------------------


def test_status(client):
    r = client.get("/v1/status")
    assert r.status_code == 200
    atlas = r.json()["personas"]["atlas"]
    assert {"cursor", "ledger_head", "lag", "documents", "chunks", "last_sync_at", "last_sync_seconds",
            "bad_rows_skipped", "model", "index_meta"} <= set(atlas)


def test_healthz_and_readyz(client, backend):
    backend.ready = False
    assert client.get("/healthz").json() == {"status": "ok"}
    r = client.get("/readyz")
    assert r.status_code == 503 and r.json() == {"status": "starting"}
    backend.ready = True
    r = client.get("/readyz")
    assert r.status_code == 200 and r.json() == {"status": "ready"}


def test_readyz_when_is_ready_raises(client, backend, monkeypatch):
    monkeypatch.setattr(backend, "is_ready", lambda: 1 / 0)
    assert client.get("/readyz").status_code == 503
    assert client.get("/healthz").status_code == 200


def test_metrics(client, backend):
    metrics: Metrics = client.app.state.metrics
    metrics.observe_sync(0.3, written=4, ok=True)
    metrics.observe_sync(0.1, written=0, ok=False)
    metrics.set_lag("atlas", 7)
    metrics.set_documents("atlas", 3)
    assert client.post("/v1/memory_search", json=search_body(mode="vector")).status_code == 200
    r = client.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    text = r.text
    for name in ("ledger_indexer_syncs_total 2.0", "ledger_indexer_sync_errors_total 1.0",
                 "ledger_indexer_sync_duration_seconds_count 2.0", "ledger_indexer_documents_written_total 4.0",
                 'ledger_indexer_lag_rows{persona="atlas"} 7.0', 'ledger_indexer_documents{persona="atlas"} 3.0',
                 'ledger_indexer_query_duration_seconds_count{mode="vector"} 1.0', "ledger_indexer_ready 1.0",
                 'ledger_indexer_http_requests_total{route="/v1/memory_search",status="200"} 1.0'):
        assert name in text, name
    assert "ledger_indexer_last_successful_sync_timestamp_seconds" in text


def test_metrics_route_label_is_bounded(client):
    for i in range(5):
        client.get(f"/no/such/path/{i}")
        client.get("/v1/memory_get", params={"persona": f"p{i}", "path": f"x{i}"})
    client.get("/openapi.json")
    client.get("/v1/admin/projects")  # refused by the auth middleware, before routing
    text = client.get("/metrics").text
    assert 'route="/openapi.json",status="200"' in text
    assert 'route="unmatched",status="401"' in text
    assert 'route="unmatched",status="404"' in text
    assert 'route="/v1/memory_get",status="404"} 5.0' in text
    assert "/no/such/path" not in text and "p3" not in text


def test_apps_have_separate_registries(backend):
    a = create_app(backend, admin_token=None)
    b = create_app(backend, admin_token=None)
    a.state.metrics.observe_query("hybrid", 0.01)
    assert b'ledger_indexer_query_duration_seconds_count{mode="hybrid"} 1.0' in a.state.metrics.render()
    assert b'mode="hybrid"' not in b.state.metrics.render()
    shared = Metrics()
    assert create_app(backend, admin_token=None, metrics=shared).state.metrics is shared


# -- errors for unknown routes and methods ------------------------------------------------------------


def test_unknown_route_and_method(client):
    assert_error(client.get("/v2/nothing"), 404, "no such endpoint")
    r = client.delete("/v1/admin/reindex", headers=AUTH)
    assert_error(r, 405, "not allowed")
    assert r.headers["allow"] == "GET, HEAD, POST"


def test_openapi_document(client):
    doc = client.get("/openapi.json").json()
    assert doc["info"]["title"] == "ledger-indexer" and doc["info"]["version"] == API_VERSION
    body_ref = doc["paths"]["/v1/memory_search"]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    body_schema = doc["components"]["schemas"][body_ref.rsplit("/", 1)[-1]]
    assert body_schema["title"] == "SearchRequest" and body_schema["additionalProperties"] is False
    assert set(body_schema["required"]) == {"query", "persona"}
    assert doc["components"]["securitySchemes"]["adminToken"]["scheme"] == "bearer"
    assert {"/v1/memory_search", "/v1/memory_get", "/v1/status", "/healthz", "/readyz", "/metrics",
            "/v1/admin/reindex", "/v1/admin/projects", "/v1/admin/projects/{name}/sessions",
            "/v1/admin/projects/{name}/sessions/remove", "/v1/admin/sessions/visibility"} == set(doc["paths"])
    search_422 = doc["paths"]["/v1/memory_search"]["post"]["responses"]["422"]
    assert search_422["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")


# -- admin ----------------------------------------------------------------------------------------------

ADMIN_CALLS = [
    ("POST", "/v1/admin/reindex", {"personas": None}),
    ("GET", "/v1/admin/reindex", None),
    ("GET", "/v1/admin/projects", None),
    ("POST", "/v1/admin/projects/alpha/sessions", {"labels": ["main"]}),
    ("POST", "/v1/admin/projects/alpha/sessions/remove", {"labels": ["main"]}),
    ("PUT", "/v1/admin/sessions/visibility", {"label": "main", "visibility": "private"}),
]


@pytest.mark.parametrize("method, url, body", ADMIN_CALLS)
def test_admin_disabled_without_token(backend, method, url, body):
    with TestClient(create_app(backend, admin_token=None)) as c:
        assert_error(c.request(method, url, json=body, headers=AUTH), 403, ADMIN_DISABLED)
        assert_error(c.request(method, url, json=body), 403, ADMIN_DISABLED)
    with TestClient(create_app(backend, admin_token="  \n")) as c:  # an empty token file
        assert_error(c.request(method, url, json=body, headers=AUTH), 403, ADMIN_DISABLED)


@pytest.mark.parametrize("method, url, body", ADMIN_CALLS)
@pytest.mark.parametrize("headers", [
    {},
    {"Authorization": "Bearer wrong-token"},
    {"Authorization": f"Basic {TOKEN}"},
    {"Authorization": "Bearer"},
    {"Authorization": f"Bearer {TOKEN}x"},
    {"Authorization": "Bearer caf\u00e9".encode("utf-8")},
])
def test_admin_needs_the_right_token(client, backend, method, url, body, headers):
    r = client.request(method, url, json=body, headers=headers)
    assert_error(r, 401, "token")
    assert r.headers["www-authenticate"].startswith("Bearer")
    assert backend.job is None and backend.project_members == {} and backend.sessions["main"] == "shared"


def test_admin_auth_is_checked_before_the_body(client):
    r = client.post("/v1/admin/projects/alpha/sessions", json={"bogus": 1})
    assert r.status_code == 401


def test_reindex_job_flow(client, backend):
    assert_error(client.get("/v1/admin/reindex", headers=AUTH), 404, "no reindex job")
    r = client.post("/v1/admin/reindex", headers=AUTH)  # no body: every persona
    assert r.status_code == 202, r.text
    job = r.json()
    assert job["state"] == "running" and job["personas"] is None and job["error"] is None
    assert job["progress"] == {"atlas": {"done": 0, "total": 3}}
    assert job["started_at"]  # extra keys pass through
    assert r.headers["location"] == "/v1/admin/reindex"
    # (asked again while it runs: the same job — the worker's rule, tested on the real one in test_api_real.py)
    assert client.get("/v1/admin/reindex", headers=AUTH).json()["job_id"] == job["job_id"]
    backend.finish_reindex()
    done = client.get("/v1/admin/reindex", headers=AUTH).json()
    assert done["state"] == "done" and done["progress"]["atlas"] == {"done": 3, "total": 3}
    # a finished job lets a new one start
    r = client.post("/v1/admin/reindex", headers=AUTH, json={"personas": ["atlas"]})
    assert r.status_code == 202 and r.json()["job_id"] != job["job_id"] and r.json()["personas"] == ["atlas"]


@pytest.mark.parametrize("body, status, needle", [
    ({"personas": []}, 422, "personas"),
    ({"personas": "atlas"}, 422, "personas"),
    ({"personas": [""]}, 422, "personas.0"),
    ({"persona": ["atlas"]}, 422, "persona"),
    ({"personas": ["nobody"]}, 404, "unknown persona"),
])
def test_reindex_bad_requests(client, body, status, needle):
    assert_error(client.post("/v1/admin/reindex", headers=AUTH, json=body), status, needle)


def test_projects(client):
    assert client.get("/v1/admin/projects", headers=AUTH).json() == {"projects": {}}
    r = client.post("/v1/admin/projects/alpha/sessions", headers=AUTH, json={"labels": ["main", "a/b", "new"]})
    assert r.status_code == 200, r.text
    assert r.json() == {"project": "alpha", "sessions": ["main", "a/b", "new"], "unknown": ["new"]}
    r = client.post("/v1/admin/projects/alpha/sessions/remove", headers=AUTH, json={"labels": ["a/b"]})
    assert r.status_code == 200 and r.json()["sessions"] == ["main", "new"] and r.json()["removed"] == 1
    assert client.get("/v1/admin/projects", headers=AUTH).json() == {"projects": {"alpha": ["main", "new"]}}
    assert_error(client.post("/v1/admin/projects/alpha/sessions", headers=AUTH, json={"labels": []}), 422, "labels")
    assert_error(client.post("/v1/admin/projects/alpha/sessions", headers=AUTH, json={"labels": [""]}),
                 422, "labels.0")
    assert_error(client.post("/v1/admin/projects/alpha/sessions", headers=AUTH, json=["main"]), 422, "body")


def test_visibility(client, backend):
    url = "/v1/admin/sessions/visibility"
    r = client.put(url, headers=AUTH, json={"label": "dm:+1 555/123", "visibility": "private"})
    assert r.status_code == 200, r.text
    assert r.json() == {"label": "dm:+1 555/123", "visibility": "private"}
    assert backend.sessions["dm:+1 555/123"] == "private"
    assert_error(client.put(url, headers=AUTH, json={"label": "ghost", "visibility": "shared"}), 404,
                 "unknown session 'ghost'")
    assert_error(client.put(url, headers=AUTH, json={"label": "main", "visibility": "public"}), 422, "visibility")
    assert_error(client.put(url, headers=AUTH, json={"label": "main"}), 422, "visibility")


def test_create_app_rejects_a_nonpositive_limit(backend):
    with pytest.raises(ValueError):
        create_app(backend, admin_token=None, max_request_bytes=0)


# -- under a real server ------------------------------------------------------------------------------


def _raw_http(port: int, request: bytes) -> tuple[int, bytes]:
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        try:
            sock.sendall(request)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may answer 413 and close before reading everything
        data = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
            if b"\r\n\r\n" in data:
                head, _, body = data.partition(b"\r\n\r\n")
                length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), None)
                if length is not None and len(body) >= length:
                    break
    status = int(data.split(b" ", 2)[1])
    return status, data.partition(b"\r\n\r\n")[2]


def test_serves_under_uvicorn_in_a_thread(backend):
    import httpx

    from indexer.service.api import ApiServer

    app = create_app(backend, admin_token=TOKEN, max_request_bytes=2_000)
    server = ApiServer(app, "127.0.0.1", 0)
    server.start()
    try:
        assert server.running
        with httpx.Client(base_url=server.url, timeout=10) as http:
            assert http.get("/healthz").json() == {"status": "ok"}
            r = http.post("/v1/memory_search", json=search_body())
            assert r.status_code == 200 and r.json()["results"]
            assert http.post("/v1/admin/reindex", headers=AUTH).status_code == 202
            assert http.post("/v1/memory_search", json=search_body(query="x " * 2000)).status_code == 413
        # chunked, no Content-Length, over the limit
        head = (b"POST /v1/memory_search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b"x" * 1000
        body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(5)) + b"0\r\n\r\n"
        status, payload = _raw_http(server.port, head + body)
        assert status == 413 and b"too large" in payload
        # a small chunked body is fine
        raw = json.dumps(search_body()).encode()
        status, payload = _raw_http(server.port, head + b"%x\r\n%s\r\n0\r\n\r\n" % (len(raw), raw))
        assert status == 200, payload
        # a second server on the same port refuses with a clear OSError
        with pytest.raises(OSError, match="cannot listen"):
            ApiServer(app, "127.0.0.1", server.port).start()
    finally:
        server.stop()
    assert not server.running


def test_every_connection_of_the_server_has_tcp_nodelay(backend):
    """Responses go out as two writes (headers, body); without TCP_NODELAY the body waits for
    the client's delayed ACK, 40 ms on every request. The server's own connection sockets,
    read while the client's keep-alive connection is open, must carry the option."""
    import socket

    import httpx

    from indexer.service.api import ApiServer

    server = ApiServer(create_app(backend, admin_token=TOKEN), "127.0.0.1", 0)
    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=10) as http:
            assert http.get("/healthz").status_code == 200
            connections = list(server._server.server_state.connections)
            assert len(connections) == 1  # the client's open keep-alive connection, as the server holds it
            sock = connections[0].transport.get_extra_info("socket")
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        server.stop()


def test_the_server_parses_http_in_c_on_uvloop(backend):
    """httptools and uvloop are dependencies: uvicorn picks both up; a broken install of either
    would fall back to the pure-Python parser and asyncio's loop silently (more interpreter time
    per request) — this fails instead."""
    import httpx

    from indexer.service.api import ApiServer

    app = create_app(backend, admin_token=TOKEN)
    loops: list[str] = []

    @app.get("/loop-kind")
    async def loop_kind() -> dict:
        loops.append(type(asyncio.get_running_loop()).__module__)
        return {}

    server = ApiServer(app, "127.0.0.1", 0)
    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=10) as http:
            assert http.get("/loop-kind").status_code == 200
            (connection,) = list(server._server.server_state.connections)
        assert type(connection).__module__ == "uvicorn.protocols.http.httptools_impl"
        assert loops == ["uvloop"]
    finally:
        server.stop()


def test_status_passes_extra_keys_and_checks_the_contract(client, backend, monkeypatch):
    monkeypatch.setattr(backend, "status", lambda: {"ledger": {"head": 12}, "personas": {"atlas": {"lag": 2}}})
    assert client.get("/v1/status").json() == {"ledger": {"head": 12}, "personas": {"atlas": {"lag": 2}}}
    monkeypatch.setattr(backend, "status", lambda: {"atlas": {"lag": 2}})
    with capture_logs() as logs:
        assert_error(client.get("/v1/status"), 500, "contract")
    assert any(e["event"] == "api.contract_error" and e["route"] == "/v1/status" for e in logs)


def test_validation_details_are_capped(client):
    r = client.post("/v1/admin/projects/alpha/sessions", headers=AUTH, json={"labels": [""] * 200})
    err = assert_error(r, 422, "labels.0", "(and 199 more)")
    assert len(err["details"]) == 20


@pytest.mark.parametrize("body", [b'{"query": "\xff\xfe", "persona": "atlas"}', b"[" * 1500 + b"]" * 1500])
def test_a_body_json_cannot_read_is_400_saying_so(client, body):
    r = client.post("/v1/memory_search", content=body, headers={"Content-Type": "application/json"})
    assert_error(r, 400, "the request body is not readable JSON")


@pytest.mark.parametrize("bind, host, status", [
    ("127.0.0.1", "127.0.0.1:8765", 200), ("127.0.0.1", "localhost:8765", 200), ("127.0.0.1", "[::1]:8765", 200),
    ("127.0.0.1", "LOCALHOST", 200), ("10.0.0.5", "10.0.0.5:8765", 200),
    ("127.0.0.1", "rebind.attacker.example:8765", 421), ("127.0.0.1", "127.0.0.1.attacker.example", 421),
    ("127.0.0.1", "", 421), ("10.0.0.5", "localhost.evil:8765", 421),
    ("0.0.0.0", "any.name.example", 200),  # a wildcard bind cannot know its names: no check (README)
])
def test_a_request_naming_another_host_is_refused_against_dns_rebinding(backend, bind, host, status):
    app = create_app(backend, admin_token=TOKEN, bind_host=bind)
    with TestClient(app) as c:
        r = c.post("/v1/memory_search", json=search_body(), headers={"Host": host})
    assert r.status_code == status, r.text
    if status == 421:
        assert "DNS rebinding" in r.json()["error"]


# -- review 2: metric labels, HEAD, NUL in labels ----------------------------------------------------------


def request_series(client) -> list[str]:
    return [line for line in client.get("/metrics").text.splitlines()
            if line.startswith("ledger_indexer_http_requests_total{")]


def test_every_path_under_the_docs_assets_mount_is_one_route_label(client):
    for i in range(50):  # the reviewer's 3000 distinct missing files made 6010 series
        client.get(f"/docs/assets/{uuid.uuid4().hex}{'x' * 200}{i}")
    assert client.get("/docs/assets/swagger-ui.css").status_code == 200
    assert client.get("/no/such/thing").status_code == 404
    assert request_series(client) == [
        'ledger_indexer_http_requests_total{route="/docs/assets",status="404"} 50.0',
        'ledger_indexer_http_requests_total{route="/docs/assets",status="200"} 1.0',
        'ledger_indexer_http_requests_total{route="unmatched",status="404"} 1.0',
    ]


GET_PATHS = ["/v1/status", "/metrics", "/v1/memory_get?persona=atlas&path=MEMORY.md", "/healthz", "/readyz",
             "/v1/admin/projects", "/v1/admin/reindex", "/docs", "/openapi.json", "/docs/assets/swagger-ui.css"]


@pytest.mark.parametrize("path", GET_PATHS)
def test_head_answers_wherever_get_does_with_the_headers_and_no_body(client, path):
    get, head = client.get(path, headers=AUTH), client.head(path, headers=AUTH)
    assert (head.status_code, head.content, head.headers["content-type"]) == (
        get.status_code, b"", get.headers["content-type"])
    if path != "/metrics":  # /metrics counts the GET itself: its length moves by a few bytes
        assert head.headers["content-length"] == get.headers["content-length"]


def test_head_on_an_admin_endpoint_still_needs_the_token_and_head_is_not_in_the_schema(client):
    refused = client.head("/v1/admin/projects")
    assert (refused.status_code, refused.headers["www-authenticate"], refused.content) == (401, "Bearer", b"")
    paths = client.get("/openapi.json").json()["paths"]
    assert {method for operations in paths.values() for method in operations} == {"get", "post", "put"}


def test_a_label_with_nul_is_taken_by_every_admin_and_search_field(client, backend):
    label = "nul\x00label"
    backend.sessions[label] = "shared"
    r = client.put("/v1/admin/sessions/visibility", headers=AUTH, json={"label": label, "visibility": "private"})
    assert (r.status_code, r.json(), backend.sessions[label]) == (
        200, {"label": label, "visibility": "private"}, "private")
    r = client.post("/v1/admin/projects/alpha/sessions", headers=AUTH, json={"labels": [label]})
    assert (r.status_code, r.json()) == (200, {"project": "alpha", "sessions": [label], "unknown": []})
    r = client.post("/v1/memory_search", json=search_body(session=label, scope="session"))
    assert r.status_code == 200 and backend.searches[-1].session == label
    r = client.get("/v1/memory_get", params={"persona": "atlas", "path": "MEMORY.md", "session": label})
    assert r.status_code == 200
