"""Where search and ``get`` read the scope facts: the state DB, or the state the writer published.

A local index is searched on the writer's machine: scopes come from the state
DB at query time (:class:`indexer.state.db.StateDB` is a :class:`ScopeSource`).
An index on object storage is searched from any machine, the writer's
included, with the same code: scopes come from the state the writer publishes
beside the tables (``exporters.lancedb.published``), re-read at most every
``index.refresh_seconds``. That source fails closed: no published state, an
unreadable one, a persona with a live table but no published entry, or an
index built with another embedding model than this process's (other than the
same model computed in another precision: ``model_files.same_vector_space``) are refused
with a :class:`SearchError` (unavailable) — never searched unscoped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from indexer.core.scopes import ScopeFacts


@runtime_checkable
class ScopeSource(Protocol):
    def scope_facts(self, persona: str, session: str | None) -> ScopeFacts: ...


class PublishedScopeSource:
    """Scope facts from the published state, checked against the live table of the persona."""

    def __init__(self, retriever, fingerprint: Callable[[], str | None] | None = None) -> None:
        if retriever.published is None:
            raise ValueError("the retriever reads a local index: use the state DB")
        self.retriever = retriever
        self.published = retriever.published
        self._fingerprint = fingerprint

    def scope_facts(self, persona: str, session: str | None) -> ScopeFacts:
        from exporters.base import SinkError
        from indexer.search.searcher import SearchError

        try:
            snapshot = self.published.snapshot()
            meta = self.retriever.meta(persona)
        except SinkError as exc:
            raise SearchError(str(exc)) from None
        if persona not in snapshot.personas and meta is not None:
            raise SearchError(f"persona {persona!r} has an index but no published scope state yet (the writer "
                              "publishes it at the end of the pass that created it); retry shortly")
        if meta is not None and self._fingerprint is not None:
            from indexer.embedding.model_files import same_vector_space

            mine = self._fingerprint()
            if mine is not None and not same_vector_space(meta.get("fingerprint"), mine):
                raise SearchError(f"the index of persona {persona!r} was built with embedding model "
                                  f"{meta.get('fingerprint')} but this process embeds queries with {mine}: set "
                                  "[embedding] as on the writer")
        return snapshot.facts(persona, session)


def scope_source(config, retriever, fingerprint: Callable[[], str | None] | None = None):
    """The scope facts for ``config``'s index: published ones on object storage, else the state DB."""
    if retriever.published is not None:
        return PublishedScopeSource(retriever, fingerprint)
    from indexer.state.db import StateDB

    return StateDB(config.state_db_path)
