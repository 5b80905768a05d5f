"""The CLI end to end: demo ledger, sync --json, exit codes, QMD search of the export."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.cli_runner import run_cli
from tests.qmd_tool import QmdCli

ROOT = Path(__file__).resolve().parents[1]


cli = run_cli


def test_demo_then_sync_json_then_qmd_finds_the_turn(tmp_path):
    demo = tmp_path / "demo"
    assert cli("demo", "--dir", str(demo)).returncode == 0
    config = str(demo / "ledger-indexer.toml")
    env = {"LEDGER_INDEXER_INDEX_SINKS": "qmd"}
    first = cli("--config", config, "sync", "--json", env=env, check=True)
    summary = json.loads(first.stdout)
    for key in ("documents_written", "documents_unchanged", "documents_skipped_bad", "cursor", "seconds"):
        assert key in summary
    assert summary["documents_written"] > 15 and set(summary["cursor"]) == {"atlas", "nova", "sage"}
    second = json.loads(cli("--config", config, "sync", "--json", env=env, check=True).stdout)
    assert second["documents_written"] == 0
    assert second["cursor"] == summary["cursor"]
    export = demo / "index" / "qmd"
    blob = b"".join(p.read_bytes() for p in export.rglob("*.md"))
    assert b"private reasoning" not in blob and b"You are a helpful" not in blob
    qmd = QmdCli(tmp_path / "qmd-home")
    qmd.collection_add(export, "mem")
    hits = qmd.search_json("PgBouncer", n=5)
    assert hits and any("/atlas/sessions/main/turns/" in h["file"] for h in hits)


def test_config_errors_exit_2_with_the_key(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[api]\nport = 'x'\n")
    proc = cli("--config", str(bad), "sync")
    assert proc.returncode == 2 and "api.port" in proc.stderr
    proc = cli("--config", str(tmp_path / "missing.toml"), "sync")
    assert proc.returncode == 2 and "not found" in proc.stderr


def test_missing_ledger_exits_1_with_what_to_do(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[ledger]\npath = "{tmp_path}/nope.db"\n[index]\ndir = "{tmp_path}/idx"\nsinks = ["qmd"]\n')
    proc = cli("--config", str(cfg), "sync")
    assert proc.returncode == 1 and "ledger not found" in proc.stderr and "LEDGER_INDEXER_LEDGER_PATH" in proc.stderr


def test_second_writer_is_refused(tmp_path):
    from indexer.state.lock import acquire

    demo = tmp_path / "demo"
    cli("demo", "--dir", str(demo), check=True)
    (demo / "index").mkdir()
    with acquire(demo / "index", "run"):
        proc = cli("--config", str(demo / "ledger-indexer.toml"), "sync", env={"LEDGER_INDEXER_INDEX_SINKS": "qmd"})
    assert proc.returncode == 1 and str(os.getpid()) in proc.stderr


def test_status_lists_bad_turns_and_sync_retry_bad_builds_them(tmp_path):
    from ledger.writer import LedgerWriter

    ledger = tmp_path / "agents.db"
    with LedgerWriter(ledger, seed=31) as w:
        w.turn("fine", user="a fine turn", assistant="ok")
        broken = w.turn("flaky", user="the broken one", assistant="ok")
        w.execute("UPDATE threads SET ancestry='[nope' WHERE turn_id=?", (broken,))
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[ledger]\npath = "{ledger}"\n[index]\ndir = "{tmp_path}/idx"\nsinks = ["qmd"]\n')
    cli("--config", str(cfg), "sync", check=True)
    text = cli("--config", str(cfg), "status", check=True).stdout
    assert "1 bad rows skipped" in text and f"bad: session 'flaky' turn {broken}: bad_ancestry" in text
    assert "sync --retry-bad" in text
    report = json.loads(cli("--config", str(cfg), "status", "--json", check=True).stdout)
    [bad] = report["personas"]["atlas"]["bad_turns"]
    assert (bad["session"], bad["turn_id"], bad["reason"]) == ("flaky", broken, "bad_ancestry")
    assert "JSON array" in bad["detail"]
    retried = json.loads(cli("--config", str(cfg), "sync", "--retry-bad", "--json", check=True).stdout)
    assert retried["personas"]["atlas"]["bad_retried"] == 1  # still broken: retried, still listed
    assert json.loads(cli("--config", str(cfg), "status", "--json", check=True).stdout)[
        "personas"]["atlas"]["bad_rows_skipped"] == 1
