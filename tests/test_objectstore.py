"""The index on object storage, against a real S3-compatible server (moto's server mode on
127.0.0.1, one per module; a fresh bucket per test) and real LanceDB — never a mock.

In-process tests use the fake embedder for the logic (writer, lease, published scopes);
the end-to-end tests run the real CLI as separate processes with the real model: a
writer syncing into the bucket, a reader machine (same ``index.uri``, its own empty
``index.dir``, no ledger) searching it, privacy changes reaching the reader, kill -9
of the writer mid-sync, two writers racing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from fake_embedder import FakeEmbedder

from exporters.base import SinkError
from exporters.lancedb import LanceSink, Retriever
from exporters.lancedb.lease import LeaseHeld, LeaseLost, WriterLease, epochs, lease_table
from exporters.lancedb.location import IndexLocation
from exporters.lancedb.published import ScopeStateUnavailable
from exporters.lancedb.store import _connect
from indexer.core.errors import Failure, Problem
from indexer.runtime.config import ConfigError, load_config
from indexer.search.searcher import Searcher, SearchError, SearchRequest
from indexer.state.db import StateDB
from indexer.sync.context import Indexer
from indexer.sync.engine import sync_once
from indexer.sync.visibility import apply_visibility
from tests.cli_runner import run_cli
from tests.s3_server import start_s3
from tests.test_sync import expected_paths

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def s3():
    server = start_s3()
    yield server
    server.stop()


def _toml(values: dict) -> str:
    lines = []
    for section, keys in values.items():
        lines.append(f"[{section}]")
        for k, v in keys.items():
            lines.append(f"{k} = {json.dumps(v)}")
    return "\n".join(lines) + "\n"


def write_config(path: Path, *, uri: str, options: dict, index_dir: Path, ledger: Path | None,
                 lease_seconds: float = 60, refresh_seconds: float = 0, port: int = 0, extra: dict | None = None) -> Path:
    index = {"dir": str(index_dir), "sinks": ["lancedb"], "uri": uri, "lease_seconds": lease_seconds,
             "refresh_seconds": refresh_seconds}
    values = {"index": index, "api": {"port": port}}
    if ledger is not None:
        values["ledger"] = {"path": str(ledger)}
    values.update(extra or {})
    text = _toml(values) + _toml({"index.storage_options": options})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def fake_indexer(config, embedder=None) -> Indexer:
    sink = LanceSink(IndexLocation.from_config(config), embedder or FakeEmbedder(), writer_dir=config.index.dir,
                     role="test")
    return Indexer(config, sinks=[sink])


def s3_config(tmp_path: Path, s3, ledger: Path, *, name: str = "writer", uri: str | None = None, **kw):
    path = write_config(tmp_path / name / "config.toml", uri=uri or s3.bucket(), options=s3.options(),
                        index_dir=tmp_path / name / "index", ledger=ledger, **kw)
    return load_config(path, env={})


# --------------------------------------------------------------------------- config


def test_config_uri_and_storage_options_from_toml_and_env(tmp_path):
    cfg = load_config(None, env={"LEDGER_INDEXER_INDEX_URI": "s3://bkt/prefix",
                                 "LEDGER_INDEXER_INDEX_STORAGE_OPTIONS": '{"aws_region": "eu-west-1"}'})
    assert cfg.index.object_store and cfg.lancedb_uri == "s3://bkt/prefix"
    assert cfg.index.storage_options == {"aws_region": "eu-west-1"}
    assert cfg.state_db_path == cfg.index.dir / "state.sqlite"  # the state DB stays local
    local = load_config(None, env={})
    assert not local.index.object_store and local.lancedb_uri == str(local.index.dir / "lancedb")
    folder = write_config(tmp_path / "c.toml", uri="tables", options={}, index_dir=tmp_path / "ix", ledger=None)
    assert load_config(folder, env={}).lancedb_dir == tmp_path / "tables"
    with pytest.raises(ConfigError, match="unsupported scheme 'http'"):
        load_config(None, env={"LEDGER_INDEXER_INDEX_URI": "http://x/y"})
    with pytest.raises(ConfigError, match="names no bucket"):
        load_config(None, env={"LEDGER_INDEXER_INDEX_URI": "s3://"})
    with pytest.raises(ConfigError) as err:
        load_config(None, overrides={"index": {"storage_options": {"aws_secret_access_key": 12345678}}})
    assert "12345678" not in str(err.value) and "must be a string" in str(err.value)
    loc = IndexLocation("s3://b/p", {"aws_secret_access_key": "s3cr3t", "aws_region": "us-east-1"})
    assert loc.safe_options() == {"aws_secret_access_key": "***", "aws_region": "us-east-1"}
    assert "s3cr3t" not in loc.describe()


# --------------------------------------------------------------------------- in-process: writer, scopes, lease


def _session_turns(writer, label, n, word, persona="atlas"):
    for i in range(n):
        writer.turn(label, persona=persona, user=f"question {i} about {word} in {label}",
                    assistant=f"answer {i}: the {word} detail for {label}")


def test_writer_on_s3_publishes_scopes_and_search_reads_them(tmp_path, s3, writer, ledger_path):
    _session_turns(writer, "alpha", 3, "kubernetes")
    _session_turns(writer, "beta", 3, "kubernetes")
    _session_turns(writer, "gamma", 2, "kubernetes")
    config = s3_config(tmp_path, s3, ledger_path)
    emb = FakeEmbedder()
    ix = fake_indexer(config, emb)
    try:
        sync_once(ix)
        reader_cfg = s3_config(tmp_path, s3, ledger_path, name="reader", uri=config.index.uri)
        searcher = Searcher(reader_cfg, embedder=emb)
        assert not reader_cfg.state_db_path.exists()

        def sessions(**kw):
            req = SearchRequest(query="kubernetes detail", persona="atlas", max_results=50, **kw)
            return {r.session for r in searcher.search(req).results}

        assert sessions() == {"alpha", "beta", "gamma"}
        # a visibility change on the writer: published before it commits, seen by the reader at once
        assert apply_visibility(ix, "beta", "private") is not None
        assert sessions() == {"alpha", "gamma"}
        assert sessions(session="beta") == {"alpha", "beta", "gamma"}  # a private session sees itself
        # project scope: membership published at once
        assert sessions(session="alpha", scope="project") == {"alpha"}
        with ix.scope_change():
            ix.state.project_add("p", ["alpha", "gamma"])
        assert sessions(session="alpha", scope="project") == {"alpha", "gamma"}
        with ix.scope_change():
            ix.state.project_remove("p", ["gamma"])
        assert sessions(session="alpha", scope="project") == {"alpha"}
        # deleted in the ledger: purged and published by the next pass
        writer.set_session_status("gamma", "deleted")
        sync_once(ix)
        assert sessions() == {"alpha"}
        snap = searcher.retriever.published.snapshot()
        assert snap.personas["atlas"].deleted == {"gamma"} and snap.personas["atlas"].private == {"beta"}
        assert snap.personas["atlas"].build == ix.state.build_identity("atlas").as_dict()
        searcher.close()
    finally:
        ix.close()


def test_the_writers_own_searcher_sees_its_published_change_at_once(tmp_path, s3, writer, ledger_path):
    """The daemon's wiring: its searcher reads the published state (refresh 60 s here) and drops
    its cached copy whenever its own process publishes."""
    _session_turns(writer, "alpha", 2, "redis")
    _session_turns(writer, "beta", 2, "redis")
    config = s3_config(tmp_path, s3, ledger_path, refresh_seconds=60)
    emb = FakeEmbedder()
    ix = fake_indexer(config, emb)
    searcher = Searcher(config, embedder=emb, state=ix.state)
    try:
        sync_once(ix)
        ix.publisher.listeners.append(searcher.retriever.published.invalidate)
        req = SearchRequest(query="redis detail", persona="atlas", max_results=20)
        assert {r.session for r in searcher.search(req).results} == {"alpha", "beta"}
        apply_visibility(ix, "beta", "private")
        assert {r.session for r in searcher.search(req).results} == {"alpha"}
    finally:
        searcher.close()
        ix.close()


def test_a_reader_never_sees_a_forks_new_copy_of_a_private_turn_while_the_writer_writes_it(tmp_path, s3, writer,
                                                                                             ledger_path):
    """beta's own turn is indexed and beta made private; then ``late`` forks it. The writer publishes
    the copy as hidden before its table holds it: a reader machine searching right after the write
    (the writer's pass not finished) does not find it."""
    _session_turns(writer, "alpha", 1, "quince")
    _session_turns(writer, "beta", 1, "quince")
    config = s3_config(tmp_path, s3, ledger_path)
    ix = fake_indexer(config)
    reader_cfg = s3_config(tmp_path, s3, ledger_path, name="reader", uri=config.index.uri)
    searcher = Searcher(reader_cfg, embedder=ix.sinks[0].embedder)
    try:
        sync_once(ix)
        apply_visibility(ix, "beta", "private")
        (own,) = ix.state.turns_of("atlas", ["beta"])
        writer.fork("late", own)

        def found() -> set[tuple[str, str]]:
            req = SearchRequest(query="quince detail", persona="atlas", session="alpha", max_results=20,
                                mode="keyword")
            return {(r.session, r.turn_id) for r in searcher.search(req).results}

        seen, written = [], []
        real = LanceSink.upsert

        def upsert_then_look(self, persona, docs):
            real(self, persona, docs)
            written.extend((d.session, d.turn_id) for d in docs)
            seen.append(found())

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(LanceSink, "upsert", upsert_then_look)
            sync_once(ix)
        alpha = {("alpha", t) for t in ix.state.turns_of("atlas", ["alpha"])}
        assert ("late", own) in written
        assert seen == [alpha]  # searched while the pass wrote the copy: alpha's turn only
        assert found() == alpha
    finally:
        searcher.close()
        ix.close()


def test_a_failed_publish_rolls_the_change_back(tmp_path, s3, writer, ledger_path):
    _session_turns(writer, "alpha", 1, "x")
    config = s3_config(tmp_path, s3, ledger_path)
    ix = fake_indexer(config)
    try:
        sync_once(ix)

        def boom():
            raise SinkError("store unreachable")

        ix.publisher._before_commit = boom
        with pytest.raises(SinkError, match="unreachable"):
            apply_visibility(ix, "alpha", "private")
        assert ix.state.session("alpha").visibility == "shared"  # not committed: readers never lag behind
    finally:
        ix.publisher._before_commit = None
        ix.close()


def test_reader_fails_closed_without_published_state(tmp_path, s3, ledger_path):
    uri = s3.bucket()
    cfg = s3_config(tmp_path, s3, ledger_path, name="reader", uri=uri)
    searcher = Searcher(cfg, embedder=FakeEmbedder())
    with pytest.raises(SearchError, match="no scope state is published") as err:
        searcher.search(SearchRequest(query="anything", persona="atlas"))
    assert err.value.problem is Problem.UNAVAILABLE
    # a persona with a live table but no published entry is refused too
    sink = LanceSink(IndexLocation(uri, s3.options()), FakeEmbedder(), role="test")
    from tests.builders import document

    sink.upsert("atlas", [document("User: hi\nAssistant: there", path="sessions/s/turns/t.md", persona="atlas",
                                   session="s", turn="t")])
    state = StateDB(tmp_path / "other.sqlite")
    state.register_sessions([("s2", "zeta", "active")])
    sink.publisher.publish(state)  # publishes zeta only
    sink.close()
    with pytest.raises(SearchError, match="no published scope state yet"):
        searcher.search(SearchRequest(query="hi", persona="atlas"))
    # damaged state: refused, never searched unscoped
    db = _connect(IndexLocation(uri, s3.options()), reader=False)
    import pyarrow as pa

    db.open_table("_scopes").add(pa.table({"kind": ["persona"], "key": ["atlas"], "data": ["{not json"]}))
    with pytest.raises(SearchError, match="unreadable"):
        searcher.search(SearchRequest(query="hi", persona="atlas"))
    searcher.close()


def test_reader_refuses_another_embedding_model(tmp_path, s3, writer, ledger_path):
    _session_turns(writer, "alpha", 1, "x")
    config = s3_config(tmp_path, s3, ledger_path)
    ix = fake_indexer(config, FakeEmbedder())
    try:
        sync_once(ix)
    finally:
        ix.close()
    searcher = Searcher(s3_config(tmp_path, s3, ledger_path, name="r", uri=config.index.uri),
                        embedder=FakeEmbedder(version="2"))
    with pytest.raises(SearchError, match="set \\[embedding\\] as on the writer"):
        searcher.search(SearchRequest(query="x", persona="atlas"))
    searcher.close()


def test_reader_with_the_int8_model_queries_an_index_built_by_the_packaged_one(tmp_path, s3, writer, ledger_path):
    """After an upgrade the reader embeds with the rewritten model (MatMulNBits) while the writer's
    index still says the packaged model: the same vector space, so the reader answers."""
    from indexer.embedding import model_files as mf

    _session_turns(writer, "alpha", 1, "jwt expiry")
    config = s3_config(tmp_path, s3, ledger_path)
    built_by = FakeEmbedder()
    built_by.fingerprint = mf.PACKAGED_FINGERPRINT
    ix = fake_indexer(config, built_by)
    try:
        sync_once(ix)
    finally:
        ix.close()
    reader = FakeEmbedder()
    reader.fingerprint = mf.FINGERPRINT
    assert mf.FINGERPRINT != mf.PACKAGED_FINGERPRINT
    searcher = Searcher(s3_config(tmp_path, s3, ledger_path, name="r", uri=config.index.uri), embedder=reader)
    try:
        results = searcher.search(SearchRequest(query="jwt expiry", persona="atlas")).results
        assert [r.session for r in results] == ["alpha"]
    finally:
        searcher.close()


def test_lease_one_writer_takeover_and_fencing(tmp_path, s3):
    loc = IndexLocation(s3.bucket(), s3.options(), lease=timedelta(seconds=3))
    db = _connect(loc, reader=False)
    a = WriterLease.acquire(db, where=loc.uri, ttl=loc.lease, role="a")
    with pytest.raises(LeaseHeld, match="pid"):
        WriterLease.acquire(db, where=loc.uri, ttl=loc.lease, role="b")
    # a crashed writer (no heartbeat, not released): taken over once the lease has run out
    a._stop.set()
    a._thread.join()
    time.sleep(3.2)
    b = WriterLease.acquire(db, where=loc.uri, ttl=loc.lease, role="b")
    assert b.epoch == a.epoch + 1
    a._stop.clear()
    a._last_epoch_check = 0.0
    a._last_ok = time.monotonic()
    with pytest.raises(LeaseLost, match="took the index over"):
        a.check()  # fenced: the old writer stops before its next commit
    # a clean release lets the next writer in at once
    b.release()
    c = WriterLease.acquire(db, where=loc.uri, ttl=loc.lease, role="c")
    assert c.epoch == b.epoch + 1
    # same machine, same index folder, local lock held: the previous holder is dead, no wait
    c.release()
    d_dir = tmp_path / "ix"
    e = WriterLease.acquire(db, where=loc.uri, ttl=timedelta(seconds=600), role="e", writer_dir=d_dir)
    e._stop.set()
    e._thread.join()
    f = WriterLease.acquire(db, where=loc.uri, ttl=timedelta(seconds=600), role="f", writer_dir=d_dir,
                            holds_local_lock=True)
    assert f.epoch == e.epoch + 1
    f.release()
    assert len(epochs(db)) <= 3  # old epochs are dropped as new ones are taken


def test_sink_commits_stop_when_the_lease_is_lost(tmp_path, s3):
    from tests.builders import document

    loc = IndexLocation(s3.bucket(), s3.options())
    sink = LanceSink(loc, FakeEmbedder(), role="test")
    doc = document("User: a\nAssistant: b", path="sessions/s/turns/t.md", persona="atlas", session="s", turn="t")
    sink.upsert("atlas", [doc])
    # another machine takes over (as after this writer stalled past the lease)
    db = _connect(loc, reader=False)
    db.create_table(lease_table(sink.lease.epoch + 1), sink.lease._table.to_arrow(), mode="create")
    sink.lease._last_epoch_check = 0.0
    with pytest.raises(LeaseLost):
        sink.upsert("atlas", [doc])
    sink.close()


def _race_child() -> str:
    return r"""
import sys, time, json
sys.path.insert(0, sys.argv[1])
from exporters.lancedb.lease import WriterLease, LeaseHeld
from exporters.lancedb.location import IndexLocation
from exporters.lancedb.store import _connect
from datetime import timedelta
options = json.loads(sys.argv[2])
print("READY", flush=True)
for line in sys.stdin:
    uri, go = line.split()
    db = _connect(IndexLocation(uri, options), reader=False)
    db.list_tables()
    print("SET", flush=True)
    go = float(sys.stdin.readline())
    while time.time() < go:
        pass
    try:
        lease = WriterLease.acquire(db, where=uri, ttl=timedelta(seconds=60), role=sys.argv[3],
                                    reconnect=lambda: IndexLocation(uri, options).connect(reader=True))
        print("WON", lease.epoch, lease._table.version, lease.holder["token"], flush=True)
        sys.stdin.readline()  # hold it until the parent has both answers
        lease.release()
    except LeaseHeld as e:
        print("HELD", flush=True)
        sys.stdin.readline()
"""


def _line(p, *starts: str) -> str:
    seen = []
    while True:
        line = p.stdout.readline()
        assert line, "the child died: " + "".join(seen[-30:])
        seen.append(line)
        if line.startswith(starts):
            return line


def test_two_writer_processes_racing_exactly_one_wins(s3):
    """Two processes list the same empty store and take the lease at the same instant, 8 times:
    exactly one wins each time (a plain ``create_table(mode="create")`` does not guarantee that:
    the loser of the conditional PUT is committed as version 2; the lease checks version 1)."""
    env = {**os.environ, "LANCEDB_LOG": "error"}
    procs = [subprocess.Popen([sys.executable, "-c", _race_child(), str(ROOT), json.dumps(s3.options()), who],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=env) for who in ("a", "b")]
    try:
        for p in procs:
            _line(p, "READY")
        for _ in range(8):
            uri = s3.bucket()
            for p in procs:
                p.stdin.write(f"{uri} x\n")
                p.stdin.flush()
            for p in procs:
                _line(p, "SET")
            go = time.time() + 0.3
            for p in procs:
                p.stdin.write(f"{go}\n")
                p.stdin.flush()
            lines = [_line(p, "WON", "HELD") for p in procs]
            verdicts = sorted(line.split()[0] for line in lines)
            for p in procs:
                p.stdin.write("\n")
                p.stdin.flush()
            assert verdicts == ["HELD", "WON"], (lines, s3.keys(uri))
    finally:
        for p in procs:
            p.stdin.close()
            p.wait(timeout=60)


# --------------------------------------------------------------------------- end to end: real CLI, real model


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LEDGER_INDEXER_", "AWS_"))}
    env["LANCEDB_LOG"] = "error"
    return env


def _wait_ready(proc, base: str, timeout: float = 180) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(base + "/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "serve did not become ready"
        time.sleep(0.3)


def test_writer_syncs_and_a_reader_process_serves_it_with_the_writers_scopes(tmp_path, s3, writer, ledger_path):
    """The writer (the CLI's sync, privacy and project commands) and a reader machine: a separate
    ``ledger-indexer serve`` process with the same ``index.uri``, its own empty folder and no
    ledger. The writer's changes reach the running reader at once; nothing widens."""
    import httpx

    from indexer.service.serve import run_serve
    from tests.s3_server import free_port

    _session_turns(writer, "alpha", 2, "postgres")
    _session_turns(writer, "beta", 2, "postgres")
    uri = s3.bucket()
    port = free_port()
    wcfg = write_config(tmp_path / "w" / "config.toml", uri=uri, options=s3.options(), index_dir=tmp_path / "w" / "ix",
                        ledger=ledger_path)
    rcfg = write_config(tmp_path / "r" / "config.toml", uri=uri, options=s3.options(),
                        index_dir=tmp_path / "r" / "ix", ledger=None, port=port)
    # before the writer has published anything, a reader refuses to start (fail closed)
    with pytest.raises(Failure, match="no scope state is published"):
        run_serve(load_config(rcfg, env={}))
    from exporters.lancedb.reader_cache import ReaderCache

    assert ReaderCache.close_all() == 0  # the refusing reader closed its cache (its thread logged on)
    done = run_cli("--config", str(wcfg), "sync", "--json", check=True)
    assert json.loads(done.stdout)["documents_written"] == 4
    proc = subprocess.Popen([sys.executable, "-m", "indexer.cli", "--config", str(rcfg), "serve"], cwd=ROOT,
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"

    def sessions(**kw) -> set[str]:
        body = {"query": "postgres detail", "persona": "atlas", "max_results": 50, **kw}
        r = httpx.post(base + "/v1/memory_search", json=body, timeout=60)
        assert r.status_code == 200, r.text
        return {x["session"] for x in r.json()["results"]}

    def cli(*args: str) -> None:
        result = run_cli("--config", str(wcfg), *args)
        assert result.returncode == 0, result.stderr

    try:
        _wait_ready(proc, base)
        assert sessions() == {"alpha", "beta"}
        r = httpx.post(base + "/v1/memory_search", json={"query": "postgres detail", "persona": "atlas",
                                                          "session": "beta", "scope": "session"}, timeout=60)
        path = r.json()["results"][0]["path"]
        got = httpx.get(base + "/v1/memory_get", params={"persona": "atlas", "path": path}, timeout=60)
        assert got.status_code == 200 and "postgres" in got.json()["text"]
        # privacy: made on the writer (no daemon: the CLI takes the lock and the lease, publishes, commits)
        cli("session", "visibility", "beta", "private")
        assert sessions() == {"alpha"}
        assert httpx.get(base + "/v1/memory_get", params={"persona": "atlas", "path": path},
                         timeout=60).status_code == 404
        assert sessions(session="beta") == {"alpha", "beta"}  # a private session still sees itself
        # project membership
        cli("project", "add", "p1", "alpha", "beta")
        assert sessions(session="alpha", scope="project") == {"alpha"}  # beta is private: never widened
        cli("session", "visibility", "beta", "shared")
        assert sessions(session="alpha", scope="project") == {"alpha", "beta"}
        cli("project", "remove", "p1", "beta")
        assert sessions(session="alpha", scope="project") == {"alpha"}
        status = httpx.get(base + "/v1/status", timeout=60).json()
        assert status["index"]["uri"] == uri and status["personas"]["atlas"]["chunks"] >= 4
        assert httpx.post(base + "/v1/admin/reindex", json={}, timeout=10).status_code in (403, 409)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert proc.returncode == 0
    assert not (tmp_path / "r" / "ix" / "state.sqlite").exists()  # a reader keeps no state
    report = run_cli("--config", str(rcfg), "status", "--json", check=True)
    assert json.loads(report.stdout)["index"]["uri"] == uri
    # one writer per index across machines: while a writer holds the lease, a writer elsewhere is refused
    other = write_config(tmp_path / "w2" / "config.toml", uri=uri, options=s3.options(),
                         index_dir=tmp_path / "w2" / "ix", ledger=ledger_path)
    held = WriterLease.acquire(_connect(IndexLocation(uri, s3.options()), reader=False), where=uri,
                               ttl=timedelta(seconds=60), role="run", settle_s=0)
    try:
        refused = run_cli("--config", str(other), "sync")
        assert refused.returncode == 1 and "only one writer may use an index" in refused.stderr
    finally:
        held.release()


def test_kill_9_of_the_writer_mid_sync_loses_and_duplicates_nothing(tmp_path, s3, writer, ledger_path):
    for s in range(12):
        _session_turns(writer, f"s{s:02d}", 12, f"topic{s}")  # 144 turns: several write batches
    uri = s3.bucket()
    wcfg = write_config(tmp_path / "w" / "config.toml", uri=uri, options=s3.options(), index_dir=tmp_path / "w" / "ix",
                        ledger=ledger_path)
    rcfg = write_config(tmp_path / "r" / "config.toml", uri=uri, options=s3.options(),
                        index_dir=tmp_path / "r" / "ix", ledger=None)
    loc = IndexLocation(uri, s3.options())
    proc = subprocess.Popen([sys.executable, "-m", "indexer.cli", "--config", str(wcfg), "sync"], cwd=ROOT,
                            env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # killed once its persona table has committed rows: the pass has more batches to write
    deadline = time.monotonic() + 300
    killed = False
    while time.monotonic() < deadline and proc.poll() is None:
        keys = s3.keys(uri)
        # the table's creation and its 7 indexes are versions 1-8, the first batch of rows version 9
        if any("/_active.lance/_versions/" in k for k in keys) and \
                len([k for k in keys if "/mem_" in k and "/_versions/" in k]) >= 9:
            proc.send_signal(signal.SIGKILL)
            killed = True
            break
        time.sleep(0.05)
    proc.wait(timeout=60)
    assert killed, "the sync finished before it could be killed"
    # the last committed version stays readable
    reader = Retriever(loc)
    assert reader.reads is None  # object storage: no local read path (io_uring or threads)
    table = reader.active_table("atlas")
    assert table is not None and table.count_rows() > 0
    committed = {r["path"] for r in table.search().select(["path"]).limit(None).to_list()}
    assert 0 < len(committed) < 144, "the kill did not land mid-sync (documents were still to be written)"
    # no pass ended, so no scope state was published: a reader refuses rather than search unscoped
    from indexer.embedding.factory import make_embedder

    rconf = load_config(rcfg, env={})
    embedder = make_embedder(load_config(wcfg, env={}))
    with pytest.raises(SearchError, match="no scope state is published"):
        Searcher(rconf, embedder=embedder).search(SearchRequest(query="topic7", persona="atlas"))
    # the next sync (same machine and folder: the dead writer's lease is taken over at once) completes
    done = run_cli("--config", str(wcfg), "sync", "--json")
    assert done.returncode == 0, done.stderr
    state = StateDB(tmp_path / "w" / "ix" / "state.sqlite")
    assert state.paths("atlas") == expected_paths(ledger_path, "atlas")
    state.close()
    expected = expected_paths(ledger_path, "atlas")  # the ledger's own document set, by plain SQL
    assert len(expected) == 144
    rows = Retriever(loc).active_table("atlas").search().select(["id", "path"]).limit(None).to_list()
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "duplicated chunks"
    assert {r["path"] for r in rows} == expected, "lost or stale documents"
    found = Searcher(rconf, embedder=embedder).search(SearchRequest(query="topic7 detail", persona="atlas",
                                                                     max_results=20))
    assert "s07" in {r.session for r in found.results}


def test_project_changes_go_through_the_running_writer_daemon_and_name_unknown_labels(tmp_path, s3, writer,
                                                                                          ledger_path):
    """On object storage the one writer makes a project change: with a writer daemon running, the CLI
    asks its admin API, and tells which labels no indexed session has, as it does without a daemon."""
    from tests.s3_server import free_port

    _session_turns(writer, "alpha", 2, "postgres")
    token = tmp_path / "admin.token"
    token.write_text("s3-admin-token\n")
    port = free_port()
    cfg = write_config(tmp_path / "w" / "config.toml", uri=s3.bucket(), options=s3.options(),
                       index_dir=tmp_path / "w" / "ix", ledger=ledger_path,
                       extra={"api": {"port": port, "admin_token_file": str(token)}})
    proc = subprocess.Popen([sys.executable, "-m", "indexer.cli", "--config", str(cfg), "run"], cwd=ROOT,
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_ready(proc, f"http://127.0.0.1:{port}")
        added = run_cli("--config", str(cfg), "project", "add", "p1", "alpha", "not-yet")
        assert added.returncode == 0, added.stderr
        assert added.stdout == "p1: added 2 session(s) (applied by the running daemon)\n"
        assert added.stderr == "note: session 'not-yet' is not indexed yet; it joins 'p1' when it is\n"
        listed = run_cli("--config", str(cfg), "project", "list", "--json", check=True)
        assert json.loads(listed.stdout) == {"projects": {"p1": ["alpha", "not-yet"]}}
        removed = run_cli("--config", str(cfg), "project", "remove", "p1", "not-yet", "never")
        assert removed.returncode == 0, removed.stderr
        assert removed.stdout == "p1: removed 1 session(s) (applied by the running daemon)\n"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert proc.returncode == 0


def test_a_reader_reads_the_scope_state_an_older_writer_published():
    """Readers are upgraded first (README): a format-1 state (before private forks) is read as it is."""
    from exporters.lancedb.published import PersonaScopes, ScopeSnapshot

    snap = ScopeSnapshot({"atlas": PersonaScopes(frozenset({"dm"}), frozenset({"gone"}), None)}, {"p": ("a", "b")})
    rows = snap.rows().to_pylist()
    for row in rows:
        data = json.loads(row["data"])
        if row["kind"] == "meta":
            data.update(format=1, digest=snap.digest(1))
        elif row["kind"] == "persona":
            data.pop("private_turns")
        row["data"] = json.dumps(data)
    read = ScopeSnapshot.from_rows(rows, "test")
    facts = read.facts("atlas", "a")
    assert (facts.private, facts.deleted, facts.project_peers, facts.hidden_turns) == (
        frozenset({"dm"}), frozenset({"gone"}), frozenset({"a", "b"}), frozenset())
    rows[0]["data"] = json.dumps({**json.loads(rows[0]["data"]), "format": 3})
    with pytest.raises(ScopeStateUnavailable, match="unknown format"):
        ScopeSnapshot.from_rows(rows, "test")
