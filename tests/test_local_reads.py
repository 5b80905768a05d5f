"""How a searcher reads a local index (exporters/lancedb/local_reads.py): io_uring where the
kernel allows it, lance's threads otherwise. The same answers either way (through writes, a
compaction and a rebuild), the ring really used (its file descriptors, in a fresh process),
nothing made in the working directory, the probe's verdict obeyed, and a failing io_uring open
falling back under ``auto`` but never under ``io_uring``. Real LanceDB; the fake embedder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from fake_embedder import FakeEmbedder
from structlog.testing import capture_logs

from exporters.lancedb import LanceSink, Retriever, local_reads
from exporters.lancedb.local_reads import IoUringUnavailable, LocalReads
from exporters.lancedb.location import IndexLocation
from indexer.core.scopes import Scope, ScopeFacts, resolve
from indexer.runtime.config import ConfigError, load_config
from tests.builders import document

ROOT = Path(__file__).resolve().parents[1]
RING = local_reads.io_uring_status() == "ok"
needs_ring = pytest.mark.skipif(not RING, reason=f"io_uring unavailable here: {local_reads.io_uring_status()}")
QUERIES = ["kafka budgets", "apples and pears", "rockets deploys", "yoga guitars hiking"]
WORDS = "apples pears rockets kernels deploys invoices hiking postgres kafka budgets yoga guitars".split()


def turn(i: int, text: str | None = None):
    ws = [WORDS[(i * 5 + k) % len(WORDS)] for k in range(3)]
    return document(text or f"User: note {i} about {' and '.join(ws)}\nAssistant: noted {ws[0]} {i}",
                    persona="atlas", session=f"s{i % 4}", turn=f"t{i}", timestamp_ms=1_700_000_000_000 + i)


def sink_at(db: Path) -> LanceSink:
    return LanceSink(db, FakeEmbedder(), vector_index_rows=None, retire_grace=timedelta(0))


def reader(db: Path, reads: LocalReads) -> Retriever:
    return Retriever(IndexLocation(str(db), local_reads=reads), rank_cache_bytes=0)


def answers(retriever: Retriever) -> list:
    """Every query's vector and keyword candidates with their detail columns, as the searcher reads them."""
    facts = ScopeFacts(private=frozenset(), deleted=frozenset(), project_peers=frozenset())
    where = Retriever.where(resolve("atlas", Scope.PERSONA, None, frozenset({"sessions", "memory"}), facts))
    table = retriever.active_table("atlas")
    cols = retriever.rank_columns(table)
    out = []
    for q in QUERIES:
        near = retriever.nearest(table, np.asarray(FakeEmbedder().embed_query(q), np.float32), where, 20, cols)
        hits, vecs = retriever.matching(table, q, where, 20, cols, with_vectors=True)
        retriever.details(table, near[:5] + hits[:5])
        out.append(([{k: v for k, v in r.items() if k != "_rowid"} for r in near + hits],
                    None if vecs is None else vecs.round(6).tolist()))
    return out


# --------------------------------------------------------------------------- the choice


def test_threads_is_always_threads_and_auto_follows_the_probe(monkeypatch) -> None:
    assert local_reads.resolve("threads") is LocalReads.THREADS
    assert local_reads.resolve(LocalReads.AUTO) is (LocalReads.IO_URING if RING else LocalReads.THREADS)
    monkeypatch.setattr(local_reads, "io_uring_status", lambda: "io_uring_setup failed: EPERM (Operation not permitted)")
    assert local_reads.resolve("auto") is LocalReads.THREADS
    with pytest.raises(IoUringUnavailable) as err:
        local_reads.resolve("io_uring")
    assert str(err.value) == ('[index] local_reads = "io_uring", but io_uring_setup failed: EPERM (Operation not '
                              'permitted): set local_reads = "auto" or "threads"')


def test_the_probe_gives_ok_or_a_reason_and_the_location_names_the_table(tmp_path: Path) -> None:
    status = local_reads.io_uring_status()
    assert status == "ok" or status.startswith(("io_uring_setup failed: ", "io_uring is Linux-only", "cannot call"))
    assert local_reads.table_location(tmp_path, "t_g1") == f"file+uring://{tmp_path}/t_g1.lance"


def test_the_config_key_takes_three_values(tmp_path: Path) -> None:
    for value in ("auto", "io_uring", "threads"):
        config = load_config(None, env={}, overrides={"index": {"dir": str(tmp_path), "local_reads": value}})
        assert IndexLocation.from_config(config).local_reads is LocalReads(value)
    assert load_config(None, env={}, overrides={"index": {"dir": str(tmp_path)}}).index.local_reads == "auto"
    with pytest.raises(ConfigError) as err:
        load_config(None, env={}, overrides={"index": {"dir": str(tmp_path), "local_reads": "mmap"}})
    assert str(err.value) == ("invalid config: index.local_reads: Input should be 'auto', 'io_uring' or 'threads' "
                              "(got 'mmap')")


# --------------------------------------------------------------------------- the same answers


@needs_ring
def test_io_uring_and_threads_give_the_same_answers_through_writes_compaction_and_a_rebuild(tmp_path: Path) -> None:
    db = tmp_path / "db"
    sink = sink_at(db)
    sink.upsert("atlas", [turn(i) for i in range(60)])
    ring, threads = reader(db, LocalReads.IO_URING), reader(db, LocalReads.THREADS)
    assert (ring.reads, threads.reads) == (LocalReads.IO_URING, LocalReads.THREADS)
    first = answers(ring)
    assert first == answers(threads) and any(rows for rows, _ in first)
    # a write after the tables were opened: both see it at once (read_consistency_interval 0)
    sink.upsert("atlas", [turn(i, f"User: zeppelin kafka budgets {i}\nAssistant: zeppelin") for i in range(0, 60, 6)])
    sink.delete("atlas", [turn(i).path for i in range(1, 60, 7)])
    after_writes = answers(ring)
    assert after_writes == answers(threads) and after_writes != first
    assert any("zeppelin" in (r.get("text") or "") for rows, _ in after_writes for r in rows)
    sink.maintain(force=True)  # compaction moves every row
    assert answers(ring) == answers(threads)
    table_before = ring.active_table("atlas").name
    with sink.rebuild("atlas") as rebuild:  # a new table, swapped in on commit
        rebuild.upsert([turn(i, f"User: rebuilt {i} kafka yoga\nAssistant: rebuilt") for i in range(30)])
    assert ring.active_table("atlas").name != table_before
    assert ring.active_table("atlas")._location.startswith("file+uring://")
    rebuilt = answers(ring)
    assert rebuilt == answers(threads) and any("rebuilt" in (r.get("text") or "") for rows, _ in rebuilt for r in rows)
    sink.close()


_CHILD = """
import json, os, sys
sys.path.insert(0, {root!r})
from exporters.lancedb import Retriever
from exporters.lancedb.local_reads import LocalReads
from exporters.lancedb.location import IndexLocation
r = Retriever(IndexLocation({db!r}, local_reads=LocalReads({mode!r})))
t = r.active_table("atlas")
rows = t.search().select(["id", "text"]).limit(None).to_list()
rings = [fd for fd in os.listdir("/proc/self/fd")
         if os.path.exists(f"/proc/self/fd/{{fd}}") and "io_uring" in os.readlink(f"/proc/self/fd/{{fd}}")]
masks = sorted({{line.split()[1] for fd in rings for line in open(f"/proc/self/fdinfo/{{fd}}")
                if line.startswith("SqMask:")}})
print(json.dumps({{"reads": r.reads.value, "rows": len(rows), "rings": len(rings), "sq_masks": masks,
                  "cwd": sorted(os.listdir("."))}}))
"""


def _child(db: Path, mode: str, cwd: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANCE_URING_")} | {"PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", _CHILD.format(root=str(ROOT), db=str(db), mode=mode)], cwd=cwd,
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@needs_ring
def test_a_fresh_reader_reads_through_a_ring_only_when_chosen_and_makes_nothing_in_the_working_dir(
        tmp_path: Path) -> None:
    db = tmp_path / "db"
    sink = sink_at(db)
    sink.upsert("atlas", [turn(i) for i in range(40)])
    sink.close()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    ring = _child(db, "io_uring", cwd)
    threads = _child(db, "threads", cwd)
    assert ring["reads"] == "io_uring" and ring["rings"] >= 1 and ring["rows"] == 40
    assert ring["sq_masks"] == ["0x3ff"]  # rings of RING_ENTRIES (1024), not lance's 16,384
    assert threads == {"reads": "threads", "rows": 40, "rings": 0, "sq_masks": [], "cwd": []}
    # a connection URI of this scheme would have made `file+uring:/…` here (lancedb's mkdir)
    assert ring["cwd"] == []


# --------------------------------------------------------------------------- a failing io_uring open


def _failing_location_open(monkeypatch) -> list[str]:
    from lancedb.table import LanceTable

    real = LanceTable.open.__func__
    tried: list[str] = []

    def open_(cls, db, name, **kw):
        if kw.get("location"):
            tried.append(kw["location"])
            raise OSError("io_uring: operation not permitted (simulated)")
        return real(cls, db, name, **kw)

    monkeypatch.setattr(LanceTable, "open", classmethod(open_))
    monkeypatch.setattr(local_reads, "io_uring_status", lambda: "ok")
    return tried


def test_under_auto_a_failing_io_uring_open_falls_back_to_threads_and_says_so(tmp_path: Path, monkeypatch) -> None:
    db = tmp_path / "db"
    sink = sink_at(db)
    sink.upsert("atlas", [turn(i) for i in range(20)])
    tried = _failing_location_open(monkeypatch)
    auto = reader(db, LocalReads.AUTO)
    assert auto.reads is LocalReads.IO_URING
    expected = answers(reader(db, LocalReads.THREADS))
    with capture_logs() as logs:
        assert answers(auto) == expected
    assert len(tried) == 1 and auto.reads is LocalReads.THREADS
    assert [(e["event"], e["table"]) for e in logs if e["log_level"] == "warning"] == [
        ("lancedb.io_uring_failed", auto.active_table("atlas").name)]
    sink.close()


def test_under_io_uring_a_failing_open_is_an_error_not_a_fallback(tmp_path: Path, monkeypatch) -> None:
    from exporters.base import SinkError

    db = tmp_path / "db"
    sink = sink_at(db)
    sink.upsert("atlas", [turn(i) for i in range(5)])
    _failing_location_open(monkeypatch)
    required = reader(db, LocalReads.IO_URING)
    with pytest.raises(SinkError) as err:
        required.active_table("atlas")
    assert "cannot be opened" in str(err.value) and "simulated" in str(err.value)
    assert required.reads is LocalReads.IO_URING
    sink.close()


def test_a_table_that_cannot_be_opened_at_all_keeps_io_uring_for_the_next(tmp_path: Path, monkeypatch) -> None:
    from exporters.base import SinkError

    db = tmp_path / "db"
    sink = sink_at(db)
    sink.upsert("atlas", [turn(i) for i in range(5)])
    name = sink.table_stats("atlas").table
    sink.close()
    if not RING:
        monkeypatch.setattr(local_reads, "io_uring_status", lambda: "ok")
    auto = reader(db, LocalReads.AUTO)
    import shutil

    shutil.rmtree(db / f"{name}.lance")
    with pytest.raises(SinkError):
        auto.active_table("atlas")
    assert auto.reads is LocalReads.IO_URING  # a missing table says nothing about io_uring


def test_required_io_uring_where_it_is_unavailable_is_one_clear_cli_line(tmp_path: Path, monkeypatch) -> None:
    from tests.cli_runner import run_cli
    from tests.demo_index import build_demo_index
    from tests.test_cli_errors import one_line_error

    build_demo_index(tmp_path).close()
    monkeypatch.setattr(local_reads, "io_uring_status", lambda: "io_uring_setup failed: EPERM (Operation not permitted)")
    config = str(tmp_path / "demo" / "ledger-indexer.toml")
    env = {"LEDGER_INDEXER_INDEX_LOCAL_READS": "io_uring"}
    line = one_line_error(run_cli("--config", config, "search", "jwt expiry", "--persona", "atlas", env=env), 2)
    assert 'local_reads = "io_uring", but io_uring_setup failed: EPERM' in line and '"threads"' in line
    # auto on the same machine: read with lance's threads, and answered
    ok = run_cli("--config", config, "search", "jwt expiry", "--persona", "atlas", env={})
    assert ok.returncode == 0 and "jwt" in ok.stdout.lower(), ok.stderr
