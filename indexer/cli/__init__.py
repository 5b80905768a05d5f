"""``ledger-indexer`` command line."""

from indexer.cli.main import main

__all__ = ["main"]
