"""ledger-indexer: cross-session memory for AI agents (see README.md "Layout")."""
