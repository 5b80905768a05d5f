"""bench/recurring_cost.py end to end on a tiny ledger (real redactor, real QMD exporter files, no
model): both variants run, and the report says how many stored documents still hold a planted
value — none with the session memory, every bare repeat without it."""

from __future__ import annotations

from bench import recurring_cost as R
from bench.run_all import BENCHES, module_source


def test_the_benchmark_is_registered():
    bench = next(b for b in BENCHES if b.name == "recurring_cost")
    assert "--quick" in module_source(bench.module)


def test_a_tiny_run_reports_both_variants_and_what_each_left(tmp_path, monkeypatch):
    monkeypatch.setattr(R, "OUT", tmp_path)
    result = R.run(runs=2, sessions=2, turns=60, long_turns=60)
    assert result["planted"] == 3 and result["left"] == {"memory": 0, "plain": 3}
    assert set(result["medians"]) == {f"{step}|{v}" for step in ("backfill", "tail, warm", "tail after a restart")
                                      for v in ("memory", "plain")}
    md = R.report({"result": result, "timing": {"total": 1.0}})
    assert "still holding a planted value after the backfill: **0** with the memory, 3 without" in md
    assert not (tmp_path / "recurring-work").exists()


def test_the_summary_row_is_met_only_when_no_document_holds_a_value():
    import bench.summary as S

    med = {f"{step}|{v}": {"wall": w, "cpu": w, "n": 2} for step, w in (("backfill", 900.0), ("tail, warm", 30.0),
                                                                          ("tail after a restart", 300.0))
           for v in ("memory", "plain")}
    result = {"planted": 80, "turns": 4000, "long": 2000, "medians": med, "left": {"memory": 0, "plain": 80}}
    assert S.rows_for("recurring_cost", {"result": result})[0][1:] == ("0 / 80", "0", "yes")
    rows = S.rows_for("recurring_cost", {"result": {**result, "left": {"memory": 2, "plain": 80}}})
    assert rows[0][1:] == ("2 / 80", "0", "**no**")
    assert rows[1][1:] == ("900 vs 900 ms / 30 vs 30 ms / 300 vs 300 ms", "report", "–")
