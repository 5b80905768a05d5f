"""The LanceDB adapter (exporters.lancedb.lance_private): where the installed lancedb keeps no async
handle in the table's private ``_table``, the synchronous API answers — the same rows, scores and
distances — and one ``lancedb.private_api_missing`` event says so. Real LanceDB; the real model
for a whole search."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from exporters.lancedb import direct, lance_private
from indexer.core.scopes import Scope
from tests.test_lancedb_ann import indexed, scope_where  # noqa: F401  (fixture)
from tests.test_lancedb_direct import _answers


class WithoutHandle:
    """A lancedb table as a lancedb that keeps its async handle elsewhere would give it: every
    public attribute, no ``_table``."""

    def __init__(self, table) -> None:
        self._wrapped = table

    def __getattr__(self, name: str):
        if name == "_table":
            raise AttributeError(name)
        return getattr(self._wrapped, name)


@pytest.fixture
def fresh_events(monkeypatch):
    monkeypatch.setattr(lance_private, "_missing", set())


def test_a_table_without_the_private_handle_reads_through_the_public_api(indexed, fresh_events) -> None:  # noqa: F811
    _, retriever, table = indexed
    shipped = _answers(retriever, table)
    bare = WithoutHandle(table)
    with capture_logs() as logs:
        assert isinstance(direct.reads(bare), direct.SyncReads)
        fallback = _answers(retriever, bare)
    assert fallback == shipped and shipped["persona"][0] and shipped["persona"][1]
    assert direct.reads(bare).version() == direct.reads(table).version() == table.version
    where = scope_where(Scope.SESSION, "s3").sql
    assert direct.reads(bare).count(where) == direct.reads(table).count(where) == 50
    missing = [e for e in logs if e["event"] == "lancedb.private_api_missing"]
    assert [e["attribute"] for e in missing] == ["LanceTable._table"]  # once, for every read since


def test_use_private_false_gives_the_same_answers(indexed, monkeypatch) -> None:  # noqa: F811
    _, retriever, table = indexed
    shipped = _answers(retriever, table)
    monkeypatch.setattr(lance_private, "USE_PRIVATE", False)
    assert isinstance(direct.reads(table), direct.SyncReads)
    assert _answers(retriever, table) == shipped


def test_a_search_with_the_real_model_answers_the_same_on_the_public_api(tmp_path: Path, monkeypatch) -> None:
    from indexer.search.searcher import SearchRequest
    from tests.demo_index import build_demo_index

    demo = build_demo_index(tmp_path)
    try:
        persona = demo.searcher.retriever.personas()[0]
        asks = [SearchRequest(query=q, persona=persona, scope="persona", max_results=8, mode=mode)
                for q in ("what did we decide about JWT expiry", "deploy the database migration")
                for mode in ("hybrid", "vector", "keyword")]

        def answers():
            return [[(r.path, r.start_line, r.score) for r in demo.searcher.search(a).results] for a in asks]

        shipped = answers()
        monkeypatch.setattr(lance_private, "USE_PRIVATE", False)
        assert isinstance(direct.reads(demo.searcher.retriever.active_table(persona)), direct.SyncReads)
        assert answers() == shipped and all(shipped)
    finally:
        demo.close()
