"""Smoke tests for the issue 12 benchmarks (bench/noop_pass.py, the memory part of
bench/daemon_bench.py): registration and the reports on hand-made numbers, without
a daemon, a model or a corpus."""

from __future__ import annotations

from bench import daemon_bench as D
from bench import noop_pass as N
from bench.run_all import BENCHES, module_source


def test_run_all_registers_the_noop_pass_benchmark():
    bench = next(b for b in BENCHES if b.name == "noop_pass")
    assert bench.module == "bench.noop_pass" and "--quick" in module_source(bench.module)
    compile(N.CHILD, "<noop child>", "exec")  # the child both versions of the code run


def test_noop_report_puts_before_and_after_side_by_side():
    def variant(wall, cpu):
        return {"wall_p50": wall, "cpu_p50": cpu, "wall_p95": wall * 2, "run_medians": [wall, wall + 1], "n": 10}

    ctx = {"sizes": ["1k", "50k"], "runs": 2, "passes": 5, "baseline": "abc1234", "load_before": "1 / 1 / 1",
           "load_after": "2 / 2 / 2", "timing": {"total": 12.0},
           "corpus": {"1k": {"turns": 1000, "sessions": 10, "documents": 1000},
                      "50k": {"turns": 50000, "sessions": 500, "documents": 50000}},
           "results": {"1k": {"before": variant(6.0, 5.0), "after": variant(3.0, 2.5), "after_full": variant(4, 3)},
                       "50k": {"before": variant(55.0, 30.0), "after": variant(11.0, 3.0),
                               "after_full": variant(12, 10)}}}
    md = N.report(ctx)
    assert "| 1k | 1,000 | 10 | 1,000 | 6.0 / 5.0 | **3.0** / 2.5 | 4.0 / 3.0 | 2.0× | yes |" in md
    assert "| 50k | 50,000 | 500 | 50,000 | 55.0 / 30.0 | **11.0** / 3.0 | 12.0 / 10.0 | 5.0× | **no** |" in md
    assert "`abc1234`" in md


def test_memory_report_states_the_targets_and_every_run():
    def run(variant, r, peak, steady, rps):
        return {"variant": variant, "run": r, "documents": 400, "chunks": 800, "backfill_s": 60.0,
                "backfill_peak_mb": peak, "hwm_after_backfill_mb": peak, "rss_after_queries_mb": steady + 50,
                "steady_rss_mb": steady, "queries": {"rps": rps, "daemon_cpu_pct": 150.0},
                "metrics": {"trims": 4, "trim_seconds_sum": 0.01, "trim_released_mb": 120.0},
                "load_before": [1.0, 1.0, 1.0], "rss_queries_quarters_mb": [steady + 10, steady + 20]}

    summary = {
        "before": {"backfill_peak_mb": 1500, "hwm_after_backfill_mb": 1510, "rss_after_backfill_mb": 1400,
                   "rss_after_queries_mb": 1450, "steady_rss_mb": 1440, "metrics_rss_mb": 1440,
                   "metrics_peak_mb": 1510, "docs_per_s": 7.0, "rps": 30.0, "p50": 120, "p95": 200,
                   "daemon_cpu_pct": 190},
        "after": {"backfill_peak_mb": 700, "hwm_after_backfill_mb": 710, "rss_after_backfill_mb": 380,
                  "rss_after_queries_mb": 420, "steady_rss_mb": 350, "metrics_rss_mb": 351, "metrics_peak_mb": 710,
                  "docs_per_s": 6.5, "rps": 38.0, "p50": 95, "p95": 160, "daemon_cpu_pct": 150},
    }
    mem = {"size": "100k", "corpus": {"chunks": 100000}, "summary": summary,
           "params": {"memory_turns": 400, "memory_requests": 600, "memory_idle_s": 75, "memory_runs": 1,
                      "clients": 4},
           "runs": [run("before", 0, 1500, 1440, 30.0), run("after", 0, 700, 350, 38.0)]}
    md = D.memory_report(mem)
    assert "**After: peak 710 MB during the backfill (target ≤ 1024 MB: met), steady 350 MB" in md
    assert "(target ≤ 400 MB: met)" in md
    assert "| after (defaults) | 700 | 710 | 380 | 420 | **350** | 351 / 710 |" in md
    assert md.count("| before | 0 |") == 1 and md.count("| after | 0 |") == 1
    assert "| after | 0 | 60 | 700 | 400 | 360 / 370 | 350 | 38.0 |" in md


def test_quarter_maxima_shows_whether_rss_levels_off_through_a_soak():
    series = [[0.0, 300.0], [2.0, 320.0], [4.0, 310.0], [6.0, 330.0], [8.0, 329.0]]
    # quarters of the 8 s: [0, 2), [2, 4), [4, 6), [6, 8] (the last sample falls in the last)
    assert D.quarter_maxima(series) == [300.0, 320.0, 310.0, 330.0]
    assert D.quarter_maxima([[0.0, 5.0], [10.0, 7.0]]) == [5.0, 7.0]
    assert D.quarter_maxima([]) == []


def test_embed_memory_report_states_what_the_arena_keeps():
    from bench import embed_memory as E

    assert next(b for b in BENCHES if b.name == "embed_memory").module == "bench.embed_memory"
    compile(E.CHILD, "<embed child>", "exec")

    def m(after, cpu):
        return {"loaded_mb": 230.0, "peak_mb": 400.0, "after_mb": after, "texts_per_s": 5.0, "texts_per_cpu_s": cpu,
                "batches": 20, "largest_batch_tokens": 2048}

    ctx = {"runs": 1, "texts": 60, "load_before": "1", "load_after": "1", "timing": {"total": 1.0},
           "summary": {"before": m(850.0, 8.0), "arena_kept": m(400.0, 14.0), "after": m(235.0, 12.0),
                       "no_arena": m(234.0, 9.6)}}
    md = E.report(ctx)
    assert "The arena kept for good: 165 MB at 2048 tokens a batch, 615 MB with batches of 32 by count" in md
    assert "1.25× the texts per CPU second of no arena" in md
    assert "| **after (defaults)** | 230 | 400 | **235** | +5 | 2,048 | 20 | 5.0 | 12.0 |" in md
