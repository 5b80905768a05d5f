"""Readers keep answering across the writer's maintenance on object storage (issue 38): while the
writer compacts, folds new rows into the indexes and removes old versions (exporters/lancedb/
compaction.py), a reader with the reader cache and one reading the store answer every query, and
after it both give the answers of a reader started afresh. Real S3-compatible server (moto in its
own process) and real LanceDB; the fake embedder (nothing here depends on the model)."""

from __future__ import annotations

import logging
import re
import threading
from datetime import timedelta

import pytest

from indexer.search.searcher import Searcher, SearchRequest
from indexer.sync.engine import sync_once
from tests.s3_server import start_s3
from tests.test_objectstore import _session_turns, fake_indexer, s3_config
from tests.test_reader_cache import BOUND_S, REFRESH_S, _reader, _until


@pytest.fixture(scope="module")
def s3():
    server = start_s3(own_process=True, server_module="bench.s3_ranges")
    yield server
    server.stop()


def _answer(searcher: Searcher, query: str) -> list[tuple[str, str]]:
    req = SearchRequest(query=query, persona="atlas", max_results=50, mode="hybrid")
    return sorted((r.session, r.path) for r in searcher.search(req).results)


def test_readers_answer_through_maintenance_and_agree_with_a_fresh_reader(tmp_path, s3, writer, ledger_path, caplog):
    from fake_embedder import FakeEmbedder

    caplog.set_level(logging.INFO, logger="exporters.lancedb")
    for s in range(6):
        _session_turns(writer, f"s{s}", 4, "walrus")
    config = s3_config(tmp_path, s3, ledger_path)
    ix = fake_indexer(config)
    sink = ix.sinks[0]
    sink.vector_index_rows = 20  # a vector index, so folds add its segments too
    sink.cleanup_older_than = timedelta(0)  # old versions' files removed at once: the harshest case
    readers: list[Searcher] = []
    errors: list[BaseException] = []
    try:
        sync_once(ix)
        sink.maintain(force=True)
        uri = config.index.uri
        cached = _reader(tmp_path, s3, ledger_path, uri, "cached")
        direct_cfg = s3_config(tmp_path, s3, ledger_path, name="direct", uri=uri, refresh_seconds=REFRESH_S)
        direct_cfg = direct_cfg.model_copy(update={"index": direct_cfg.index.model_copy(update={"cache_disk_mb": 0})})
        direct = Searcher(direct_cfg, embedder=FakeEmbedder())
        assert direct.retriever.cache is None
        readers = [cached, direct]
        stop = threading.Event()

        def ask() -> None:  # queries all along the writes and maintenance
            while not stop.is_set():
                for r in readers:
                    try:
                        assert _answer(r, "walrus detail")
                    except BaseException as exc:  # noqa: BLE001 - collected, asserted below
                        errors.append(exc)
                        return

        asker = threading.Thread(target=ask, daemon=True)
        asker.start()
        for k in range(4):
            _session_turns(writer, f"n{k}", 3, "walrus")
            sync_once(ix)
            done = sink.maintain()
            assert done["optimized"], done
        stop.set()
        asker.join(30)
        assert not errors, errors[:3]
        compacted = [int(n) for n in re.findall(r"optimized \S+: compacted (\d+) rows", caplog.text)]
        assert len(compacted) >= 4 and max(compacted) > 0, compacted  # the readers saw a compaction
        tbl = sink.active_table("atlas")
        assert all(int(i.num_unindexed_rows or 0) == 0 for i in tbl.list_indices())
        fresh = _reader(tmp_path, s3, ledger_path, uri, "fresh")
        readers.append(fresh)
        want = _answer(fresh, "walrus detail")
        assert {s for s, _ in want} >= {f"n{k}" for k in range(4)}
        for r in (cached, direct):
            took = _until(lambda r=r: _answer(r, "walrus detail") == want, 10)
            assert took is not None and took <= BOUND_S, f"a reader still answers differently after {took}"
    finally:
        for r in readers:
            r.close()
        ix.close()
