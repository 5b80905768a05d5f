"""The CLI's daemon fast path finds the index folder without loading the whole config
(indexer/runtime/locate.py); it must agree with load_config wherever both answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexer.runtime.config import load_config
from indexer.runtime.locate import DEFAULT_INDEX_DIR, index_dir


@pytest.mark.parametrize("toml, env", [
    ("", {}),
    ('[index]\ndir = "rel/index"\n', {}),
    ('[index]\ndir = "/abs/index"\n', {}),
    ('[index]\ndir = "~/idx"\n', {}),
    ('[index]\ndir = "rel/index"\n', {"LEDGER_INDEXER_INDEX_DIR": "/from/env"}),
    ('[index]\nsinks = ["qmd"]\n', {"LEDGER_INDEXER_INDEX_DIR": "env-relative"}),
])
def test_agrees_with_load_config(tmp_path, toml, env):
    cfg = tmp_path / "conf" / "c.toml"
    cfg.parent.mkdir()
    cfg.write_text(toml)
    assert index_dir(cfg, env) == load_config(cfg, env=env).index.dir


def test_no_config_file_means_the_default_or_the_environment(tmp_path):
    assert index_dir(None, {}) == DEFAULT_INDEX_DIR == load_config(None, env={}).index.dir
    assert index_dir(None, {"LEDGER_INDEXER_INDEX_DIR": str(tmp_path)}) == tmp_path


@pytest.mark.parametrize("content", [b"[index\n", b"\xff\xfe not utf-8", b'[index]\ndir = 5\n'])
def test_anything_irregular_defers_to_the_full_config(tmp_path, content):
    cfg = tmp_path / "c.toml"
    cfg.write_bytes(content)
    assert index_dir(cfg, {}) is None
    assert index_dir(tmp_path / "missing.toml", {}) is None
    assert index_dir(tmp_path, {}) is None  # a directory


def test_a_relative_config_path_resolves_from_its_own_folder(tmp_path, monkeypatch):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "c.toml").write_text('[index]\ndir = "idx"\n')
    monkeypatch.chdir(tmp_path)
    assert index_dir(Path("conf/c.toml"), {}) == (tmp_path / "conf" / "idx").resolve()
