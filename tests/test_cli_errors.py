"""Every CLI failure ends in one line that says what to do, with exit 1 or 2 — never a
traceback (issue 12). Run in-process: an exception escaping ``main`` fails the test."""

from __future__ import annotations

import pytest

from tests.cli_runner import run_cli


def one_line_error(result, code: int) -> str:
    assert result.returncode == code, (result.returncode, result.stderr)
    assert "Traceback (most recent" not in result.stderr and "please report it" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("usage:")]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("ledger-indexer:")
    return lines[0]


@pytest.fixture
def config_file(tmp_path):
    """A config whose ledger exists nowhere yet and whose index was never synced."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[ledger]\npath = "{tmp_path / "agents.db"}"\n[index]\ndir = "{tmp_path / "index"}"\n')
    return cfg


def test_search_before_the_first_sync(config_file):
    line = one_line_error(run_cli("--config", str(config_file), "search", "jwt", "--persona", "atlas"), 1)
    assert "no index" in line and "ledger-indexer sync" in line


def test_search_with_only_the_qmd_sink(config_file):
    env = {"LEDGER_INDEXER_INDEX_SINKS": "qmd"}
    line = one_line_error(run_cli("--config", str(config_file), "search", "jwt", "--persona", "atlas", env=env), 1)
    assert "lancedb" in line


@pytest.mark.parametrize("what", ["missing", "directory"])
def test_batch_source_missing_or_a_directory(config_file, tmp_path, what):
    source = tmp_path / "nope.jsonl" if what == "missing" else tmp_path
    line = one_line_error(run_cli("--config", str(config_file), "search", "--batch", str(source)), 2)
    assert f"cannot read --batch {source}" in line


def test_config_is_a_directory(tmp_path):
    line = one_line_error(run_cli("--config", str(tmp_path), "status"), 2)
    assert "is a directory" in line


def test_config_is_not_utf8(tmp_path):
    cfg = tmp_path / "latin1.toml"
    cfg.write_bytes('[ledger]\npath = "caf\xe9.db"\n'.encode("latin-1"))
    line = one_line_error(run_cli("--config", str(cfg), "status"), 2)
    assert "not UTF-8" in line


def test_bogus_log_level():
    line = one_line_error(run_cli("--log-level", "bogus", "status"), 2)
    assert "invalid log level 'bogus'" in line and "debug" in line


@pytest.mark.parametrize("command", [["sync"], ["project", "add", "auth", "main"], ["project", "list"]])
def test_index_folder_that_cannot_be_created(tmp_path, command):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[ledger]\npath = "{tmp_path / "agents.db"}"\n[index]\ndir = "{blocker / "index"}"\n')
    line = one_line_error(run_cli("--config", str(cfg), *command), 1)
    assert f"cannot create the index folder {blocker / 'index'}" in line


def test_demo_into_a_folder_that_cannot_be_created(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    line = one_line_error(run_cli("demo", "--dir", str(blocker / "demo")), 1)
    assert "cannot write the demo" in line and "--dir" in line


def test_version_prints_the_installed_version():
    from importlib.metadata import version

    result = run_cli("--version")
    assert (result.returncode, result.stdout) == (0, f"ledger-indexer {version('ledger-indexer')}\n")


@pytest.mark.parametrize("args, expected", [
    (["   ", "--persona", "atlas"], "ledger-indexer: query: query is blank"),
    (["jwt", "--persona", "atlas", "-n", "0"], "ledger-indexer: max_results: Input should be greater than or equal to 1"),
    (["jwt", "--persona", "atlas", "--min-score", "7"],
     "ledger-indexer: min_score: Input should be less than or equal to 1"),
    (["jwt", "--persona", "p" * 257], "ledger-indexer: persona: String should have at most 256 characters"),
])
def test_a_search_request_the_model_refuses_is_one_line_naming_the_field(config_file, args, expected):
    assert one_line_error(run_cli("--config", str(config_file), "search", *args), 2) == expected


def test_batch_with_a_query_or_persona_on_the_command_line_is_refused(config_file, tmp_path):
    source = tmp_path / "q.jsonl"
    source.write_text('{"query": "jwt", "persona": "atlas"}\n')
    line = one_line_error(run_cli("--config", str(config_file), "search", "jwt", "--batch", str(source)), 2)
    assert "drop QUERY and --persona" in line


def test_sync_or_reindex_of_a_persona_nobody_has_is_refused_and_creates_nothing(tmp_path):
    demo = tmp_path / "demo"
    assert run_cli("demo", "--dir", str(demo)).returncode == 0
    cfg = str(demo / "ledger-indexer.toml")
    for command in (["sync", "--persona", "nobody"], ["reindex", "--persona", "Atlas"]):
        line = one_line_error(run_cli("--config", cfg, *command), 2)
        assert "unknown persona(s): " in line and "'atlas'" in line and "case-sensitive" in line, line
    assert not (demo / "index").exists() or not any((demo / "index").rglob("*tlas*")), "an index was created"
    assert run_cli("--config", cfg, "sync", "--persona", "atlas").returncode == 0  # a known one still works
    refused = run_cli("--config", cfg, "search", "jwt", "--persona", "Atlas")
    assert refused.returncode != 0 and "unknown persona" in refused.stderr


def test_a_state_database_that_is_not_a_database_is_one_line_naming_it(tmp_path):
    demo = tmp_path / "demo"
    assert run_cli("demo", "--dir", str(demo)).returncode == 0
    cfg = str(demo / "ledger-indexer.toml")
    assert run_cli("--config", cfg, "sync").returncode == 0
    [state] = list(demo.rglob("state.sqlite"))
    for extra in state.parent.glob("state.sqlite-*"):
        extra.unlink()
    state.write_bytes(b"not a database at all " * 200)
    for command in (["status"], ["sync"], ["search", "jwt", "--persona", "atlas"]):
        line = one_line_error(run_cli("--config", cfg, *command), 1)
        assert f"the state database {state} is unreadable" in line and "move it aside" in line, (command, line)


def test_a_project_label_the_api_would_refuse_is_refused_here_too(config_file):
    line = one_line_error(run_cli("--config", str(config_file), "project", "add", "p", "main", ""), 2)
    assert "invalid session label" in line


def test_a_label_longer_than_1024_characters_is_a_label_like_any_other(config_file):
    """The ledger holds labels of any length: the CLI takes them, as the API does."""
    result = run_cli("--config", str(config_file), "project", "add", "p", "main", "x" * 5000)
    assert result.returncode == 0 and result.stdout.strip().endswith("p: added 2 session(s)"), result.stderr[-500:]


@pytest.mark.parametrize("name, shown", [("", "''"), ("p" * 257, repr("p" * 40)), ("a\x00b", "'a\\x00b'")])
def test_a_project_name_the_api_would_refuse_is_refused_here_too_and_nothing_changes(config_file, tmp_path,
                                                                                    name, shown):
    line = one_line_error(run_cli("--config", str(config_file), "project", "add", name, "main"), 2)
    assert line == f"ledger-indexer: invalid project name {shown}: 1 to 256 characters, no NUL"
    assert not (tmp_path / "index").exists()  # refused before the state DB is opened


def test_the_cli_and_the_api_share_the_name_rules():
    from pydantic import TypeAdapter, ValidationError

    from indexer.service.api.models import LABEL, PROJECT_NAME, Label, ProjectName

    def api_allows(kind, value: str) -> bool:
        try:
            TypeAdapter(kind).validate_python(value)
        except ValidationError:
            return False
        return True

    samples = ["", " ", "p", "p" * 256, "p" * 257, "l" * 1024, "l" * 1025, "a\x00b", "ünï 🙂"]
    for rule, kind in ((PROJECT_NAME, ProjectName), (LABEL, Label)):
        assert [rule.allows(v) for v in samples] == [api_allows(kind, v) for v in samples], rule.what


def test_a_session_label_the_api_would_refuse_is_refused_by_session_visibility(config_file):
    line = one_line_error(run_cli("--config", str(config_file), "session", "visibility", "", "private"), 2)
    assert line == "ledger-indexer: invalid session label '': at least 1 character"


NOT_UTF8 = "ledger-indexer: argument {}: not valid UTF-8 ({}): give it as UTF-8 text (see `ledger-indexer --help`)"


@pytest.mark.parametrize("args, name, shown", [
    (["get", "x\udcff", "--persona", "atlas"], "path", r"b'x\xff'"),
    (["get", "x", "--persona", "atlas\udcff"], "--persona", r"b'atlas\xff'"),
    (["reindex", "--persona", "a\udcff"], "--persona", r"b'a\xff'"),
    (["sync", "--persona", "atlas", "--persona", "n\udcffova"], "--persona", r"b'n\xffova'"),
    (["project", "add", "p\udcff", "main"], "name", r"b'p\xff'"),
    (["project", "add", "p", "main", "ma\udcffin"], "SESSION_LABEL", r"b'ma\xffin'"),
    (["session", "visibility", "ma\udcffin", "private"], "label", r"b'ma\xffin'"),
    (["mcp", "--persona", "atlas", "--session", "ma\udcffin"], "--session", r"b'ma\xffin'"),
    (["search", "x", "--persona", "atlas", "--session", "a\udcff"], "--session", r"b'a\xff'"),
    (["search", "x\udcff", "--persona", "atlas"], "query", r"b'x\xff'"),
])
def test_an_argument_that_is_not_utf8_is_a_one_line_usage_error(config_file, args, name, shown):
    line = one_line_error(run_cli("--config", str(config_file), *args), 2)
    assert line == NOT_UTF8.format(name, shown)


def test_a_file_name_that_is_not_utf8_is_still_a_file_name(tmp_path):
    demo = tmp_path / "d\udcff"  # a POSIX file name is bytes: this one opens
    assert run_cli("demo", "--dir", str(demo)).returncode == 0
    status = run_cli("--config", str(demo / "ledger-indexer.toml"), "status")
    assert (status.returncode, status.stderr.strip()) == (
        1, f"ledger-indexer: no index at {demo / 'index'}: run `ledger-indexer sync` or start the daemon")


def test_demo_into_an_existing_folder_keeps_what_is_there(tmp_path):
    demo = tmp_path / "demo"
    assert run_cli("demo", "--dir", str(demo)).returncode == 0
    cfg = demo / "ledger-indexer.toml"
    edited = cfg.read_text().replace("port = 8765", "port = 9911")
    cfg.write_text(edited)
    (demo / "workspace" / "atlas" / "MEMORY.md").write_text("# mine\n")
    again = run_cli("demo", "--dir", str(demo))
    assert again.returncode == 0
    assert again.stdout.splitlines()[0] == (
        "kept as they were: agents.db, workspace/atlas/MEMORY.md, workspace/atlas/memory/2026-11-14.md, "
        "admin.token, ledger-indexer.toml (delete them for fresh demo files)")
    assert cfg.read_text() == edited and (demo / "workspace" / "atlas" / "MEMORY.md").read_text() == "# mine\n"


def test_the_name_rules_load_without_the_api():
    """The CLI checks a project or label name before anything changes: with rules that import no web
    framework (FastAPI and the app cost ~0.4 s a command)."""
    import subprocess
    import sys

    code = ("import sys; from indexer.core.names import LABEL, PROJECT_NAME; "
            "print(sorted(m for m in ('fastapi', 'pydantic', 'indexer.service.api') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
