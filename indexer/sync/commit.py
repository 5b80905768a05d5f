"""Recording a built batch in the state DB, once the sinks hold it (one transaction)."""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from indexer.core.documents import Skip
from indexer.sync.build import Built
from indexer.sync.context import Indexer
from indexer.sync.recurring import StagedMemory
from indexer.sync.summary import PersonaSummary
from indexer.sync.work import TO_BUILD_REASONS, Revisit

log = structlog.get_logger("indexer.sync")


def commit_state(ix: Indexer, persona: str, summary: PersonaSummary, built: Built,
                 deletions: set[str], cursor: int | None, *, cleared: Sequence[Revisit] = ()) -> None:
    """Record what a batch built, after the sinks hold it, in one state transaction: hashes gone,
    the revisit queue (pending turns, bad rows, owed secrets; ``cleared``: the plan's revisits this
    batch built, whose queue rows go), empty turns, the cursor."""
    # What built fine now is no longer bad: revisited turns that made a document,
    # and in every session whose ancestry was read (all its unindexed turns were
    # just built) whatever was not skipped again.
    resolved = [(d.session, d.turn_id) for d in built.docs if d.session and d.turn_id]
    with ix.state.atomic():
        ix.state.forget_documents(persona, deletions)
        ix.state.clear_bad_turns(persona, resolved)
        ix.state.set_pending(persona, built.pending)
        ix.state.clear_pending(persona, built.done_pending + built.left)
        summary.documents_skipped_bad += ix.state.record_bad(
            persona, [(s.session, s.turn_id or "", s.reason.value, s.detail) for s in built.skips],
            built.fingerprints, sessions_built=built.ancestry)
        if cursor is not None:
            ix.state.set_cursor(persona, cursor)
        if cleared:
            ix.state.clear_sessions_to_build(persona, [r.session for r in cleared
                                                       if not r.turn and r.why in TO_BUILD_REASONS])
            ix.state.clear_late(persona, [(r.session, r.turn) for r in cleared if r.turn])
        record_owed(ix, built.learned)
        ix.state.clear_secret_rechecks(persona, built.rechecked)
        # a document with no turn id fills no turn (its pair would match no empty_turns row anyway)
        ix.state.record_empty(persona, built.empty,
                              filled=[(d.session, d.turn_id) for d in built.docs if d.session and d.turn_id]
                              + built.left)
    if built.learned is not None:  # the documents it re-rendered are written: what it learned holds
        built.learned.commit()
    log_skips(persona, built.skips)


def record_owed(ix: Indexer, learned: StagedMemory | None) -> None:
    """Record (labels only) the sessions of other personas a build owes secret values to, so a
    restart before their persona's pass does not lose them. Call in the state transaction."""
    if learned is not None:
        for persona, labels in learned.owed_sessions().items():
            ix.state.add_secret_rechecks(persona, labels)


def log_skips(persona: str, skips: Sequence[Skip]) -> None:
    """One warning per (session, reason) and batch, with a count and examples:
    a 20,000-id ancestry of dangling ids is one line, not 20,000."""
    groups: dict[tuple[str, str], list[Skip]] = {}
    for skip in skips:
        groups.setdefault((skip.session, skip.reason.value), []).append(skip)
    for (session, reason), items in groups.items():
        log.warning("document.skipped", persona=persona, session=session, reason=reason, count=len(items),
                    turn_ids=[s.turn_id for s in items[:3]], detail=items[0].detail)


def stale_paths(ix: Indexer, persona: str, built: Built) -> set[str]:
    """Documents of a session whose turn left the session's ancestry (a rewind)."""
    stale: set[str] = set()
    for label, ancestry in built.ancestry.items():
        keep = set(ancestry)
        stale.update(p for p, t in ix.state.session_documents(persona, label) if t not in keep)
    return stale
