"""Shared fixtures: real SQLite ledgers in WAL mode, real sinks, real config."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LANCEDB_LOG", "error")
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from indexer.runtime.config import load_config  # noqa: E402
from ledger.writer import LedgerWriter  # noqa: E402


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    return tmp_path / "ledger" / "agents.db"


@pytest.fixture
def writer(ledger_path: Path):
    ledger_path.parent.mkdir(parents=True, exist_ok=True)
    w = LedgerWriter(ledger_path, start_ms=1_763_000_000_000, seed=3)
    yield w
    w.close()


def make_config(tmp_path: Path, ledger_path: Path, *, sinks=("qmd",), **sections):
    overrides = {"ledger": {"path": str(ledger_path)}, "index": {"dir": str(tmp_path / "index"), "sinks": list(sinks)}}
    for name, values in sections.items():
        overrides.setdefault(name, {}).update(values)
    return load_config(None, env={}, overrides=overrides)


@pytest.fixture
def config_factory(tmp_path: Path, ledger_path: Path):
    def factory(**kwargs):
        return make_config(tmp_path, ledger_path, **kwargs)

    return factory


@pytest.fixture(autouse=True, scope="module")
def _no_reader_cache_outlives_its_module():
    """A reader on object storage that a test module leaves open keeps its refresher thread
    running against a store that is gone: its warnings and queued reads then land in the next
    module's captured logs. Close what a module left open when it ends."""
    yield
    from exporters.lancedb.reader_cache import ReaderCache

    ReaderCache.close_all()
