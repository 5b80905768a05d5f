"""The HTTP API over the daemon's real backend (demo ledger, real LanceDB, real
model): what a client sees end to end. tests/test_api.py keeps the API layer's
own logic over a fake only where a failure is needed that the real backend
cannot produce on demand (a crash, an off-contract answer, not ready)."""

from __future__ import annotations

import threading
import time

import pytest
from fastapi.testclient import TestClient

from exporters.lancedb.rebuild import LanceRebuild
from indexer.service.api import create_app
from tests.real_backend import real_daemon

TOKEN = "real-backend-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def client():
    app = create_app(real_daemon(), admin_token=TOKEN)
    with TestClient(app) as c:
        yield c


def test_search_returns_the_decision_with_the_contract_shape(client):
    r = client.post("/v1/memory_search", json={"query": "what did we decide about JWT expiry", "persona": "atlas"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"results", "mode", "model", "took_ms", "warnings"} and body["warnings"] == []
    assert body["results"] and body["mode"] == "hybrid"
    top = body["results"][0]
    assert set(top) == {"path", "source", "persona", "session", "turn_id", "kind", "start_line", "end_line",
                        "score", "snippet", "timestamp", "sessions"}
    assert any("15" in h["snippet"] for h in body["results"][:3])
    # the demo forks main after the JWT decision: that turn comes once, naming both sessions
    turns = [h["turn_id"] for h in body["results"] if h["turn_id"]]
    assert len(turns) == len(set(turns))
    assert any(set(h["sessions"]) == {"main", "main/experiment-paseto"} and h["session"] == h["sessions"][0]
               for h in body["results"])
    assert all(h["persona"] == "atlas" and 0 <= h["score"] <= 1 for h in body["results"])


def test_get_returns_the_stored_lines(client):
    hit = client.post("/v1/memory_search", json={"query": "PgBouncer", "persona": "atlas"}).json()["results"][0]
    r = client.get("/v1/memory_get", params={"persona": "atlas", "path": hit["path"], "from": hit["start_line"],
                                             "lines": hit["end_line"] - hit["start_line"] + 1})
    assert r.status_code == 200, r.text
    assert "PgBouncer" in r.json()["text"]
    missing = client.get("/v1/memory_get", params={"persona": "nova", "path": hit["path"]})
    assert missing.status_code == 404


def test_a_private_session_is_hidden_from_others_until_shared_again(client):
    label = "dm:+1 555/123"
    others = {"query": "Kafka retention", "persona": "atlas", "session": "main", "max_results": 20}
    own = {**others, "session": label}
    assert any(h["session"] == label for h in client.post("/v1/memory_search", json=others).json()["results"])
    r = client.put("/v1/admin/sessions/visibility", json={"label": label, "visibility": "private"}, headers=AUTH)
    assert r.status_code == 200, r.text
    try:
        hidden = client.post("/v1/memory_search", json=others).json()["results"]
        assert hidden and all(h["session"] != label for h in hidden)
        assert any(h["session"] == label for h in client.post("/v1/memory_search", json=own).json()["results"])
    finally:
        client.put("/v1/admin/sessions/visibility", json={"label": label, "visibility": "shared"}, headers=AUTH)
    unknown = client.put("/v1/admin/sessions/visibility", json={"label": "nope", "visibility": "private"},
                         headers=AUTH)
    assert unknown.status_code == 404


def test_projects_widen_the_project_scope_at_once(client):
    body = {"query": "auth service tokens", "persona": "atlas", "session": "main", "scope": "project",
            "max_results": 20}
    alone = client.post("/v1/memory_search", json=body).json()["results"]
    assert alone and {h["session"] for h in alone if h["source"] == "sessions"} <= {"main"}
    r = client.post("/v1/admin/projects/auth/sessions", json={"labels": ["main", "worker/auth #2"]}, headers=AUTH)
    assert r.status_code == 200, r.text
    try:
        wider = client.post("/v1/memory_search", json=body).json()["results"]
        assert "worker/auth #2" in {h["session"] for h in wider}
    finally:
        client.post("/v1/admin/projects/auth/sessions/remove", json={"labels": ["main", "worker/auth #2"]},
                    headers=AUTH)


def test_status_and_readiness(client):
    status = client.get("/v1/status")
    assert status.status_code == 200
    atlas = status.json()["personas"]["atlas"]
    assert atlas["documents"] > 0 and atlas["lag"] == 0 and atlas["chunks"] > 0
    assert "bad_turns" in atlas and "truncated_documents" in atlas
    assert client.get("/readyz").status_code == 200


def test_reindex_of_an_unknown_persona_is_404(client):
    r = client.post("/v1/admin/reindex", json={"personas": ["nobody"]}, headers=AUTH)
    assert r.status_code == 404 and "nobody" in r.json()["error"]


def test_an_unknown_persona_is_a_404_that_says_so(client):
    r = client.post("/v1/memory_search", json={"query": "JWT expiry", "persona": "Atlas"})
    assert r.status_code == 404
    assert r.json()["error"].startswith("unknown persona 'Atlas': no index holds it")


def test_health_endpoints_answer_head(client):
    for path in ("/healthz", "/readyz"):
        r = client.head(path)
        assert (r.status_code, r.content) == (200, b"")


def test_docs_render_from_packaged_assets_without_a_cdn(client):
    page = client.get("/docs")
    assert page.status_code == 200 and "swagger-ui" in page.text
    import re

    urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text) + re.findall(r"""url: ?['"]([^'"]+)['"]""",
                                                                                     page.text)
    assert urls and all(u.startswith("/") for u in urls), urls  # every asset from this server
    for url in urls:
        if url.startswith("/docs/assets/"):
            assert client.get(url).status_code == 200, url


def test_memory_get_of_a_private_session_is_404_to_others_and_served_to_itself(client):
    label = "dm:+1 555/123"
    own = {"query": "Kafka retention", "persona": "atlas", "session": label, "max_results": 20}
    hit = next(h for h in client.post("/v1/memory_search", json=own).json()["results"] if h["session"] == label)
    params = {"persona": "atlas", "path": hit["path"]}
    assert client.get("/v1/memory_get", params={**params, "session": "main"}).status_code == 200  # shared: served
    r = client.put("/v1/admin/sessions/visibility", json={"label": label, "visibility": "private"}, headers=AUTH)
    assert r.status_code == 200, r.text
    try:
        for caller in ({"session": "main"}, {}):  # another session, and no session at all
            hidden = client.get("/v1/memory_get", params={**params, **caller})
            assert hidden.status_code == 404 and "no document" in hidden.json()["error"], hidden.text
        mine = client.get("/v1/memory_get", params={**params, "session": label})
        assert mine.status_code == 200 and mine.json()["path"] == hit["path"]
    finally:
        client.put("/v1/admin/sessions/visibility", json={"label": label, "visibility": "shared"}, headers=AUTH)


def test_project_changes_report_unknown_labels_and_removals(client):
    url = "/v1/admin/projects/typo-check/sessions"
    added = client.post(url, json={"labels": ["main", "no such session"]}, headers=AUTH)
    assert added.status_code == 200, added.text
    assert added.json() == {"project": "typo-check", "sessions": ["main", "no such session"],
                            "unknown": ["no such session"]}
    assert client.get("/v1/admin/projects", headers=AUTH).json()["projects"]["typo-check"] == ["main",
                                                                                             "no such session"]
    removed = client.post(url + "/remove", json={"labels": ["no such session", "main", "never a member"]},
                          headers=AUTH)
    assert removed.status_code == 200, removed.text
    assert removed.json() == {"project": "typo-check", "sessions": [], "removed": 2}
    assert "typo-check" not in client.get("/v1/admin/projects", headers=AUTH).json()["projects"]


def _wait_for_job(client, job_id: str) -> dict:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        job = client.get("/v1/admin/reindex", headers=AUTH).json()
        if job["job_id"] == job_id and job["state"] in ("done", "failed"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"reindex job {job_id} did not finish")


def test_a_reindex_asked_for_again_while_it_runs_is_the_same_job(client, monkeypatch):
    """The real worker, held inside the rebuild's commit (every document staged): the job is running."""
    inside, release = threading.Event(), threading.Event()
    real_commit = LanceRebuild.commit

    def held_commit(self):
        inside.set()
        release.wait(120)
        real_commit(self)

    monkeypatch.setattr(LanceRebuild, "commit", held_commit)
    try:
        first = client.post("/v1/admin/reindex", json={"personas": ["atlas"]}, headers=AUTH)
        assert first.status_code == 202, first.text
        job = first.json()
        assert inside.wait(120), "the reindex never reached its commit"
        again = client.post("/v1/admin/reindex", json={}, headers=AUTH)  # every persona this time
        assert again.status_code == 202 and again.json()["job_id"] == job["job_id"]
        assert again.json()["personas"] == ["atlas"] and again.json()["state"] == "running"
        assert client.get("/v1/admin/reindex", headers=AUTH).json()["state"] == "running"
    finally:
        release.set()
    done = _wait_for_job(client, job["job_id"])
    assert done["state"] == "done" and done["error"] is None
    assert done["progress"]["atlas"]["done"] == done["progress"]["atlas"]["total"] > 0
    monkeypatch.undo()
    # a finished job lets a new one start
    later = client.post("/v1/admin/reindex", json={"personas": ["atlas"]}, headers=AUTH)
    assert later.status_code == 202 and later.json()["job_id"] != job["job_id"]
    assert _wait_for_job(client, later.json()["job_id"])["state"] == "done"
