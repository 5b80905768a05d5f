"""``memory_get``: the stored text of one document, or a range of its lines.

Reads what the sinks stored (LanceDB first, else the QMD export), and applies
the same visibility rules as search: a private session's documents are only
returned to that session, a deleted session's never.
"""

from __future__ import annotations

from dataclasses import dataclass

from indexer.core.scopes import Scope, resolve
from indexer.runtime.config import Config
from indexer.state.db import StateDB


class DocumentNotFound(LookupError):
    pass


@dataclass(frozen=True, slots=True)
class GetResult:
    persona: str
    path: str
    from_line: int
    lines: int
    total_lines: int
    text: str

    def as_dict(self) -> dict:
        return {"persona": self.persona, "path": self.path, "from": self.from_line, "lines": self.lines,
                "total_lines": self.total_lines, "text": self.text}


def _stored_text(config: Config, persona: str, path: str) -> str | None:
    if "lancedb" in config.index.sinks:
        from exporters.lancedb import Retriever

        retriever = Retriever(config.lancedb_dir)
        try:
            return retriever.read(persona, path)
        finally:
            retriever.close()
    from exporters.qmd import QmdExporter

    return QmdExporter(config.qmd_export_dir).read(persona, path)


def _published_text(config: Config, persona: str, path: str, session: str | None, retriever,
                    scope: Scope = Scope.PERSONA) -> str:
    """Object storage: whose the document is comes from its own row, the scope from the
    published state (fail closed, as search)."""
    from exporters.lancedb import Retriever
    from exporters.lancedb.location import IndexLocation
    from exporters.lancedb.store import _read_doc_row
    from indexer.search.scope_source import PublishedScopeSource

    own = retriever is None
    retriever = retriever or Retriever(IndexLocation.from_config(config))
    try:
        facts = PublishedScopeSource(retriever).scope_facts(persona, session)
        table = retriever.active_table(persona)
        row = _read_doc_row(table, path) if table is not None else None
    finally:
        if own:
            retriever.close()
    not_found = DocumentNotFound(f"no document {path!r} for persona {persona!r} "
                                 "(paths come from search results: sessions/<label>/turns/<turn>.md)")
    if row is None:
        raise not_found
    visible = resolve(persona, scope, session, frozenset({"sessions", "memory"}), facts)
    if not visible.allows({"persona": row["persona"], "source": row["source"], "session": row["session"],
                           "turn_id": row.get("turn_id")}):
        raise not_found
    return row["doc_text"]


def get_document(config: Config, persona: str, path: str, *, from_line: int = 1, lines: int | None = None,
                 session: str | None = None, state: StateDB | None = None, retriever=None,
                 scope: Scope = Scope.PERSONA) -> GetResult:
    """``retriever``: an open :class:`exporters.lancedb.Retriever` to reuse (object storage).
    ``scope``: the widest scope of ``session`` the document must lie in (a narrowed bearer token);
    outside it the document is not found, as a private session's is."""
    if config.index.object_store and "lancedb" in config.index.sinks:
        return _lines(persona, path, _published_text(config, persona, path, session, retriever, scope), from_line,
                      lines)
    own_state = state is None
    state = state or StateDB(config.state_db_path)
    try:
        record = state.file(persona, path)
        not_found = DocumentNotFound(f"no document {path!r} for persona {persona!r} "
                                     "(paths come from search results: sessions/<label>/turns/<turn>.md)")
        if record is None:
            raise not_found
        visible = resolve(persona, scope, session, frozenset({"sessions", "memory"}),
                          state.scope_facts(persona, session))
        if not visible.allows({"persona": persona, "source": record.source, "session": record.session,
                               "turn_id": record.turn_id}):
            raise not_found
    finally:
        if own_state:
            state.close()
    text = _stored_text(config, persona, path)
    if text is None:
        raise DocumentNotFound(f"{path!r} is recorded but not stored in the index yet: run `ledger-indexer sync`")
    return _lines(persona, path, text, from_line, lines)


def _lines(persona: str, path: str, text: str, from_line: int, lines: int | None) -> GetResult:
    all_lines = text.split("\n")
    start = max(1, from_line)
    chosen = all_lines[start - 1 : (start - 1 + lines) if lines else None]
    return GetResult(persona, path, start, len(chosen), len(all_lines), "\n".join(chosen))
