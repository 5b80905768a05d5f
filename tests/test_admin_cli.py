"""Admin CLI: projects and visibility, stored in the state DB, applied at query time."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli_runner import run_cli

ROOT = Path(__file__).resolve().parents[1]


def cli(*args, env=None, stdin=None, check=False):
    return run_cli(*args, env={"LEDGER_INDEXER_INDEX_SINKS": "qmd", **(env or {})}, stdin=stdin, check=check)


def test_projects_and_visibility(tmp_path):
    demo = tmp_path / "demo"
    assert cli("demo", "--dir", str(demo)).returncode == 0
    cfg = str(demo / "ledger-indexer.toml")
    assert cli("--config", cfg, "sync").returncode == 0
    add = cli("--config", cfg, "project", "add", "auth", "main", "worker/auth #2", "not-yet")
    assert add.returncode == 0 and "not indexed yet" in add.stderr
    listed = json.loads(cli("--config", cfg, "project", "list", "--json").stdout)
    assert listed == {"projects": {"auth": ["main", "not-yet", "worker/auth #2"]}}
    assert cli("--config", cfg, "project", "remove", "auth", "not-yet").returncode == 0
    assert json.loads(cli("--config", cfg, "project", "list", "--json").stdout)["projects"]["auth"] == [
        "main", "worker/auth #2"]
    ok = cli("--config", cfg, "session", "visibility", "dm:+1 555/123", "private")
    assert ok.returncode == 0
    unknown = cli("--config", cfg, "session", "visibility", "no-such-session", "private")
    assert unknown.returncode == 1 and "unknown session" in unknown.stderr
    bad = cli("--config", cfg, "session", "visibility", "main", "secret")
    assert bad.returncode == 2


def test_redact_command(tmp_path):
    out = cli("redact", stdin="token ghp_9aF3kLm2Qx7Rt5Vb1Nz8Wc4Yd6Hj0PsUeGiO here\n")
    assert out.returncode == 0 and "ghp_9aF3" not in out.stdout and "REDACTED" in out.stdout
    lines = cli("redact", "--jsonl", stdin=json.dumps({"text": "AKIAZ7QW3ERT5YU8IOPL"}) + "\n")
    record = json.loads(lines.stdout)
    assert "AKIAZ7QW3ERT5YU8IOPL" not in record["text"] and record["findings"][0]["start"] == 0
