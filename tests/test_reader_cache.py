"""The reader cache on object storage (issue 38), against a real S3-compatible server — moto's server
mode in its own process, wrapped by ``bench.s3_ranges`` so it counts the object requests it
answers — and real LanceDB; the fake embedder (the cache does not depend on the model).

- a warm reader's queries read (almost) nothing from the store: <= 10 requests a query, the
  background version check once per ``refresh_seconds`` included;
- a new document is found on two readers within ``refresh_seconds`` + 1 s of the writer's
  commit, and a session turned private is hidden on both within the same bound;
- the copies stay within the disk budget (least recently used table dropped), the caches'
  memory within theirs;
- a corrupt or truncated cached file is detected and fetched again.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
from fake_embedder import FakeEmbedder

from bench.s3_ranges import request_counts
from exporters.lancedb import Retriever
from exporters.lancedb.location import IndexLocation
from exporters.lancedb.mirror import file_crc
from indexer.search.searcher import Searcher, SearchRequest
from indexer.sync.engine import sync_once
from indexer.sync.visibility import apply_visibility
from tests.s3_server import start_s3
from tests.test_objectstore import _session_turns, fake_indexer, s3_config

REFRESH_S = 1.0
BOUND_S = REFRESH_S + 1.0


@pytest.fixture(scope="module")
def s3():
    server = start_s3(own_process=True, server_module="bench.s3_ranges")
    yield server
    server.stop()


def _requests(s3, uri: str) -> int:
    counts = request_counts(s3.client(), uri.removeprefix("s3://").split("/")[0])
    return sum(v for k, v in counts.items() if k != "get_bytes")


def _reader(tmp_path, s3, ledger_path, uri: str, name: str) -> Searcher:
    cfg = s3_config(tmp_path, s3, ledger_path, name=name, uri=uri, refresh_seconds=REFRESH_S)
    searcher = Searcher(cfg, embedder=FakeEmbedder())
    assert searcher.retriever.cache is not None and searcher.retriever.cache.wait_warm(60), \
        searcher.retriever.cache.status()
    return searcher


def _sessions(searcher: Searcher, query: str) -> set[str]:
    req = SearchRequest(query=query, persona="atlas", max_results=50, mode="hybrid")
    return {r.session for r in searcher.search(req).results}


def _until(cond, timeout: float) -> float | None:
    """Seconds until ``cond()`` held (polled every 20 ms), None past ``timeout``."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if cond():
            return time.monotonic() - start
        time.sleep(0.02)
    return None


def test_two_warm_readers_read_no_objects_per_query_and_see_changes_within_refresh_plus_1s(
        tmp_path, s3, writer, ledger_path):
    _session_turns(writer, "alpha", 3, "zephyr")
    _session_turns(writer, "beta", 3, "zephyr")
    config = s3_config(tmp_path, s3, ledger_path)
    ix = fake_indexer(config)
    readers: list[Searcher] = []
    try:
        sync_once(ix)
        uri = config.index.uri
        readers = [_reader(tmp_path, s3, ledger_path, uri, f"reader-{i}") for i in (1, 2)]
        for r in readers:
            table = r.retriever.active_table("atlas")
            assert str(r.retriever.cache.mirror.root) in str(table.uri), "queries must read the local copy"
            assert _sessions(r, "zephyr detail") == {"alpha", "beta"}
        # warm queries: a few seconds of them on each reader, the background refresh included
        before, queries, started = _requests(s3, uri), 0, time.monotonic()
        while time.monotonic() - started < 3 * REFRESH_S:
            for r in readers:
                assert _sessions(r, "zephyr detail") == {"alpha", "beta"}
                queries += 1
        per_query = (_requests(s3, uri) - before) / queries
        assert per_query <= 10, f"{per_query:.1f} object requests per warm query"

        # a new document: found on both readers within refresh_seconds + 1 s of the commit
        for trial in range(3):
            _session_turns(writer, f"gamma{trial}", 1, "quokka")
            sync_once(ix)
            committed = time.monotonic()
            for r in readers:
                took = _until(lambda: f"gamma{trial}" in _sessions(r, "quokka detail"), 10)
                waited = time.monotonic() - committed if took is not None else None
                assert waited is not None and waited <= BOUND_S, f"trial {trial}: new document seen after {waited}"
        # a session turned private: hidden on both within the same bound
        assert apply_visibility(ix, "beta", "private") is not None
        published = time.monotonic()
        for r in readers:
            took = _until(lambda: "beta" not in _sessions(r, "zephyr detail"), 10)
            waited = time.monotonic() - published if took is not None else None
            assert waited is not None and waited <= BOUND_S, f"private session still shown after {waited}"
        assert all(r.retriever.cache.syncs >= 1 for r in readers)
    finally:
        for r in readers:
            r.close()
        ix.close()


def _location(config, cache_dir: Path, disk_bytes: int, memory_bytes: int = 64 << 20) -> IndexLocation:
    return replace(IndexLocation.from_config(config), cache_dir=cache_dir, cache_disk_bytes=disk_bytes,
                   cache_memory_bytes=memory_bytes)


def test_copies_stay_within_the_disk_budget_and_caches_within_memory(tmp_path, s3, writer, ledger_path):
    """Two personas' tables, a budget that holds one of them: queries on both, alternating, for a
    few seconds while the refresher runs. The disk under the cache folder never exceeds the
    budget, at most one copy is complete at a time, both personas are answered every time (from
    the store while the other has the copy), and with no copy held back as in use (``idle_s`` 0)
    the least recently used one is dropped for the other. The session's and the rank columns'
    memory stay within their budgets."""
    _session_turns(writer, "alpha", 4, "walrus", persona="atlas")
    _session_turns(writer, "delta", 4, "walrus", persona="boreas")
    config = s3_config(tmp_path, s3, ledger_path)
    ix = fake_indexer(config)
    try:
        sync_once(ix)
        probe = Retriever(_location(config, tmp_path / "probe", 1 << 30))  # one copy's size, budget ample
        assert probe.cache.wait_warm(60)
        sizes = [probe.cache.mirror._copies[probe.meta(p)["table"]].nbytes for p in ("atlas", "boreas")]
        probe.close()
        budget = int(max(sizes) * 1.5)
        assert budget < sum(sizes)
        memory, rank = 64 << 20, 1 << 20
        reader = Retriever(_location(config, tmp_path / "cache", budget, memory), rank_cache_bytes=rank)
        try:
            mirror = reader.cache.mirror
            mirror.idle_s = 0.0
            assert reader.cache.wait_warm(60)
            names = {p: reader.meta(p)["table"] for p in ("atlas", "boreas")}
            assert sum(mirror.ready(n) for n in names.values()) == 1, "only one copy fits"
            started, served = time.monotonic(), {"atlas": 0, "boreas": 0}
            while time.monotonic() - started < 4:
                for persona in ("atlas", "boreas"):
                    table = reader.active_table(persona)
                    assert table is not None and table.count_rows() > 0, f"{persona} not answered"
                    served[persona] += 1
                    assert mirror.disk_bytes() <= budget, (mirror.disk_bytes(), budget)
                    assert sum(mirror.ready(n) for n in names.values()) <= 1
                time.sleep(0.05)
            assert min(served.values()) > 0
            assert mirror.evictions >= 1, "the least recently used copy was never dropped for the other"
            assert reader.memory_bytes() <= memory + rank
        finally:
            reader.close()
    finally:
        ix.close()


def test_a_corrupt_or_truncated_cached_file_is_fetched_again(tmp_path, s3, writer, ledger_path):
    _session_turns(writer, "alpha", 3, "narwhal")
    config = s3_config(tmp_path, s3, ledger_path)
    ix = fake_indexer(config)
    try:
        sync_once(ix)
        location = _location(config, tmp_path / "cache", 1 << 30)
        reader = Retriever(location)
        assert reader.cache.wait_warm(60)
        name = reader.meta("atlas")["table"]
        expected = reader.paths("atlas")
        mirror = reader.cache.mirror
        files = mirror._copies[name].files
        data = sorted(r for r in files if r.startswith("data/"))
        assert len(data) >= 1
        # truncated while the reader runs: the next background sync (size against the store) fetches it again
        victim = mirror.table_dir(name) / data[0]
        size, crc = files[data[0]]
        with open(victim, "r+b") as f:
            f.truncate(size // 2)
        assert _until(lambda: victim.stat().st_size == size, 5 * REFRESH_S + 5) is not None
        assert file_crc(victim) == crc
        reader.close()
        # corrupted (same size, bytes changed) while no reader ran: the next start checks and fetches it
        with open(victim, "r+b") as f:
            f.seek(size // 3)
            byte = f.read(1)
            f.seek(size // 3)
            f.write(bytes([byte[0] ^ 0xFF]))
        assert file_crc(victim) != crc
        reader = Retriever(location)
        try:
            assert reader.cache.wait_warm(60)
            assert reader.cache.mirror.refetched >= 1
            assert file_crc(victim) == crc
            assert reader.paths("atlas") == expected
        finally:
            reader.close()
    finally:
        ix.close()


def test_healthz_of_a_reader_reports_the_cache_from_prefetching_to_warm(tmp_path, s3, writer, ledger_path):
    """``serve`` on object storage: /healthz answers at once with the cache's state, and says ``warm``
    (the tables copied, the time to warm given) once the prefetch is done."""
    from fastapi.testclient import TestClient

    from indexer.service.api import create_app
    from indexer.service.serve import ReaderService

    _session_turns(writer, "alpha", 2, "ibis")
    config = s3_config(tmp_path, s3, ledger_path)
    ix = fake_indexer(config)
    try:
        sync_once(ix)
        cfg = s3_config(tmp_path, s3, ledger_path, name="reader", uri=config.index.uri, refresh_seconds=REFRESH_S)
        service = ReaderService(cfg, embedder=FakeEmbedder())
        try:
            with TestClient(create_app(service, admin_token=None)) as client:
                first = client.get("/healthz").json()
                assert first["status"] == "ok" and first["cache"]["state"] in ("cold", "prefetching", "warm")
                assert service.retriever.cache.wait_warm(60)
                body = client.get("/healthz").json()
                assert body["cache"]["state"] == "warm", body
                assert body["cache"]["warm_seconds"] > 0 and 0 < body["cache"]["disk_bytes"] <= body["cache"]["budget_bytes"]
        finally:
            service.close()
    finally:
        ix.close()
