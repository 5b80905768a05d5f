"""`ledger-indexer config check`: one line per check, exit 1 when any fails, reads only."""

from __future__ import annotations

import json

from tests.cli_runner import run_cli


def test_the_demo_config_passes_every_check(tmp_path):
    assert run_cli("demo", "--dir", str(tmp_path / "demo")).returncode == 0
    cfg = tmp_path / "demo" / "ledger-indexer.toml"
    result = run_cli("--config", str(cfg), "config", "check", "--json")
    report = json.loads(result.stdout)
    assert result.returncode == 0 and report["ok"] is True
    assert [c["name"] for c in report["checks"]] == ["ledger", "index dir", "model", "admin token", "qmd",
                                                      "memory atlas"]
    assert not (tmp_path / "demo" / "index").exists()  # nothing created


def test_a_broken_config_names_each_failure(tmp_path):
    not_a_ledger = tmp_path / "agents.db"
    not_a_ledger.write_text("plain text, not SQLite")
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    empty_token = tmp_path / "admin.token"
    empty_token.write_text("\n")
    cfg = tmp_path / "c.toml"
    cfg.write_text(f"""[ledger]
path = "{not_a_ledger}"
[index]
dir = "{blocker / 'index'}"
sinks = ["lancedb", "qmd"]
[qmd]
update_command = ["no-such-qmd-binary", "update"]
[api]
admin_token_file = "{empty_token}"
[memory]
atlas = ["{tmp_path / 'MEMORY.md'}"]
""")
    result = run_cli("--config", str(cfg), "config", "check")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    failed = {line.split(":")[0].removeprefix("FAIL").strip() for line in lines if line.startswith("FAIL")}
    assert failed == {"ledger", "index dir", "admin token", "qmd", "memory atlas"}
    assert any(line.startswith("ok    model:") for line in lines)
    assert "Traceback" not in result.stderr
