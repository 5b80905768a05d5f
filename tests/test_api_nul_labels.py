"""A session label holding NUL goes every way any other label goes, through the HTTP API.

The ledger contract says a label can be any string; the reviewer found one with NUL indexed and
searchable but impossible to make private (``Label`` refused NUL: 422). Every path such a label
takes was checked here, end to end over the daemon's real backend: the state DB (peewee/sqlite3),
LanceDB's filters (``sql_str``: the private label in ``session <> '…'``), the QMD export (its
folder is a ``safe_segment``), ``memory_get``'s visibility check, and the JSON log. All take it,
so the API takes it: in admin labels and as the caller's session. Real WAL ledger, real LanceDB,
real QMD exporter (files); the fake embedder (what is tested is who may see what, not the model).
"""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from structlog.processors import JSONRenderer
from structlog.testing import capture_logs

from indexer.service.api import create_app
from tests.synced_daemon import synced_daemon

NUL_LABEL = "nul\x00label"
SECRET = "NULWORD okapi migration"
TOKEN = "nul-label-admin-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def api(writer, config_factory):
    """The daemon's backend over a ledger with a session labelled ``nul\\x00label`` and ``main``."""
    writer.turn(NUL_LABEL, user=f"the {SECRET} plan", assistant="noted")
    writer.turn("main", user="an unrelated session about lunch", assistant="soup")
    config = config_factory(sinks=("lancedb", "qmd"))
    with synced_daemon(config) as daemon, TestClient(create_app(daemon, admin_token=TOKEN)) as client:
        yield client, config


def sessions_found(client, caller: str | None) -> set[str]:
    body = {"query": SECRET, "persona": "atlas", "mode": "keyword", "max_results": 20}
    if caller is not None:
        body["session"] = caller
    r = client.post("/v1/memory_search", json=body)
    assert r.status_code == 200, r.text
    return {h["session"] for h in r.json()["results"]}


def exported_text(config) -> str:
    return "".join(p.read_text() for p in (config.qmd_export_dir / "atlas").rglob("*.md"))


def set_visibility(client, visibility: str):
    return client.put("/v1/admin/sessions/visibility", json={"label": NUL_LABEL, "visibility": visibility},
                      headers=AUTH)


def test_a_label_with_nul_is_made_private_and_shared_again_through_the_admin_api(api):
    client, config = api
    assert sessions_found(client, "main") == {NUL_LABEL} and SECRET in exported_text(config)
    with capture_logs() as logs:
        r = set_visibility(client, "private")
    assert (r.status_code, r.json()) == (200, {"label": NUL_LABEL, "visibility": "private"})
    assert sessions_found(client, "main") == set() and sessions_found(client, None) == set()
    assert sessions_found(client, NUL_LABEL) == {NUL_LABEL}  # the caller's session may hold NUL
    assert SECRET not in exported_text(config)
    [event] = [e for e in logs if e["event"] == "session.visibility"]
    line = JSONRenderer(ensure_ascii=False)(None, "info", dict(event))  # the daemon's log renderer
    assert (event["session"], "\x00" in line, json.loads(line)["session"]) == (NUL_LABEL, False, NUL_LABEL)
    r = set_visibility(client, "shared")
    assert (r.status_code, r.json()) == (200, {"label": NUL_LABEL, "visibility": "shared"})
    assert sessions_found(client, "main") == {NUL_LABEL} and SECRET in exported_text(config)


def test_memory_get_serves_a_private_nul_labelled_session_to_itself_only(api):
    client, _ = api
    hit = client.post("/v1/memory_search", json={"query": SECRET, "persona": "atlas", "mode": "keyword"}).json()
    path = hit["results"][0]["path"]
    assert "\x00" not in path  # its folder is a safe segment
    assert set_visibility(client, "private").status_code == 200
    other = client.get("/v1/memory_get", params={"persona": "atlas", "path": path, "session": "main"})
    assert other.status_code == 404
    own = client.get("/v1/memory_get", params={"persona": "atlas", "path": path, "session": NUL_LABEL})
    assert own.status_code == 200 and SECRET in own.json()["text"]


def test_a_label_with_nul_joins_and_leaves_a_project(api):
    client, _ = api
    url = "/v1/admin/projects/alpha/sessions"
    added = client.post(url, json={"labels": [NUL_LABEL, "main"]}, headers=AUTH)
    assert (added.status_code, added.json()) == (200, {"project": "alpha", "sessions": sorted([NUL_LABEL, "main"]),
                                                       "unknown": []})
    r = client.post("/v1/memory_search", json={"query": SECRET, "persona": "atlas", "mode": "keyword",
                                               "session": "main", "scope": "project"})
    assert {h["session"] for h in r.json()["results"]} == {NUL_LABEL}
    removed = client.post(url + "/remove", json={"labels": [NUL_LABEL]}, headers=AUTH)
    assert (removed.status_code, removed.json()) == (200, {"project": "alpha", "sessions": ["main"], "removed": 1})
