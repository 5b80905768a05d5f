"""bench/RESULTS.md is rendered from the checked-in records (bench/results/*.md), never edited by hand:
the render is deterministic, the file in the repo is that render, every record follows the format,
and a benchmark's run (bench/out/<name>.json) becomes its record."""

from __future__ import annotations

import json
import shutil

import pytest

from bench import common, records, run_all


def test_the_render_is_deterministic_and_reads_only_the_records(tmp_path):
    first = records.render(records.load_all(), run_all.ORDER)
    copy = tmp_path / "results"
    shutil.copytree(records.RESULTS_DIR, copy)
    assert records.render(records.load_all(copy), run_all.ORDER) == first
    assert records.render(records.load_all(copy), tuple(reversed(run_all.ORDER))) != first  # the order is the ORDER


def test_results_md_in_the_repo_is_the_render_of_the_records():
    rendered = records.render(records.load_all(), run_all.ORDER)
    assert records.RESULTS_MD.read_text(encoding="utf-8") == rendered, (
        "bench/RESULTS.md differs from the render of bench/results/*.md: change the record (bench/README.md), "
        "then run `python -m bench.run_all --render-only`")


def test_every_benchmark_with_a_section_has_one_table_and_its_run():
    recs = records.load_all()
    assert set(run_all.ORDER) - {"embed_memory"} <= set(recs), "a benchmark lost its record"
    for name, rec in recs.items():
        assert rec.table.rows, name
        assert all(len(row) == len(rec.table.header) for row in rec.table.rows), name
        assert rec.date[:4].isdigit() and "python -m bench." in rec.command, name
        for row in rec.summary:
            assert len(row) == len(records.SUMMARY_HEADER) and row[4][:4].isdigit(), (name, row)


def test_a_record_with_prose_or_two_tables_is_refused(tmp_path):
    good = (records.RESULTS_DIR / "noop_pass.md").read_text(encoding="utf-8")
    (tmp_path / "x.md").write_text(good.replace("\n| size |", "\nA story of the run.\n\n| size |", 1))
    with pytest.raises(records.RecordError, match="exactly one markdown table"):
        records.parse(tmp_path / "x.md")
    (tmp_path / "y.md").write_text(good.replace("title:", "titel:", 1))
    with pytest.raises(records.RecordError, match="front matter"):
        records.parse(tmp_path / "y.md")


def test_a_record_survives_writing_and_reading_unchanged(tmp_path):
    for rec in records.load_all().values():
        records.write(rec, tmp_path)
        assert records.parse(tmp_path / f"{rec.name}.md") == rec


def _recurring_run(tmp_path, monkeypatch, quick: bool):
    monkeypatch.setattr(common, "OUT", tmp_path / "out")
    monkeypatch.setenv("BENCH_QUICK", "1" if quick else "0")
    monkeypatch.setattr("sys.argv", ["/x/bench/recurring_cost.py", "--runs", "2"])
    med = {f"{step}|{v}": {"wall": w, "cpu": w, "n": 2} for step, w in (("backfill", 900.0), ("tail, warm", 30.0),
                                                                          ("tail after a restart", 300.0))
           for v in ("memory", "plain")}
    result = {"planted": 80, "turns": 4000, "long": 2000, "medians": med, "left": {"memory": 0, "plain": 80}}
    md = "## Recurring\n\nSome words.\n\n| pass | with | without |\n| :--- | ---: | ---: |\n| backfill | 900 | 900 |\n"
    common.write_outputs("recurring_cost", md, {"result": result})


def test_a_run_becomes_its_record_with_its_summary_rows(tmp_path, monkeypatch):
    _recurring_run(tmp_path, monkeypatch, quick=False)
    report = json.loads((tmp_path / "out" / "recurring_cost.json").read_text())["_report"]
    assert report["command"] == "python -m bench.recurring_cost --runs 2" and not report["quick"]
    results = tmp_path / "results"
    results.mkdir()
    shutil.copy(records.RESULTS_DIR / "recurring_cost.md", results)
    path = run_all.record_from_out("recurring_cost", out=tmp_path / "out", results=results)
    rec = records.parse(path)
    assert rec.command == report["command"] and rec.date == report["date"] and rec.load == report["load"]
    assert rec.title == records.parse(records.RESULTS_DIR / "recurring_cost.md").title  # kept from the old record
    assert rec.table.rows == (("backfill", "900", "900"),)
    assert rec.summary[0][1:4] == ("0 / 80", "0", "yes") and rec.summary[0][4] == report["date"][:10]
    # recorded once: the same run again changes nothing
    assert run_all.record_from_out("recurring_cost", out=tmp_path / "out", results=results) is None


def test_a_quick_run_is_never_recorded(tmp_path, monkeypatch):
    _recurring_run(tmp_path, monkeypatch, quick=True)
    results = tmp_path / "results"
    assert run_all.record_from_out("recurring_cost", out=tmp_path / "out", results=results) is None
    assert not results.exists()
