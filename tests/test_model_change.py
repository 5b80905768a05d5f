"""A change of embedding model (MiniLM → e5, the issue 36 upgrade) rebuilds the index beside the
live one, and no search in between comes back empty or compares vectors of two models."""

from __future__ import annotations

from searching import searching_throughout

from indexer.embedding import e5_files, model_files
from indexer.embedding.factory import make_embedder
from indexer.search.searcher import Searcher, SearchRequest
from indexer.sync.context import Indexer, build_sinks
from indexer.sync.engine import sync_once
from tests.conftest import make_config

TOPICS = ("JWT access tokens expire after 15 minutes", "PgBouncer runs in transaction pooling mode",
          "the staging cluster moves to Kubernetes 1.31", "backups are kept for 35 days in object storage")


def _ledger(writer, sessions: int = 6) -> None:
    for s in range(sessions):
        for i, topic in enumerate(TOPICS):
            writer.turn(f"s{s}", persona="atlas", user=f"what did we decide, point {i} of meeting {s}?",
                        assistant=f"We decided: {topic} (meeting {s}).")


def _indexer(config) -> Indexer:
    return Indexer(config, sinks=build_sinks(config, embedder=make_embedder(config)))


def test_a_model_change_rebuilds_without_an_empty_search(tmp_path, writer, ledger_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    _ledger(writer)
    old = make_config(tmp_path, ledger_path, sinks=("lancedb",), embedding={"model": model_files.MODEL_NAME})
    ix = _indexer(old)
    try:
        sync_once(ix)
    finally:
        ix.close()

    new = make_config(tmp_path, ledger_path, sinks=("lancedb",), embedding={"model": e5_files.MODEL_NAME})
    searcher = Searcher(new)
    ask = SearchRequest(query="how long do access tokens last", persona="atlas", max_results=5)
    ask_vector = SearchRequest(query="how long do access tokens last", persona="atlas", max_results=5, mode="vector")
    try:
        assert searcher.retriever.meta("atlas")["fingerprint"] == model_files.FINGERPRINT
        before = searcher.search(ask)
        # the live table is MiniLM's: keyword stage only, said so, never empty
        assert before.results and "JWT" in before.results[0].snippet
        assert [w.code for w in before.warnings] == ["model_changed"]
        vector_only = searcher.search(ask_vector)
        assert vector_only.results and [w.code for w in vector_only.warnings] == ["model_changed"]

        # the daemon's next pass with the new model rebuilds; searches keep answering throughout
        with searching_throughout(searcher, ask) as answers:
            ix = _indexer(new)
            try:
                summary = sync_once(ix)
            finally:
                ix.close()
        assert summary.documents_written == len(TOPICS) * 6  # every turn re-embedded with e5
        assert answers and min(answers) > 0, answers

        assert searcher.retriever.meta("atlas")["fingerprint"] == e5_files.FINGERPRINT
        after = searcher.search(ask)
        assert after.results and after.warnings == () and "JWT" in after.results[0].snippet
        assert searcher.search(ask_vector).results[0].snippet.count("JWT")
    finally:
        searcher.close()
