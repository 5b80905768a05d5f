"""A session label longer than 1,024 characters goes every way any other label goes, over HTTP.

The ledger holds labels of any length; the API capped ``session`` and admin labels at 1,024
characters (422), so a private session with a longer label could never search as itself. A label
now has no cap of its own (``indexer.core.names.LABEL``): over HTTP the request body limit
(``[api] max_request_bytes``, 413) bounds it as it bounds everything else. Real uvicorn on a real
socket (the label travels in a JSON body and in ``memory_get``'s query string), real WAL ledger,
real LanceDB; the fake embedder (what is tested is who may see what, not the model).
"""

from __future__ import annotations

import httpx
import pytest

from indexer.service.api import ApiServer, create_app
from tests.synced_daemon import synced_daemon

LONG = "dm:+1 555/" + "ünï kafka-" * 600  # 6,010 characters, not ASCII, spaces and slashes
SECRET = "LONGWORD quokka retention"
TOKEN = "long-label-admin-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def http(writer, config_factory):
    """The daemon's backend behind uvicorn, over a ledger with ``LONG`` and ``main``."""
    writer.turn(LONG, user=f"the {SECRET} plan", assistant="noted")
    writer.turn("main", user="an unrelated session about lunch", assistant="soup")
    config = config_factory(sinks=("lancedb",))
    with synced_daemon(config) as daemon:
        server = ApiServer(create_app(daemon, admin_token=TOKEN), "127.0.0.1", 0)
        server.start()
        try:
            with httpx.Client(base_url=server.url, timeout=30) as client:
                yield client
        finally:
            server.stop()


def search(http: httpx.Client, caller: str | None, **extra) -> httpx.Response:
    body = {"query": SECRET, "persona": "atlas", "mode": "keyword", "max_results": 20, **extra}
    if caller is not None:
        body["session"] = caller
    return http.post("/v1/memory_search", json=body)


def sessions_found(http: httpx.Client, caller: str | None, **extra) -> set[str]:
    r = search(http, caller, **extra)
    assert r.status_code == 200, r.text[:300]
    return {h["session"] for h in r.json()["results"]}


def test_a_private_session_with_a_long_label_searches_and_reads_as_itself_only(http):
    assert len(LONG) > 1024
    [hit] = search(http, "main").json()["results"]
    assert hit["session"] == LONG  # shared: every session sees it
    r = http.put("/v1/admin/sessions/visibility", json={"label": LONG, "visibility": "private"}, headers=AUTH)
    assert (r.status_code, r.json()) == (200, {"label": LONG, "visibility": "private"})
    assert sessions_found(http, "main") == set() and sessions_found(http, None) == set()
    assert sessions_found(http, LONG[:-1]) == set()  # another label, however alike
    assert sessions_found(http, LONG) == {LONG}
    assert sessions_found(http, LONG, scope="session") == {LONG}
    get = {"persona": "atlas", "path": hit["path"]}
    own = http.get("/v1/memory_get", params={**get, "session": LONG})  # the label in the query string
    assert own.status_code == 200 and SECRET in own.json()["text"], own.text[:300]
    for other in ("main", LONG + "x"):
        assert http.get("/v1/memory_get", params={**get, "session": other}).status_code == 404


def test_only_the_request_body_limit_bounds_a_label(http):
    near_limit = "x" * 60_000  # the body stays under the default 64,000 bytes
    assert sessions_found(http, near_limit) == {LONG}  # an unknown session: it sees the shared ones
    added = http.post("/v1/admin/projects/big/sessions", json={"labels": [near_limit]}, headers=AUTH)
    assert (added.status_code, added.json()["unknown"]) == (200, [near_limit])
    over = search(http, "x" * 70_000)
    assert over.status_code == 413
    assert over.json() == {"error": "request body too large: the limit is 64000 bytes"}
