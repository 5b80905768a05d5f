"""Smoke tests for bench/daemon_bench.py: the arithmetic and the report, without a daemon or a model.

The benchmark itself (a daemon subprocess, the real model) is run by
``python -m bench.daemon_bench [--quick]``; here its pure parts are checked
on hand-made numbers so that a broken split, sample or table cannot slip by.
"""

from __future__ import annotations

import os
import time

import pytest

from bench import daemon_bench as D
from bench.run_all import BENCHES, module_source


def test_run_all_knows_the_module_and_passes_quick():
    bench = next(b for b in BENCHES if b.name == "daemon")
    assert bench.module == "bench.daemon_bench"
    assert "--quick" in module_source(bench.module)


def test_attribute_splits_a_delay_with_the_pass_that_wrote_the_turn():
    appends = [
        {"found": True, "commit_wall": 100.0, "found_wall": 100.30, "delay_s": 0.30},
        {"found": True, "commit_wall": 200.0, "found_wall": 200.50, "delay_s": 0.50},
        {"found": False, "commit_wall": 300.0},
        # searchable before its pass ended (LanceDB commit, then the state DB): "seen" is negative
        {"found": True, "commit_wall": 400.0, "found_wall": 400.10, "delay_s": 0.10},
    ]
    syncs = [
        {"ts": 99.0, "seconds": 0.05, "documents_written": 3},  # before the commit: not it
        {"ts": 100.25, "seconds": 0.10, "documents_written": 1},  # wrote append 0: started at 100.15
        {"ts": 100.27, "seconds": 0.01, "documents_written": 0},  # an empty pass: never counted
        {"ts": 200.45, "seconds": 0.20, "documents_written": 1},
        {"ts": 400.16, "seconds": 0.13, "documents_written": 1},
        {"ts": 401.0, "seconds": 0.05, "documents_written": 1},  # a later pass: not it
    ]
    D.attribute(appends, syncs)
    a, b, c, e = appends
    assert a["pass_s"] == pytest.approx(0.10)
    assert a["wake_s"] == pytest.approx(0.15)
    assert a["seen_s"] == pytest.approx(0.05)
    assert a["wake_s"] + a["pass_s"] + a["seen_s"] == pytest.approx(a["delay_s"])
    assert b["wake_s"] == pytest.approx(0.25) and b["seen_s"] == pytest.approx(0.05)
    assert "pass_s" not in c
    assert e["pass_s"] == pytest.approx(0.13) and e["wake_s"] == pytest.approx(0.03)
    assert e["seen_s"] == pytest.approx(-0.06)


def test_proc_sample_reads_cpu_and_memory_of_a_process():
    s0 = D.proc_sample(os.getpid())
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:  # burn a little CPU
        pass
    s1 = D.proc_sample(os.getpid())
    assert s1["cpu"] >= s0["cpu"] + 0.02
    assert s0["rss_kb"] > 1000 and s0["hwm_kb"] >= s0["rss_kb"] and s0["threads"] >= 1


class _FakeDaemon:
    def __init__(self):
        self.pid = os.getpid()
        self.started_wall = time.time()

    def events(self, name):
        assert name == "sync.done"
        now = time.time()
        return [{"ts": self.started_wall - 100, "seconds": 0.01},  # outside the window
                {"ts": now - 0.3, "seconds": 0.05}]


def test_idle_cost_on_this_process(monkeypatch):
    monkeypatch.setattr(D, "SAMPLE_S", 0.2)
    res = D.idle_cost(_FakeDaemon(), 1.0, "self")
    assert res["seconds"] == pytest.approx(1.0, abs=0.2)
    assert 0 <= res["cpu_pct"] < 100
    assert res["syncs"] == 1 and res["sync_seconds"] == [0.05]
    assert res["pass_intervals"] >= 1
    assert res["rss_peak_mb"] >= max(res["rss_start_mb"], res["rss_end_mb"]) - 1e-9


def test_request_bodies_alternate_scopes_and_are_valid_api_bodies():
    from indexer.service.api.models import SearchRequestBody

    info = {"sessions": 100}
    bodies = D.request_bodies(info, ["what did Ann adopt?", "where is Lisbon?", "cello?"], 7, 1)
    assert len(bodies) == 7
    assert [b["scope"] for b in bodies[:4]] == ["session", "project", "session", "project"]
    from bench.latency import PROJECT_SESSIONS, session_labels

    project = set(session_labels(100)[:PROJECT_SESSIONS])
    for body in bodies:
        SearchRequestBody.model_validate(body)
        assert body["mode"] == "hybrid" and body["max_results"] == 6
        if body["scope"] == "project":
            assert body["session"] in project


def _ctx():
    appends = [{"found": True, "delay_s": 0.1 + i / 100, "wake_s": 0.03, "pass_s": 0.06 + i / 100, "seen_s": 0.01}
               for i in range(5)] + [{"found": False}]
    idle = {"label": "freshness", "seconds": 60.0, "cpu_s": 0.6, "cpu_pct": 1.0, "rss_start_mb": 700.0,
            "rss_end_mb": 701.0, "rss_peak_mb": 702.0, "hwm_mb": 720.0, "threads": 18, "syncs": 2,
            "sync_seconds": [0.004, 0.005], "pass_cpu_s": 0.1, "pass_intervals": 2, "cpu_pct_without_passes": 0.8}
    run = {"clients": 1, "ok": 10, "rps": 20.0, "p50": 30.0, "p95": 40.0, "p99": 50.0, "max": 60.0,
           "took_p50": 25.0, "daemon_cpu_pct": 90.0, "errors": 0,
           "scopes": {s: {"n": 5, "p50": 30.0, "p95": 40.0, "p99": 50.0} for s in ("session", "project")}}
    return {
        "freshness": {"appends": appends, "seed_turns": 300, "sessions": 10, "documents_after_backfill": 300,
                      "backfill_s": 20.0, "poll_ms": 20.0, "debounce_ms": 200, "interval_s": 30.0,
                      "load_before": [1.0, 1.0, 1.0], "load_after": [1.0, 1.0, 1.0], "idle": idle,
                      "rss_after_backfill_kb": 900_000, "rss_after_appends_kb": 910_000},
        "embed_alone": {"p50_ms": 20.0, "p95_ms": 30.0, "n": 20},
        "load": {"size": "100k", "corpus": {"turns": 100_000, "sessions": 1000, "chunks": 100_000},
                 "baseline": run, "concurrent": dict(run, clients=4), "ready_s": 5.0, "rss_after_ready_kb": 400_000,
                 "rss_after_load_kb": 500_000, "hwm_after_load_kb": 510_000, "load_before": [2.0],
                 "load_after": [2.0], "idle": dict(idle, label="load-100k", syncs=0, sync_seconds=[])},
        "timing": {"total": 10.0},
    }


def test_report_renders_every_section():
    md = D.report(_ctx())
    assert md.startswith("## Daemon")
    assert "| commit → found (total) | 5 | 120 |" in md
    assert "1 not found" in md and "meets the p50 ≤ 1 s" in md and "879 MB after the backfill" in md
    assert "| sync pass that wrote the turn | 5 | 80 |" in md
    assert "### API under load (100,000 chunks)" in md and "| 4 clients | 10 | 20.0 |" in md
    assert "### Idle cost" in md and "| 2 (4, 5 ms) |" in md and "| 0 |" in md


def test_an_unknown_memory_variant_is_a_usage_error_naming_the_choices(capsys):
    with pytest.raises(SystemExit) as exc:
        D.main(["--only", "memory", "--memory-variants", "after,bogus"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "unknown memory variant(s) ['bogus']" in err and "after_no_rank_cache" in err
