"""Writing a batch: every sink (or a rebuild beside it), unchanged documents skipped by hash,
the state committed after each part so an interrupted pass keeps what it wrote."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import structlog

from exporters.base import Exporter, Rebuild
from indexer.core.types import Document
from indexer.sync.context import Indexer
from indexer.sync.progress import Progress
from indexer.sync.summary import PersonaSummary, check_stop
from indexer.sync.visibility import UNSCOPED_WRITES, filter_hidden

log = structlog.get_logger("indexer.sync")


class Target:
    """Where a batch goes: a live sink (upsert + delete) or a rebuild (upsert only).

    A sink without scopes (``unscoped``) never receives a private or deleted
    session's documents: each upsert reads the visibility at that moment
    (callers hold UNSCOPED_WRITES). A rebuild target also keeps what it left
    out (``withheld``) and which sessions it staged, so that a visibility
    change made before the switch is honoured (sync_visibility.switch_in_rebuild).
    """

    def __init__(self, ix: Indexer, persona: str, sink: Exporter, rebuild: Rebuild | None = None):
        self.ix, self.persona, self.sink, self.rebuild = ix, persona, sink, rebuild
        self.unscoped = not sink.enforces_scopes
        self.withheld: list[Document] = []
        self.staged_sessions: set[str] = set()  # rebuild: sessions with documents in the staged set

    def upsert(self, docs: Sequence[Document]) -> None:
        if self.unscoped:
            docs, withheld = filter_hidden(self.ix, self.persona, docs)
            if self.rebuild is not None:
                self.withheld.extend(withheld)
                self.staged_sessions.update(d.session for d in docs if d.session)
            if not docs:  # every one hidden: a live sink still holds the persona's (empty) set
                if self.rebuild is None:
                    self.sink.upsert(self.persona, [])
                return
        if self.rebuild is not None:
            self.rebuild.upsert(docs)
        else:
            self.sink.upsert(self.persona, docs)

    def delete(self, paths: set[str]) -> None:
        if self.rebuild is None and paths:
            self.sink.delete(self.persona, paths)


def write_batch(ix: Indexer, persona: str, docs: Sequence[Document], deletions: set[str],
           targets: Sequence[Target], *, skip_unchanged: bool,
           record: Callable[[list[Document]], None] | None = None) -> tuple[list[Document], int]:
    """Upsert changed docs and delete paths in every target, then ``record`` what
    was written. Returns (written, unchanged).

    Sinks with scopes are written first (embedding takes the time); sinks
    without scopes and the record follow under UNSCOPED_WRITES, so a
    visibility change applied meanwhile sees either both or neither."""
    unique = list({d.path: d for d in docs}.values())
    if skip_unchanged:
        known = ix.state.hashes(persona, (d.path for d in unique))
        changed = [d for d in unique if known.get(d.path) != d.content_hash]
    else:
        changed = unique
    # Debug events bracket every sink write: operators can see where a pass
    # spends its time, and the crash tests kill the daemon between them.
    if changed or deletions:
        log.debug("sink.write_started", persona=persona, documents=len(changed), deletions=len(deletions))
    for target in sorted(targets, key=lambda t: t.unscoped):
        if target.unscoped:
            break
        if changed:
            target.upsert(changed)
        target.delete(deletions)
    with UNSCOPED_WRITES:
        for target in targets:
            if target.unscoped:
                if changed:
                    target.upsert(changed)
                target.delete(deletions)
        if record is not None:
            record(changed)
    if changed or deletions:
        log.debug("sink.write_done", persona=persona, documents=len(changed), deletions=len(deletions))
    return changed, len(unique) - len(changed)


def live_targets(ix: Indexer, persona: str) -> list[Target]:
    return [Target(ix, persona, sink) for sink in ix.sinks]


def write_in_parts(ix: Indexer, persona: str, docs: Sequence[Document], targets: Sequence[Target],
                    summary: PersonaSummary, *, skip_unchanged: bool, stop: threading.Event | None,
                    progress: Progress | None, record: bool = True) -> list[Document]:
    """Write ``docs`` in parts of ``[sync] docs_per_write``; after each part its hashes are
    committed (when ``record``), so an interrupted pass keeps what it wrote."""
    # Sorted by length so each write's embedding batches pad to similar lengths:
    # mixed lengths in writes of 32 made the sync run at 0.56x raw embedding speed,
    # sorted 0.86x; sorted writes of 128 0.87x by wall time, 0.93x by CPU (bench/RESULTS.md).
    # Write order does not matter: each part commits its own hashes.
    unique = sorted({d.path: d for d in docs}.values(), key=lambda d: len(d.body))
    # A fork's copy of a private session's turn is hidden from the moment a sink holds it: noted for
    # every part at once (a compaction is a fork's by the copies beside it, in any part).
    with ix.in_flight.writing(persona, unique):
        return _write_parts(ix, persona, unique, targets, summary, skip_unchanged=skip_unchanged, stop=stop,
                            progress=progress, record=record)


def _write_parts(ix: Indexer, persona: str, unique: list[Document], targets: Sequence[Target],
                 summary: PersonaSummary, *, skip_unchanged: bool, stop: threading.Event | None,
                 progress: Progress | None, record: bool) -> list[Document]:
    written_all: list[Document] = []
    size = ix.config.sync.docs_per_write
    for start in range(0, len(unique), size):
        check_stop(stop)
        part = unique[start : start + size]

        def commit(written: list[Document], part: list[Document] = part) -> None:
            with ix.state.atomic():
                ix.state.record_documents(written)
                # Every document of the part, unchanged ones too: after a new
                # source (replaced ledger) the set is rebuilt from what is indexed.
                record_truncations(ix, persona, part)

        written, unchanged = write_batch(ix, persona, part, set(), targets, skip_unchanged=skip_unchanged,
                                    record=commit if record else None)
        written_all.extend(written)
        summary.documents_written += len(written)
        summary.documents_unchanged += unchanged
        if progress is not None:
            progress.advanced(persona, len(part))
    return written_all


def record_truncations(ix: Indexer, persona: str, written: Sequence[Document], *, fresh: bool = False) -> None:
    """Keep the set of indexed documents holding a truncated message (status shows it); ``fresh``:
    ``written`` is the persona's whole set."""
    ix.state.record_truncated(persona, [d.path for d in written if d.truncated_bytes],
                              [d.path for d in written if not d.truncated_bytes], fresh=fresh)


def truncated_documents(state, persona: str) -> list[str]:
    """Indexed documents of ``persona`` whose text was cut at ledger.max_message_bytes."""
    paths = state.truncated_paths(persona)
    live = state.hashes(persona, paths)
    return [p for p in paths if p in live]
