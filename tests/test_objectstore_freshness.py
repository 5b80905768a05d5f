"""How stale a reader machine may be: a session made private on the writer stops showing on every
reader within ``index.refresh_seconds`` (README), against a real S3-compatible server (moto's
server mode on 127.0.0.1) and real LanceDB — never a mock.

Issue 32, defect 2: two caches used to stack — the published-scope snapshot re-read every
``refresh_seconds`` and the ``_scopes`` table handle opened with a ``read_consistency_interval`` of
the same length, whose background refresh hands out the old version near the end of its interval —
so a reader kept returning a session turned private for up to ~2x ``refresh_seconds``.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field

import pytest
from fake_embedder import FakeEmbedder

from indexer.search.searcher import Searcher, SearchRequest
from indexer.sync.engine import sync_once
from indexer.sync.visibility import apply_visibility
from tests.s3_server import start_s3
from tests.test_objectstore import _session_turns, fake_indexer, s3_config

REFRESH_S = 1.0
#: the bound the issue asks for: the refresh interval plus a query's own time on a busy machine
SLACK_S = 0.5
TRIALS = 8


@pytest.fixture(scope="module")
def s3():
    server = start_s3()
    yield server
    server.stop()


@dataclass
class _Poller:
    """A reader machine under steady load: searches in a loop and records, per query, when it
    started and ended and whether the watched session was in the results."""

    name: str
    searcher: Searcher
    watched: str
    seen: list[tuple[float, float, bool]] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        # keyword mode: the cheapest query, so the time of the first hiding one is measured finely
        request = SearchRequest(query="zephyr detail", persona="atlas", max_results=20, mode="keyword")
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                sessions = {r.session for r in self.searcher.search(request).results}
            except BaseException as exc:  # reported by the test, never swallowed
                self.errors.append(exc)
                return
            self.seen.append((started, time.monotonic(), self.watched in sessions))
            time.sleep(0.01)

    def shows_since(self, since: float) -> bool | None:
        """Whether the last query that started after ``since`` showed the watched session (None: none yet)."""
        after = [shown for started, _end, shown in self.seen if started >= since]
        return after[-1] if after else None

    def hidden_at(self, published: float) -> float | None:
        """When the first query that ended after ``published`` without the session ended; every later
        query must hide it too (a reader never goes back to the wider state)."""
        later = [(end, shown) for _start, end, shown in self.seen if end >= published]
        first = next((i for i, (_end, shown) in enumerate(later) if not shown), None)
        if first is None:
            return None
        assert not any(shown for _end, shown in later[first:]), f"{self.name} showed the session again"
        return later[first][0]


def _wait(pollers: list[_Poller], cond, timeout: float) -> bool:
    """Wait until ``cond()`` or ``timeout``; False on timeout. Raises a reader's search error at once."""
    deadline = time.monotonic() + timeout
    while not cond():
        for p in pollers:
            assert not p.errors, f"{p.name} failed: {p.errors[0]!r}"
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_a_session_turned_private_is_hidden_on_every_reader_within_refresh_seconds(tmp_path, s3, writer,
                                                                                   ledger_path):
    """Two readers (refresh 1 s) search continuously while the writer turns ``beta`` private through
    its real path (the visibility change publishes ``_scopes`` before the state DB commits), eight
    times at random phases of the readers' refresh: each reader's first query without ``beta``
    ends within ``refresh_seconds`` + 0.5 s of the publish, every time."""
    _session_turns(writer, "alpha", 2, "zephyr")
    _session_turns(writer, "beta", 2, "zephyr")
    config = s3_config(tmp_path, s3, ledger_path)
    ix = fake_indexer(config)
    published: list[float] = []
    ix.publisher.listeners.append(lambda: published.append(time.monotonic()))  # right after the Lance commit
    pollers: list[_Poller] = []
    threads: list[threading.Thread] = []
    try:
        sync_once(ix)
        for name in ("reader-1", "reader-2"):
            cfg = s3_config(tmp_path, s3, ledger_path, name=name, uri=config.index.uri, refresh_seconds=REFRESH_S)
            pollers.append(_Poller(name, Searcher(cfg, embedder=FakeEmbedder()), watched="beta"))
        threads = [threading.Thread(target=p.run, name=p.name, daemon=True) for p in pollers]
        for t in threads:
            t.start()
        rng = random.Random(32)
        delays: list[tuple[int, str, float | None]] = []
        for trial in range(TRIALS):
            shared_at = time.monotonic()
            assert apply_visibility(ix, "beta", "shared") is not None
            assert _wait(pollers, lambda: all(p.shows_since(shared_at) for p in pollers), 10), \
                f"trial {trial}: the readers never showed beta again"
            time.sleep(rng.uniform(0, REFRESH_S))  # the publish lands at any phase of the readers' refresh
            assert apply_visibility(ix, "beta", "private") is not None
            at = published[-1]
            # well past the bound, so a late hide is measured (and reported) rather than cut off
            _wait(pollers, lambda: all(p.shows_since(at) is False for p in pollers), 3 * REFRESH_S + 2)
            for p in pollers:
                hidden = p.hidden_at(at)
                delays.append((trial, p.name, None if hidden is None else round(hidden - at, 2)))
        late = [d for d in delays if d[2] is None or d[2] > REFRESH_S + SLACK_S]
        assert not late, (f"a reader returned the private session past refresh_seconds + {SLACK_S} s "
                          f"(trial, reader, seconds): {late}; all: {delays}")
        assert len(delays) == 2 * TRIALS
    finally:
        for p in pollers:
            p.stop.set()
        for t in threads:
            t.join(timeout=30)
        for p in pollers:
            p.searcher.close()
        ix.close()
