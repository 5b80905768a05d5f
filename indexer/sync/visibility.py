"""Sinks without scopes (the QMD export) never hold a private or deleted session.

QMD has no scopes: whoever runs ``qmd search`` over the export reads all of
it. So a session's documents are in such a sink only while the session is
shared and not deleted. Three paths keep that true:

- every write to such a sink reads the hidden sessions *at that moment* and
  leaves theirs out (:func:`filter_hidden`), and records the written hashes
  before it lets go of :data:`UNSCOPED_WRITES`;
- :func:`apply_visibility` changes a session's visibility and brings the sink
  in line at once (documents removed, or rebuilt from the ledger and put
  back), under the same lock, so a sync pass running on another thread can
  neither slip a document in behind it nor miss the change;
- every pass ends with :func:`reconcile_unscoped`, which applies whatever
  changed since the set it last applied (a change made by another writer of
  the state DB, a restore that had to wait for the ledger).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import structlog

from exporters.base import Exporter, Rebuild
from indexer.core.safe_names import safe_segment
from indexer.core.types import Document
from indexer.sync.build import build_sessions
from indexer.sync.context import Indexer
from indexer.sync.turn_rows import head_history
from indexer.sync.work import EVERY_TURN
from ledger.connection import LedgerUnavailable
from ledger.reader import LedgerReader

log = structlog.get_logger("indexer.sync")

# Writes per sink call when documents are put back (as a sync writes them).
RESTORE_DOCS_PER_WRITE = 32

# Held while a sink without scopes is written *and* the state DB records what
# was written, and while a visibility change is applied: a write either lands
# before the change (then its paths are in the state DB and the change removes
# them) or after it (then it reads the new visibility and leaves them out).
# Re-entrant: apply_visibility calls reconcile_unscoped under it.
UNSCOPED_WRITES = threading.RLock()


def unscoped_sinks(ix: Indexer) -> list[Exporter]:
    return [sink for sink in ix.sinks if not sink.enforces_scopes]


def private_turns(ix: Indexer, persona: str) -> set[str]:
    """The turns of private sessions that forks in ``persona`` carry (``PrivateTurns.copies``;
    their own turns are recorded before a pass writes anything), and every own turn of another
    persona's private session (a copy of one here is always a subagent's fork, recorded or still
    being written): no copy of them, under any session's label, may sit in a sink without scopes."""
    return set().union(*ix.state.hidden_copies(persona).values()) | ix.state.others_private_turns(persona)


def own_turns(reader: LedgerReader, labels: Sequence[str], *,
              indexed: Callable[[str], set[str]] | None = None) -> dict[str, set[str]]:
    """Per session, the turns of its history it said itself: started at or after the session was
    created (a fork's inherited history predates it). A time missing on either side counts as the
    session's own (hidden rather than shown). Looked up by label in any persona: the registry's
    persona may lag the ledger's (a session that just moved). A session whose head cannot be read
    (no thread row, a broken ancestry) is judged on what else names its turns: its head's parents as
    far as they lead, the heads its history rows named, and ``indexed(label)`` (its indexed turns)
    — its forks' copies of a turn it said must stay hidden while its head is broken."""
    with reader.snapshot():
        rows = reader.sessions(labels=labels)
        threads = reader.threads(r.thread_id for r in rows)
        ancestries = {}
        for r in rows:
            thread = threads.get(r.thread_id)
            history = head_history(reader, thread, r.thread_id) if thread else None
            if history is None:  # the head says nothing: what else names the session's turns
                history = sorted(set(reader.reachable_parents(r.thread_id)) | set(reader.history_heads(r.label))
                                 | (indexed(r.label) if indexed is not None else set()))
            ancestries[r.label] = history
        turns = reader.turns(t for ids in ancestries.values() for t in ids)
    created = {r.label: r.created_at for r in rows}
    out: dict[str, set[str]] = {}
    for label, ids in ancestries.items():
        out[label] = {t for t in ids if not created[label] or t not in turns or not turns[t].started_at
                      or turns[t].started_at >= created[label]}
    return out


def remember_private_turns(ix: Indexer, reader: LedgerReader | None, persona: str) -> None:
    """Record the own turns of ``persona``'s private sessions (needs the ledger; without it the
    sessions' whole indexed history counts until a pass records them)."""
    private = ix.state.private_sessions(persona)
    own = own_turns(reader, sorted(private), indexed=lambda label: ix.state.turns_of(persona, [label])) \
        if private and reader is not None else None
    ix.state.private.remember(persona, own)  # also forgets sessions shared again


def filter_hidden(ix: Indexer, persona: str, docs: Sequence[Document]) -> tuple[list[Document], list[Document]]:
    """(docs a sink without scopes may hold, docs withheld), by the visibility now.
    Call under :data:`UNSCOPED_WRITES`."""
    hidden = ix.state.hidden_sessions(persona)
    turns = private_turns(ix, persona)
    if not hidden and not turns:
        return list(docs), []
    keep: list[Document] = []
    withheld: list[Document] = []
    for d in docs:
        (withheld if d.session in hidden or d.turn_id in turns else keep).append(d)
    return keep, withheld


def reconcile_unscoped(ix: Indexer, reader: LedgerReader | None, persona: str) -> tuple[int, int]:
    """Bring sinks without scopes in line with the sessions' visibility now.

    Documents of sessions that became private (or deleted) are removed;
    sessions that became shared again are rebuilt from the ledger and
    exported (needs ``reader``; without one they wait for the next pass).
    Cheap when nothing changed: a few state queries (memoised per state), compared with the set last
    applied. Returns (documents removed, documents restored).
    """
    unscoped = unscoped_sinks(ix)
    if not unscoped:
        return 0, 0
    with UNSCOPED_WRITES:
        hidden = ix.state.hidden_sessions(persona)
        turns = private_turns(ix, persona)
        stored = ix.state.unscoped_applied(persona)
        applied, applied_turns = stored if stored is not None else (set(), set())
        if stored is not None and applied == hidden and applied_turns == turns:
            return 0, 0
        # First run: nothing is known about the export, so every hidden session is removed.
        newly_hidden = hidden - applied if stored is not None else hidden
        shown = applied - hidden
        removed = restored = 0
        if newly_hidden:
            removed = _remove_sessions(ix, persona, unscoped, newly_hidden)
        # Copies of a private session's turns in other sessions (its forks): removed, and put back
        # once no private session holds the turn (below, with the sessions shown again).
        newly_turns = turns - applied_turns if stored is not None else turns
        if newly_turns:
            gone = ix.state.paths_of_turns(persona, newly_turns, except_sessions=hidden)  # those: above
            for sink in unscoped:
                sink.delete(persona, gone)
            removed += len(gone)
        shown_turns = applied_turns - turns
        if shown_turns:
            shown |= {label for label in ix.state.sessions_of_turns(persona, shown_turns) if label not in hidden}
        if shown and reader is None:
            hidden |= shown  # not restored yet: keep them in the "applied" set so the next pass does it
            turns |= shown_turns
        elif shown and reader is not None:  # shown with no reader took the branch above
            with reader.snapshot():
                sessions = [row for row in reader.sessions(labels=sorted(shown)) if row.status != "deleted"]
                # Rendered with every secret value their history holds (learned here, in a
                # staging never committed: the next pass learns and re-renders for itself).
                built = build_sessions(ix, reader, persona, sessions, step=EVERY_TURN)
            # Only what the state DB records as indexed: turns newer than the last
            # pass reach every sink with the next pass (a document exported here
            # but unknown to the state DB could not be removed by path later).
            known = set().union(*(ix.state.paths(persona, session=label) for label in shown))
            docs = [d for d in built.docs if d.session in shown and d.path in known and d.turn_id not in turns]
            for sink in unscoped:
                # one a pass wrote already (a session made live again: built by the pass itself) stays
                held = sink.paths(persona)
                missing = [d for d in docs if d.path not in held]
                for start in range(0, len(missing), RESTORE_DOCS_PER_WRITE):
                    sink.upsert(persona, missing[start:start + RESTORE_DOCS_PER_WRITE])
                restored = max(restored, len(missing))
        ix.state.set_unscoped_applied(persona, hidden, turns)
    if removed or restored:
        log.info("export.visibility_applied", persona=persona, removed=removed, restored=restored,
                 sinks=[sink.name for sink in unscoped])
    return removed, restored


def _remove_sessions(ix: Indexer, persona: str, sinks: Sequence[Exporter], labels: set[str]) -> int:
    """Remove every document of ``labels`` from ``sinks``: the paths the state DB
    records, and whatever else the sink holds under those sessions' folders."""
    gone: set[str] = set()
    for label in labels:
        gone |= ix.state.paths(persona, session=label)
    prefixes = tuple(f"sessions/{safe_segment(label)}/" for label in labels)  # turn_path's folder
    removed = set(gone)
    for sink in sinks:
        held = {p for p in sink.paths(persona) if p.startswith(prefixes)}
        sink.delete(persona, gone | held)
        removed |= held
    return len(removed)


def switch_in_rebuild(ix: Indexer, persona: str, sink: Exporter, rebuild: Rebuild, docs: Sequence[Document],
                      staged_sessions: set[str], withheld: Sequence[Document]) -> None:
    """Switch in the rebuild of a sink without scopes. Call under
    :data:`UNSCOPED_WRITES`, with ``docs`` the persona's whole new set.

    Each document was staged or withheld by the visibility at the time it was
    written. A session shared since then: its withheld documents are put back
    after the switch. A session made private since then has documents in the
    staged set: that set is never switched in (not even for a moment); the
    new set is written over the live one instead, hidden sessions left out,
    and what the new set no longer holds is removed.
    """
    hidden = ix.state.hidden_sessions(persona)
    turns = private_turns(ix, persona)  # copies of a private session's turns (forks): never exported
    held_back = {d.path for d in withheld}
    copies_staged = any(d.turn_id in turns and d.path not in held_back for d in docs)
    if staged_sessions & hidden or copies_staged:
        rebuild.abort()
        keep = [d for d in docs if d.session not in hidden and d.turn_id not in turns]
        for start in range(0, max(len(keep), 1), RESTORE_DOCS_PER_WRITE):  # once at least: the sink
            sink.upsert(persona, keep[start:start + RESTORE_DOCS_PER_WRITE])  # holds the set, even empty
        sink.delete(persona, sink.paths(persona) - {d.path for d in keep})
        log.info("export.rebuild_written_in_place", persona=persona, sink=sink.name, documents=len(keep),
                 reason="a session became private during the rebuild, or a fork copied a private session's turns")
        return
    rebuild.commit()
    missing = [d for d in withheld if d.session not in hidden and d.turn_id not in turns]
    for start in range(0, len(missing), RESTORE_DOCS_PER_WRITE):
        sink.upsert(persona, missing[start:start + RESTORE_DOCS_PER_WRITE])
    if missing:
        log.info("export.rebuild_settled", persona=persona, sink=sink.name, restored=len(missing),
                 reason="a session was shared during the rebuild")


@dataclass(frozen=True, slots=True)
class VisibilityApplied:
    label: str
    persona: str
    visibility: str
    removed: int   # documents taken out of sinks without scopes
    restored: int  # documents put back into them


def apply_visibility(ix: Indexer, label: str, visibility: str) -> VisibilityApplied | None:
    """Set session ``label`` ``"private"`` or ``"shared"`` in the state DB and
    bring every sink without scopes in line before returning (then run their
    update hook, e.g. ``qmd update``, so QMD's own index follows).

    Safe to call from another thread while a sync pass runs (the daemon's API
    thread): see :data:`UNSCOPED_WRITES`. Returns None for an unknown session;
    raises ValueError for another visibility value, and SinkError when the
    export cannot be changed (the state DB then already holds the new
    visibility, and the next pass retries the export).
    A restore needs the ledger: when it cannot be opened, the documents come
    back on the next pass that can read it.
    """
    if visibility not in ("private", "shared"):
        raise ValueError(f"visibility must be 'private' or 'shared', not {visibility!r}")
    with UNSCOPED_WRITES:
        record = ix.state.session(label)
        if record is None:
            return None
        try:
            reader = ix.reader()  # the private session's own turns; a restore's documents
        except LedgerUnavailable as exc:
            log.warning("export.restore_deferred", session=label, error=str(exc))
            reader = None  # own turns counted in full, restores deferred, until a pass reads the ledger
        removed = restored = 0
        try:
            # object storage: readers see it before the state DB commits it; a fork's copy a pass is
            # writing right now is noted as hidden in the same transaction
            with ix.in_flight.change(), ix.scope_change():
                if not ix.state.set_visibility(label, visibility):
                    return None
                remember_private_turns(ix, reader, record.persona)
                ix.in_flight.note_again()
            if unscoped_sinks(ix):
                # its persona's export, and every other persona's (a subagent's fork may hold copies)
                for persona in [record.persona] + sorted(set(ix.state.personas_indexed()) - {record.persona}):
                    r, s = reconcile_unscoped(ix, reader, persona)
                    removed, restored = removed + r, restored + s
                if removed or restored:
                    for sink in unscoped_sinks(ix):
                        sink.after_batch()
        finally:
            if reader is not None:
                reader.close()
    log.info("session.visibility", session=label, persona=record.persona, visibility=visibility,
             removed=removed, restored=restored)
    return VisibilityApplied(label, record.persona, visibility, removed, restored)


__all__ = ["UNSCOPED_WRITES", "VisibilityApplied", "apply_visibility", "filter_hidden", "own_turns",
           "reconcile_unscoped", "remember_private_turns",
           "switch_in_rebuild", "unscoped_sinks"]
