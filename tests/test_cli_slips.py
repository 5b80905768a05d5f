"""The smaller slips of issue 35, each a minute of confusion: every message names the cause, the fix
and its exit code; every printed command works; every option says what it does."""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys

import pytest

from indexer.cli.demo import write_demo
from indexer.cli.main import DEFAULT_MIN_SCORE, _parser
from indexer.search.searcher import MAX_QUERY_CHARS
from indexer.state.db import StateDB
from indexer.state.lock import acquire
from tests.cli_runner import ROOT, run_cli


def _one_line(result, code: int) -> str:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "please report it" not in result.stderr and "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("ledger-indexer:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_the_demo_names_sync_for_no_daemon_and_run_for_the_daemon(tmp_path):
    out = run_cli("demo", "--dir", str(tmp_path / "demo"), check=True).stdout
    assert "sync   (index it once, with no daemon running)" in out
    assert "run    (the daemon: it indexes and keeps up by itself" in out


def test_session_visibility_without_an_admin_token_names_itself_not_reindex(tmp_path):
    config, _ = write_demo(tmp_path / "demo")
    config.write_text(config.read_text().replace('admin_token_file = "admin.token"', 'admin_token_file = ""'))
    with acquire(tmp_path / "demo" / "index", "run"):  # a daemon holds the index
        line = _one_line(run_cli("--config", str(config), "session", "visibility", "main", "private"), 1)
    assert "`session visibility` must go through its admin API" in line and "reindex" not in line
    assert "set it to a file holding a token" in line and "stop the daemon" in line


def test_a_reader_that_closed_the_pipe_ends_it_quietly(tmp_path):
    read, write = os.pipe()
    os.close(read)  # `| head -1` that has read its line
    try:
        done = subprocess.run([sys.executable, "-m", "indexer.cli", "redact"], cwd=ROOT, input=b"a line\n" * 10,
                              stdout=write, stderr=subprocess.PIPE, timeout=60)
    finally:
        os.close(write)
    assert done.returncode == 141, done.stderr  # 128 + SIGPIPE, as `cat` ends there
    assert done.stderr == b"", done.stderr  # no "BrokenPipeError ... please report it"


def test_get_before_any_sync_creates_nothing_and_says_to_sync(tmp_path):
    config, _ = write_demo(tmp_path / "demo")
    line = _one_line(run_cli("--config", str(config), "get", "sessions/main.md", "--persona", "atlas"), 1)
    assert "no index at" in line and "run `ledger-indexer sync`" in line
    assert not (tmp_path / "demo" / "index" / "state.sqlite").exists()
    line = _one_line(run_cli("--config", str(config), "search", "jwt", "--persona", "atlas"), 1)
    assert "no index at" in line and "unknown persona" not in line


def test_search_of_an_index_that_holds_nothing_yet_says_so_not_unknown_persona(tmp_path):
    config, _ = write_demo(tmp_path / "demo")
    StateDB(tmp_path / "demo" / "index" / "state.sqlite").close()  # as an earlier `get` left it
    line = _one_line(run_cli("--config", str(config), "search", "jwt", "--persona", "atlas"), 1)
    assert "nothing is indexed yet" in line and "run `ledger-indexer sync`" in line
    assert "unknown persona" not in line


def test_get_session_lets_the_owner_of_a_private_session_read_its_turns(tmp_path):
    config, _ = write_demo(tmp_path / "demo")  # the lancedb sink keeps a private session's text (qmd does not)
    run_cli("--config", str(config), "sync", check=True)
    run_cli("--config", str(config), "session", "visibility", "research", "private", check=True)
    with sqlite3.connect(tmp_path / "demo" / "index" / "state.sqlite") as db:
        (path,) = db.execute("SELECT path FROM files WHERE persona = 'nova' AND session_label = 'research' "
                             "AND turn_id IS NOT NULL LIMIT 1").fetchone()
    hidden = run_cli("--config", str(config), "get", path, "--persona", "nova")
    assert "no document" in _one_line(hidden, 1)
    owner = run_cli("--config", str(config), "get", path, "--persona", "nova", "--session", "research")
    assert owner.returncode == 0, owner.stderr
    assert "User:" in owner.stdout


def test_config_check_passes_a_reader_without_a_ledger(tmp_path):
    cfg = tmp_path / "reader.toml"  # as the README prescribes for a reader: no [ledger]
    cfg.write_text(f'[index]\nuri = "s3://bucket/index"\ndir = "{tmp_path / "cache"}"\nsinks = ["lancedb"]\n')
    result = run_cli("--config", str(cfg), "config", "check")
    assert result.returncode == 0, result.stdout
    assert "ok    ledger: none at" in result.stdout and "fine for a reader" in result.stdout


def test_config_check_fails_an_index_dir_under_proc(tmp_path):
    config, _ = write_demo(tmp_path / "demo")
    config.write_text(config.read_text().replace('dir = "index"', 'dir = "/proc/ledger-index"'))
    result = run_cli("--config", str(config), "config", "check")
    assert result.returncode == 1
    assert "FAIL  index dir: /proc/ledger-index: /proc is a proc file system" in result.stdout
    assert "set [index] dir to a writable folder" in result.stdout


def _parsers(parser: argparse.ArgumentParser, name: str = "ledger-indexer"):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


def test_every_option_of_every_command_says_what_it_does():
    missing = []
    for name, parser in _parsers(_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS and \
                    action.dest == "demo_hints":  # --demo-hints: `make run`'s own, hidden on purpose
                continue
            if not (action.help or "").strip():
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, missing


def test_search_help_states_the_query_limit_and_hides_zero_scores_by_default():
    search = dict(_parsers(_parser()))["ledger-indexer search"]
    query = next(a for a in search._actions if a.dest == "query")
    assert f"at most {MAX_QUERY_CHARS:,} characters" in query.help
    assert search.parse_args(["q"]).min_score == DEFAULT_MIN_SCORE == 0.001


@pytest.mark.parametrize("argv", [["search", "--help"], ["get", "--help"], ["project", "add", "--help"]])
def test_help_prints_descriptions(argv):
    out = run_cli(*argv).stdout
    assert "--persona" in out or "SESSION_LABEL" in out
