"""Config: TOML keys, env overrides, clear errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from indexer.runtime.config import ConfigError, load_config


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "c.toml"
    p.write_text(text)
    return p


def test_defaults_and_relative_paths(tmp_path):
    cfg = load_config(write(tmp_path, '[ledger]\npath = "agents.db"\n[index]\ndir = "idx"\n'), env={})
    assert cfg.ledger.path == tmp_path / "agents.db"
    assert cfg.index.dir == tmp_path / "idx" and cfg.index.sinks == ("lancedb",)
    assert cfg.api.port == 8765 and cfg.api.host == "127.0.0.1" and cfg.api.admin_token_file is None
    assert cfg.qmd_export_dir == tmp_path / "idx" / "qmd"


def test_every_key_can_be_overridden_by_env(tmp_path):
    env = {"LEDGER_INDEXER_LEDGER_PATH": "/data/agents.db", "LEDGER_INDEXER_LEDGER_PERSONAS": '["atlas","nova"]',
           "LEDGER_INDEXER_INDEX_SINKS": "qmd,lancedb", "LEDGER_INDEXER_QMD_UPDATE_COMMAND": '["qmd","update"]',
           "LEDGER_INDEXER_API_PORT": "9000", "LEDGER_INDEXER_SYNC_DEBOUNCE_MS": "50",
           "LEDGER_INDEXER_EMBEDDING_BATCH_SIZE": "16", "LEDGER_INDEXER_MEMORY_atlas": "/w/MEMORY.md,/w/memory"}
    cfg = load_config(write(tmp_path, "[api]\nport = 1\n"), env=env)
    assert cfg.ledger.path == Path("/data/agents.db") and cfg.ledger.personas == ("atlas", "nova")
    assert cfg.index.sinks == ("qmd", "lancedb") and cfg.qmd.update_command == ("qmd", "update")
    assert cfg.api.port == 9000 and cfg.sync.debounce_ms == 50 and cfg.embedding.batch_size == 16
    assert cfg.memory["atlas"] == (Path("/w/MEMORY.md"), Path("/w/memory"))


@pytest.mark.parametrize("text,needle", [
    ("[api]\nprot = 1\n", "api.prot"),
    ("[api]\nport = 'abc'\n", "api.port"),
    ("[index]\nsinks = ['elastic']\n", "index.sinks"),
    ("[index]\nsinks = []\n", "index.sinks"),
    ("[nonsense]\nx = 1\n", "nonsense"),
    ("[sync]\ninterval_seconds = -1\n", "sync.interval_seconds"),
    ("not toml [", "not valid TOML"),
])
def test_bad_config_names_the_key(tmp_path, text, needle):
    with pytest.raises(ConfigError, match=needle.replace(".", r"\.")):
        load_config(write(tmp_path, text), env={})


def test_unknown_env_variable_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="LEDGER_INDEXER_API_PROT"):
        load_config(None, env={"LEDGER_INDEXER_API_PROT": "1"})


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml", env={})


def test_example_configs_load(tmp_path):
    root = Path(__file__).resolve().parents[1]
    for example in [root / "systemd" / "config.example.toml"]:
        assert example.is_file(), f"{example} moved: the README and the unit point at it"
        load_config(example, env={})


@pytest.mark.parametrize("overrides, key", [
    ({"ledger": {"path": "/tmp/a\x00b.db"}}, "ledger.path"),
    ({"index": {"dir": "/tmp/ix\x00"}}, "index.dir"),
    ({"mcp": {"token_file": "/tmp/t\x00"}}, "mcp.token_file"),
    ({"memory": {"atlas": ["/tmp/\x00m"]}}, "memory.atlas.0"),
])
def test_a_path_with_a_nul_is_a_config_error_naming_the_key(overrides, key):
    with pytest.raises(ConfigError, match=rf"^invalid config: {re.escape(key)}: a path cannot contain a NUL character"):
        load_config(None, env={}, overrides=overrides)
