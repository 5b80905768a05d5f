"""A full-text failure inside a query is never silent (issue 10): hybrid answers
from the vector stage with a warning, keyword mode fails clearly, the HTTP API
carries the warning and counts it. Real ledger, real LanceDB, real model; the
failure is real too: the table's FTS index is dropped."""

from __future__ import annotations

import shutil

import pytest
from fastapi.testclient import TestClient
from structlog.testing import capture_logs

from indexer.core.errors import Problem
from indexer.search.searcher import SearchError, SearchRequest
from tests.demo_index import build_demo_index


@pytest.fixture(scope="module")
def broken_fts(tmp_path_factory):
    index = build_demo_index(tmp_path_factory.mktemp("fts"))
    config, ix, searcher = index.config, index.ix, index.searcher
    table = searcher.retriever.active_table("atlas")
    fts = [i for i in table.list_indices() if i.columns == ["text"] and str(i.index_type) == "FTS"]
    assert len(fts) == 1, table.list_indices()
    # The index files vanish under the manifest that names them (a disk fault,
    # a half-copied backup): every full-text query of this table now fails.
    index_dir = searcher.retriever.db_dir / f"{table.name}.lance" / "_indices" / fts[0].index_uuid
    assert index_dir.is_dir()
    shutil.rmtree(index_dir)
    yield config, ix, searcher
    index.close()


def test_hybrid_answers_from_vectors_and_says_fts_failed(broken_fts):
    _config, _ix, searcher = broken_fts
    before = searcher.fts_failures
    with capture_logs() as logs:
        response = searcher.search(SearchRequest(query="JWT expiry decision", persona="atlas"))
    assert response.results  # the vector stage still answers
    assert [w.code for w in response.warnings] == ["fts_unavailable"]
    assert searcher.fts_failures == before + 1
    assert [e["event"] for e in logs if e["event"] == "search.fts_failed"] == ["search.fts_failed"]


def test_keyword_mode_fails_with_a_clear_error(broken_fts):
    _config, _ix, searcher = broken_fts
    with pytest.raises(SearchError) as caught:
        searcher.search(SearchRequest(query="JWT expiry", persona="atlas", mode="keyword"))
    assert caught.value.problem is Problem.UNAVAILABLE and "full-text search is unavailable" in str(caught.value)


def test_the_api_carries_the_warning_and_counts_it(broken_fts):
    from indexer.service.api import create_app
    from indexer.service.metrics import Metrics

    config, ix, searcher = broken_fts

    class Backend:  # the daemon's search path, without the daemon's threads
        def search(self, request):
            return searcher.search(request)

    metrics = Metrics()
    app = create_app(Backend(), admin_token=None, metrics=metrics)
    with TestClient(app) as client:
        r = client.post("/v1/memory_search", json={"query": "JWT expiry", "persona": "atlas"})
        assert r.status_code == 200, r.text
        assert r.json()["results"] and r.json()["warnings"][0]["code"] == "fts_unavailable"
        k = client.post("/v1/memory_search", json={"query": "JWT expiry", "persona": "atlas", "mode": "keyword"})
        assert k.status_code == 503 and "full-text search is unavailable" in k.json()["error"]
        text = client.get("/metrics").text
    assert 'ledger_indexer_search_warnings_total{code="fts_unavailable"} 1.0' in text
