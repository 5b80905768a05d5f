"""The status report (per persona: cursor, head, lag, documents, bad turns...),
shared by the CLI's ``status`` and the daemon's ``/v1/status``: neither door
owns it, so neither imports the other."""

from __future__ import annotations

from indexer.runtime.config import Config
from indexer.state.db import StateDB
from indexer.state.lock import read_holder
from ledger.connection import LedgerUnavailable


def status_report(config: Config, state: StateDB) -> dict:
    """Per persona: cursor, ledger head, lag, documents, bad rows, index metadata."""
    from indexer.sync.writes import truncated_documents
    from ledger.reader import LedgerReader

    head = None
    ledger_personas: list[str] = []
    ledger_error = None
    try:
        reader = LedgerReader.open(config.ledger.path)
        try:
            head = reader.head_id()
            ledger_personas = reader.personas()
        finally:
            reader.close()
    except LedgerUnavailable as exc:
        ledger_error = str(exc)
    personas = list(config.ledger.personas) or sorted(set(ledger_personas) | set(state.personas_indexed()))
    out: dict = {"ledger": {"path": str(config.ledger.path), "head": head, "error": ledger_error},
                 "index_dir": str(config.index.dir), "personas": {}}
    for persona in personas:
        cursor = state.get_cursor(persona)
        out["personas"][persona] = {
            "cursor": cursor,
            "ledger_head": head,
            "lag": (head - cursor) if head is not None and cursor is not None else None,
            "documents": state.document_count(persona),
            "bad_rows_skipped": state.bad_count(persona),
            # what was skipped and why (newest 50); retried when the session moves, on a
            # rebuild, and by `sync --retry-bad`
            "bad_turns": state.bad_list(persona),
            "pending_turns": len(state.pending(persona)),
            # documents with a message cut at ledger.max_message_bytes (a marker in the text says so)
            "truncated_documents": len(truncated_documents(state, persona)),
            "index_meta": identity.as_dict() if (identity := state.build_identity(persona)) else None,
        }
    holder = read_holder(config.index.dir) if config.index.dir.exists() else None
    out["writer"] = holder.to_json() if holder else None
    return out
