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


def test_the_files_a_run_would_read_later_are_checked_now(tmp_path):
    """What used to pass the check and fail at run or sync: the MCP token file, the known-secrets
    file, a ledger of another schema, a model that is not the packaged one."""
    import sqlite3

    assert run_cli("demo", "--dir", str(tmp_path / "demo")).returncode == 0
    demo = tmp_path / "demo"
    ledger = next(demo.rglob("agents.db"))
    con = sqlite3.connect(ledger)
    con.execute("DROP INDEX IF EXISTS idx_messages_turn")
    con.execute("ALTER TABLE messages DROP COLUMN sequence")
    con.commit()
    con.close()
    tokens = tmp_path / "tokens.jsonl"
    tokens.write_text('{"token": "short", "persona": "atlas"}\n')
    cfg = demo / "ledger-indexer.toml"
    text = cfg.read_text().replace('known_secrets_file = ""', f'known_secrets_file = "{tmp_path / "nope.txt"}"')
    cfg.write_text(text + f'\n[mcp]\ntoken_file = "{tokens}"\n')
    env = {"LEDGER_INDEXER_EMBEDDING_MODEL": "foo/bar"}
    result = run_cli("--config", str(cfg), "config", "check", env=env)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    lines = {line.split(":")[0].removeprefix("FAIL").removeprefix("ok").strip(): line
             for line in result.stdout.splitlines()}
    assert lines["ledger"].startswith("FAIL") and "lacks column(s) messages.sequence" in lines["ledger"]
    assert lines["mcp tokens"].startswith("FAIL") and f"token_file {tokens} line 1:" in lines["mcp tokens"]
    assert lines["known secrets"].startswith("FAIL") and "cannot read it (No such file or directory)" in lines[
        "known secrets"]
    assert lines["model"].startswith("ok") and "foo/bar: not the packaged model" in lines["model"]
    # and a sync says the same in one line, exit 2, instead of "please report it"
    sync = run_cli("--config", str(cfg), "sync")
    assert sync.returncode == 2 and sync.stderr.count("\n") == 1, sync.stderr
    assert sync.stderr.startswith("ledger-indexer: [redaction] known_secrets_file ") and "please report" not in sync.stderr
