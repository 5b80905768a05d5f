"""The demo ledger indexed with the real model and LanceDB: one builder for every test
that searches a realistic index (search, search warnings, the real API backend)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from indexer.cli.demo import write_demo
from indexer.embedding.factory import make_embedder
from indexer.runtime.config import Config, load_config
from indexer.search.searcher import Searcher
from indexer.sync.context import Indexer, build_sinks
from indexer.sync.engine import sync_once


def demo_config(root: Path, *, sinks: Sequence[str] | None = None) -> Config:
    """The demo's ledger and config written under ``root``; ``sinks`` replaces its sinks."""
    config = load_config(write_demo(root / "demo")[0], env={})
    if sinks is not None:
        config = config.model_copy(update={"index": config.index.model_copy(update={"sinks": list(sinks)})})
    return config


@dataclass
class DemoIndex:
    config: Config
    ix: Indexer
    searcher: Searcher
    embedder: object

    def close(self) -> None:
        self.searcher.close()
        self.ix.close()


def build_demo_index(root: Path) -> DemoIndex:
    """The demo synced once into both sinks, and a searcher over it sharing the state DB."""
    config = demo_config(root)
    embedder = make_embedder(config)
    ix = Indexer(config, sinks=build_sinks(config, embedder=embedder))
    sync_once(ix)
    return DemoIndex(config, ix, Searcher(config, embedder=embedder, state=ix.state), embedder)
