"""``sync_once()``: one pass from the ledger to the sinks. The daemon only repeats it.

Per persona:

- **tail** (cursor present): ``session_history`` rows after the cursor,
  coalesced per session; each touched session's head ancestry is walked and
  the turns not indexed yet for that session are built; pending/streaming
  turns seen earlier are revisited, and turns built before that got a message
  since (:mod:`indexer.sync.late`); ledger status changes (``deleted``, made
  live again, moved to another persona) are picked up from one scan of the
  persona's sessions.
- **backfill** (cursor missing, or due: the ledger's messages renumbered):
  every session of the persona.
- **rebuild** (``force=True`` or a change of the index metadata: redaction,
  embedding model, chunking, sinks): every session, written into a new
  generation of every sink, switched in only when complete, so search keeps
  answering from the old one meanwhile.

Write order per batch: sinks first, then hashes and cursor in one state-DB
transaction. Sinks are idempotent (upsert by path), so a crash between the
two replays the batch and neither loses nor duplicates.
"""

from __future__ import annotations

from collections import Counter

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import structlog

from indexer.core.documents import Skip
from indexer.core.types import Document, Source
from indexer.state.db import Position, now_ms
from indexer.sync.build import Built, build_sessions
from indexer.sync.context import Indexer
from indexer.sync.quiet import LedgerStamp, ledger_stamp
from indexer.sync.recurring import StagedMemory
from indexer.sync.visibility import UNSCOPED_WRITES, reconcile_unscoped, remember_private_turns, switch_in_rebuild
from indexer.sync import late
from ledger.reader import LedgerReader
from ledger.rows import SessionRow

log = structlog.get_logger("indexer.sync")
from indexer.sync.progress import Progress
from indexer.sync.summary import PersonaSummary, SyncInterrupted, SyncSummary, check_stop
from indexer.sync.writes import (
    Target,
    live_targets,
    record_truncations,
    write_batch,
    write_in_parts,
)

SESSIONS_PER_BATCH = 50
HISTORY_ROWS_PER_BATCH = 2000



def _commit_state(ix: Indexer, persona: str, summary: PersonaSummary, built: Built,
                  deletions: set[str], cursor: int | None) -> None:
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
        _record_owed(ix, built.learned)
        ix.state.clear_secret_rechecks(persona, built.rechecked)
        ix.state.record_empty(persona, built.empty,
                              filled=[(d.session, d.turn_id) for d in built.docs if d.session] + built.left)
    if built.learned is not None:  # the documents it re-rendered are written: what it learned holds
        built.learned.commit()
    _log_skips(persona, built.skips)


def _record_owed(ix: Indexer, learned: StagedMemory | None) -> None:
    """Record (labels only) the sessions of other personas a build owes secret values to, so a
    restart before their persona's pass does not lose them. Call in the state transaction."""
    if learned is not None:
        for persona, labels in learned.owed_sessions().items():
            ix.state.add_secret_rechecks(persona, labels)


def _log_skips(persona: str, skips: Sequence[Skip]) -> None:
    """One warning per (session, reason) and batch, with a count and examples:
    a 20,000-id ancestry of dangling ids is one line, not 20,000."""
    groups: dict[tuple[str, str], list[Skip]] = {}
    for skip in skips:
        groups.setdefault((skip.session, skip.reason.value), []).append(skip)
    for (session, reason), items in groups.items():
        log.warning("document.skipped", persona=persona, session=session, reason=reason, count=len(items),
                    turn_ids=[s.turn_id for s in items[:3]], detail=items[0].detail)


def _stale_paths(ix: Indexer, persona: str, built: Built) -> set[str]:
    """Documents of a session whose turn left the session's ancestry (a rewind)."""
    stale: set[str] = set()
    for label, ancestry in built.ancestry.items():
        keep = set(ancestry)
        stale.update(p for p, t in ix.state.session_documents(persona, label) if t not in keep)
    return stale



# -- session status (deleted sessions) -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RegistryChanges:
    """What a registry refresh found."""

    deleted: set[str]  # sessions the ledger deleted (or no longer holds)
    revived: list[str]  # deleted before, live again: built now (no history row says so)
    arrived: list[str]  # moved here from another persona: built now
    #: every session to build now (a tail's): the revived, the arrived, those first seen here (moved from
    #: a persona this index does not sync: its history rows were passed over), and those a pass that
    #: failed had found (``StateDB.sessions_to_build``)
    to_build: list[str]


def _refresh_registry(ix: Indexer, reader: LedgerReader, persona: str, sessions: Sequence[SessionRow],
                      summary: PersonaSummary, *, tail_from: int | None = None,
                      rebuilding: bool = False) -> RegistryChanges:
    """Record every session's ledger status; purge documents of deleted (or vanished) sessions,
    and another persona's documents of a session the ledger now gives to ``persona``.
    ``tail_from``: a tail's cursor (its history loop builds the sessions with rows after it); None
    for a pass that builds every session (a backfill, a rebuild): none is noted to build, except
    that a forced ``rebuilding`` notes the sessions live again or new here — it commits their
    registry rows now and may fail or stop before its switch, and the pass after it is a tail."""
    known = ix.state.session_statuses(persona)
    present = {s.label for s in sessions}
    if len(present) < len(sessions):  # labels that are not valid UTF-8 can read back the same
        seen = Counter(s.label for s in sessions)
        log.warning("ledger.label_collision", persona=persona, sessions=sorted(l for l, n in seen.items() if n > 1),
                    action="only one of the sessions each label names is indexed: give the others distinct labels")
    missing = sorted(label for label in known if label not in present)
    # a session gone from this persona may live on under another (its persona_id changed): then its
    # documents here go, and its registry row is left for that persona's pass to take over (looked
    # up once, when it goes: not for every session long deleted)
    leaving = [label for label in missing if known[label] != "deleted"]
    moved_out = {s.label: s.persona for s in reader.sessions(labels=leaving) if s.persona != persona} if leaving else {}
    arrived = {label: other for label, other in ix.state.registered_personas(present - set(known)).items()
               if other != persona}
    # gone to a persona this index does not sync: no pass of that persona takes the registry row
    # over, so it goes with the session now, as no longer indexed ("deleted": built again wherever
    # it is synced next — back here, or there once that persona is synced)
    synced = set(ix.config.ledger.personas)
    unsynced = {label: other for label, other in moved_out.items() if synced and other not in synced}
    rows = [(s.label, s.persona, s.status) for s in sessions]
    rows += [(label, persona, "deleted") for label in missing if label not in moved_out]
    rows += [(label, other, "deleted") for label, other in unsynced.items()]
    changed = [r for r in rows if known.get(r[0]) != r[2]]
    deleted = {label for label, _, status in rows if status == "deleted"}
    revived = sorted(s.label for s in sessions if known.get(s.label) == "deleted" and s.status != "deleted")
    to_build: list[str] = []
    first_seen = {s.label for s in sessions if s.label not in known and s.status != "deleted"}
    if tail_from is not None:
        if first_seen:  # those with history rows after the cursor are the history loop's to build
            with reader.snapshot():
                first_seen -= {s.label for s in reader.sessions(history_range=(tail_from, summary.head),
                                                                persona=persona)}
        to_build = sorted(set(revived) | first_seen | ix.state.sessions_to_build(persona))
    elif rebuilding:  # cleared at the rebuild's switch; built by the next tail if it never gets there
        to_build = sorted(set(revived) | first_seen)
    left = {label: ix.state.paths(persona, session=label) for label in moved_out}
    purge: dict[str, set[str]] = {persona: set().union(*left.values())}
    for label in deleted:
        purge[persona] |= ix.state.paths(persona, session=label)
    for label, other in arrived.items():
        purge.setdefault(other, set()).update(ix.state.paths(other, session=label))
    for owner, paths in purge.items():
        if paths:
            for sink in ix.sinks:
                sink.delete(owner, paths)
    # a turn still streaming when its session was deleted: nothing is left to revisit
    orphaned = [(s, t) for s, t in ix.state.pending(persona) if s in deleted]
    if changed or any(purge.values()) or moved_out or arrived or orphaned:
        with ix.state.atomic():
            ix.state.register_sessions(changed)
            for owner, paths in purge.items():
                ix.state.forget_documents(owner, paths)
            # what the old persona kept of a session that moved (pending, bad and empty turns) goes too:
            # revisited there, it would be built as the old persona's
            ix.state.forget_sessions(persona, moved_out)
            for label, other in unsynced.items():  # its record of own turns goes with its row, at once
                ix.state.private.move(label, persona, other)
            for label, other in arrived.items():
                ix.state.forget_sessions(other, [label])
                ix.state.private.move(label, other, persona)
            ix.state.add_sessions_to_build(persona, to_build)  # cleared once built
            ix.state.clear_pending(persona, orphaned)
    summary.documents_deleted += sum(map(len, purge.values()))
    for label, _, status in changed:
        # A status change is news; a session seen for the first time is not.
        if label in known or status == "deleted":
            log.info("session.status", persona=persona, session=label, status=status, was=known.get(label))
    for label, other in sorted(moved_out.items()):
        if left[label]:  # its new persona's pass builds it (session.moved)
            log.info("session.left", persona=persona, session=label, to=other, documents_removed=len(left[label]))
    for label, other in sorted(arrived.items()):  # logged once, by the persona that takes it over
        log.info("session.moved", persona=persona, session=label, was=other)
    if orphaned:
        log.info("pending.dropped", persona=persona, reason="session_deleted", turns=len(orphaned))
    return RegistryChanges(deleted, revived, sorted(arrived), to_build)


# -- the three modes ------------------------------------------------------------------------------


BAD_CHECKS_PER_PASS = 200  # bad turns whose rows are compared per pass (least recently compared first)


def _bad_rows_changed(ix: Indexer, reader: LedgerReader, persona: str, deleted: set[str],
                      stamp: LedgerStamp | None) -> list[str]:
    """Sessions holding a bad turn whose ledger rows changed since it failed
    (repaired in place: no history row says so). Compares at most
    BAD_CHECKS_PER_PASS fingerprints a pass, rotating through a longer list;
    when they all fit, a pass writes nothing. Once every bad turn was compared
    with the ledger files as they are (``stamp``), passes skip the comparison
    until the files change (:mod:`indexer.sync.quiet`)."""
    if ix.quiet.unchanged("bad", persona, stamp):
        return []
    started = ix.quiet.rotation_start_ms(persona, stamp, now_ms())
    items = ix.state.bad_to_check(persona, BAD_CHECKS_PER_PASS)
    if not items:
        ix.quiet.ran("bad", persona, stamp)
        return []
    with reader.snapshot():
        now = reader.turn_fingerprints(t for _s, t, _f in items)
    if len(items) == BAD_CHECKS_PER_PASS:
        with ix.state.atomic():  # later than `started`: what was compared before it stays older
            ix.state.mark_bad_checked(persona, [(s, t) for s, t, _f in items], at=max(now_ms(), started + 1))
        if (ix.state.oldest_bad_check(persona) or 0) > started:  # a whole rotation at this stamp
            ix.quiet.ran("bad", persona, stamp)
    else:
        ix.quiet.ran("bad", persona, stamp)
    return sorted({s for s, t, f in items if now.get(t) != f} - deleted)


def _retry_bad(ix: Indexer, reader: LedgerReader, persona: str, summary: PersonaSummary, labels: Sequence[str],
               why: str, stop: threading.Event | None, progress: Progress | None) -> None:
    """Build the sessions holding bad turns again, now (their bad turns included)."""
    if not labels:
        return
    before = ix.state.bad_count(persona)
    _build_now(ix, reader, persona, summary, labels, stop, progress)
    summary.bad_retried += len(labels)
    log.info("sync.bad_retried", persona=persona, why=why, sessions=len(labels),
             still_bad=ix.state.bad_count(persona), were_bad=before)


def _build_now(ix: Indexer, reader: LedgerReader, persona: str, summary: PersonaSummary, labels: Sequence[str],
               stop: threading.Event | None, progress: Progress | None) -> None:
    """Build ``labels`` (live sessions of ``persona``) now: every turn not indexed for them yet,
    and their bad turns. In batches of SESSIONS_PER_BATCH (a whole persona may arrive at once)."""
    labels = sorted(set(labels))
    for start in range(0, len(labels), SESSIONS_PER_BATCH):
        check_stop(stop)
        with reader.snapshot():
            current = [s for s in reader.sessions(labels=labels[start:start + SESSIONS_PER_BATCH], persona=persona)
                       if s.status != "deleted"]
            built = build_sessions(ix, reader, persona, current, only_new=True)
        write_in_parts(ix, persona, built.docs, live_targets(ix, persona), summary, skip_unchanged=True,
                       stop=stop, progress=progress)
        _commit_state(ix, persona, summary, built, set(), None)


def _write_owed(ix: Indexer, reader: LedgerReader, persona: str, summary: PersonaSummary, deleted: set[str],
                stop: threading.Event | None, progress: Progress | None) -> None:
    """Sessions a build of another persona found secret values for (in turns they hold: a
    subagent's fork and its parent): build them, so their documents holding one are rewritten."""
    if ix.secrets is None:
        return
    # Recorded in the state DB by a build of an earlier process (this one's are in its memory too):
    # read until this process has built them once.
    recovering = not ix.secrets.recovered(persona)
    recheck = ix.state.secret_rechecks(persona) if recovering else set()
    owed = sorted(set(ix.secrets.owing(persona)) | recheck)
    if not owed:
        if recovering:
            ix.secrets.recovered(persona, True)
        return
    with reader.snapshot():
        current = [s for s in reader.sessions(labels=owed, persona=persona) if s.status != "deleted"]
        built = build_sessions(ix, reader, persona, current, only_new=True, recheck=owed)
    gone = sorted(set(owed) - {s.label for s in current} | (set(owed) & deleted))
    ix.secrets.forget_owed(persona, gone)
    built.rechecked = sorted(set(built.rechecked) | set(gone))
    write_in_parts(ix, persona, built.docs, live_targets(ix, persona), summary, skip_unchanged=True, stop=stop,
                   progress=progress)
    _commit_state(ix, persona, summary, built, set(), None)
    ix.secrets.recovered(persona, True)


def _tail(ix: Indexer, reader: LedgerReader, persona: str, cursor: int, summary: PersonaSummary,
          stop: threading.Event | None, progress: Progress | None, *, retry_bad: bool = False,
          stamp: LedgerStamp | None = None) -> None:
    head = summary.head
    live = live_targets(ix, persona)
    # Session statuses and pending turns change only with a ledger write: with the
    # files as they were when these last ran, nothing can have moved.
    sessions_quiet = not retry_bad and ix.quiet.unchanged("sessions", persona, stamp)
    if sessions_quiet:
        deleted = ix.state.deleted_sessions(persona)
    else:
        with reader.snapshot():
            sessions = reader.sessions(persona=persona)
        changes = _refresh_registry(ix, reader, persona, sessions, summary, tail_from=cursor)
        deleted = changes.deleted
        if changes.to_build:  # live again, or moved here: no history row says so
            _build_now(ix, reader, persona, summary, changes.to_build, stop, progress)
            with ix.state.atomic():
                ix.state.clear_sessions_to_build(persona, changes.to_build)
            summary.sessions += len(changes.to_build)
    if retry_bad:
        labels = sorted({s for s, _t in ix.state.bad_items(persona)} - deleted)
        _retry_bad(ix, reader, persona, summary, labels, "requested", stop, progress)
    else:
        _retry_bad(ix, reader, persona, summary, _bad_rows_changed(ix, reader, persona, deleted, stamp),
                   "rows_changed", stop, progress)
    _write_owed(ix, reader, persona, summary, deleted, stop, progress)
    if not sessions_quiet:
        pending = [(s, t) for s, t in ix.state.pending(persona) if s not in deleted]
        # turns built before that a message reached since (no history row says so): built again
        arrived, mark = late.late_turns(ix, reader, persona, deleted)
        revisit = pending + [p for p in arrived if p not in pending]
        if revisit:
            with reader.snapshot():
                built = build_sessions(ix, reader, persona, [], only_new=True, extra_turns=revisit)
            write_in_parts(ix, persona, built.docs, live, summary, skip_unchanged=True, stop=stop,
                           progress=progress)
            _commit_state(ix, persona, summary, built, set(), None)
        late.keep(ix, persona, mark)
        ix.quiet.ran("sessions", persona, stamp)
    position = cursor
    while position < head:
        check_stop(stop)
        with reader.snapshot():
            rows = reader.history_after(position, upto=head, persona=persona, limit=HISTORY_ROWS_PER_BATCH)
            batch_end = rows[-1].id if len(rows) == HISTORY_ROWS_PER_BATCH else head
            labels = list(dict.fromkeys(r.session_label for r in reversed(rows)))  # latest first
            order = {label: i for i, label in enumerate(labels)}
            current = sorted((s for s in reader.sessions(history_range=(position, batch_end), persona=persona)
                              if s.status != "deleted"), key=lambda s: order.get(s.label, len(order)))
            built = build_sessions(ix, reader, persona, current, only_new=True)
        summary.sessions += len(current)
        write_in_parts(ix, persona, built.docs, live, summary, skip_unchanged=True, stop=stop, progress=progress)
        stale = _stale_paths(ix, persona, built)
        write_batch(ix, persona, [], stale, live, skip_unchanged=True)
        _commit_state(ix, persona, summary, built, stale, batch_end)
        summary.documents_deleted += len(stale)
        if progress is not None:
            progress.advanced(persona, built.not_written())
        position = batch_end
    summary.cursor = position


def _walk_all(ix: Indexer, reader: LedgerReader, persona: str, summary: PersonaSummary,
              targets: Sequence[Target], *, rebuilding: bool, stop: threading.Event | None,
              progress: Progress | None, on_batch: Callable[[list[Document], Built], None],
              learned: StagedMemory | None = None) -> set[str]:
    with reader.snapshot():
        sessions = [s for s in reader.sessions(persona=persona) if s.status != "deleted"]
    summary.sessions = len(sessions)
    seen: set[str] = set()
    # A rebuild records its documents only at the end: which sessions hold which turn, for
    # the secret memory's pushes to sessions built in an earlier batch (indexer.sync.secret_spread).
    pass_holders: dict[str, set[str]] | None = {} if rebuilding else None
    for start in range(0, len(sessions), SESSIONS_PER_BATCH):
        check_stop(stop)
        part = sessions[start : start + SESSIONS_PER_BATCH]
        with reader.snapshot():
            built = build_sessions(ix, reader, persona, part, only_new=False, pass_holders=pass_holders,
                                   learned=learned)
        written = write_in_parts(ix, persona, built.docs, targets, summary, skip_unchanged=not rebuilding,
                                  stop=stop, progress=progress, record=not rebuilding)
        on_batch(written, built)
        seen.update(d.path for d in built.docs)
        if progress is not None:
            progress.advanced(persona, built.not_written())
    return seen


def _backfill(ix: Indexer, reader: LedgerReader, persona: str, summary: PersonaSummary,
              stop: threading.Event | None, progress: Progress | None) -> None:
    mark = late.start(ix, reader)  # a message after this reaches a turn it built: built again
    with reader.snapshot():
        sessions = reader.sessions(persona=persona)
    _refresh_registry(ix, reader, persona, sessions, summary)

    def commit(written: list[Document], built: Built) -> None:
        _commit_state(ix, persona, summary, built, set(), None)

    seen = _walk_all(ix, reader, persona, summary, live_targets(ix, persona), rebuilding=False, stop=stop,
                     progress=progress, on_batch=commit)
    sessions_docs = ix.state.paths(persona, source=Source.SESSIONS.value)
    stale = sessions_docs - seen
    if stale:
        for sink in ix.sinks:
            sink.delete(persona, stale)
    with ix.state.atomic():
        ix.state.forget_documents(persona, stale)
        ix.state.set_cursor(persona, summary.head)
        ix.state.set_build_identity(persona, ix.build_identity)
        late.keep(ix, persona, mark)
        ix.state.set_backfill_due(persona, None)
        ix.state.clear_sessions_to_build(persona)
    summary.documents_deleted += len(stale)
    summary.cursor = summary.head


def _rebuild(ix: Indexer, reader: LedgerReader, persona: str, summary: PersonaSummary,
             stop: threading.Event | None, progress: Progress | None) -> None:
    mark = late.start(ix, reader)
    with reader.snapshot():
        sessions = reader.sessions(persona=persona)
    _refresh_registry(ix, reader, persona, sessions, summary, rebuilding=True)
    targets = [Target(ix, persona, sink, rebuild=sink.rebuild(persona)) for sink in ix.sinks]
    all_docs: list[Document] = []
    all_skips: list[Skip] = []
    pending: list[tuple[str, str]] = []

    fingerprints: dict[str, str] = {}
    # what the rebuild learns takes effect once its generation is switched in
    learned = ix.secrets.stage() if ix.secrets is not None else None

    rechecked: list[str] = []

    empty: list[tuple[str, str]] = []

    def collect(written: list[Document], built: Built) -> None:
        rechecked.extend(built.rechecked)
        all_docs.extend(written)
        all_skips.extend(built.skips)
        pending.extend(built.pending)
        fingerprints.update(built.fingerprints)
        empty.extend(built.empty)

    try:
        _walk_all(ix, reader, persona, summary, targets, rebuilding=True, stop=stop, progress=progress,
                  on_batch=collect, learned=learned)
        memory_docs = ix.memory_documents(persona)
        for t in targets:
            if memory_docs:
                t.rebuild.upsert(memory_docs)
        # Switch in, settle what a visibility change did meanwhile, and record
        # the new set, with no visibility change in between (see sync_visibility).
        with UNSCOPED_WRITES:
            # noted while staged, by the visibility then; no change comes between this and the record
            ix.in_flight.note(persona, all_docs)
            for t in targets:
                if t.unscoped:
                    switch_in_rebuild(ix, persona, t.sink, t.rebuild, all_docs + list(memory_docs),
                                      t.staged_sessions, t.withheld)
                else:
                    t.rebuild.commit()
            _record_rebuild(ix, persona, summary, all_docs, memory_docs, all_skips, pending, fingerprints,
                            learned, rechecked, empty, mark)
        if learned is not None:
            learned.commit()
        _log_skips(persona, all_skips)  # a rebuild skips like a tail: one line per session and reason
    except BaseException:
        for t in targets:
            try:
                t.rebuild.abort()
            except Exception as exc:  # keep the original error
                log.warning("rebuild.abort_failed", persona=persona, error=str(exc))
        raise
    summary.cursor = summary.head


def _record_rebuild(ix: Indexer, persona: str, summary: PersonaSummary, docs: list[Document],
                    memory_docs: list[Document], skips: list[Skip], pending: list[tuple[str, str]],
                    fingerprints: dict[str, str], learned: StagedMemory | None = None,
                    rechecked: Sequence[str] = (), empty: Sequence[tuple[str, str]] = (),
                    mark: late.LateMark | None = None) -> None:
    old = ix.state.paths(persona)  # read before the write transaction (no read-to-write upgrade in it)
    with ix.state.atomic():
        ix.state.forget_documents(persona, old)
        ix.state.clear_bad(persona)
        ix.state.record_documents(docs + list(memory_docs))
        record_truncations(ix, persona, docs, fresh=True)
        summary.documents_skipped_bad += ix.state.record_bad(
            persona, [(s.session, s.turn_id or "", s.reason.value, s.detail) for s in skips], fingerprints)
        ix.state.clear_pending(persona, ix.state.pending(persona))  # what the ledger gives now, only
        ix.state.set_pending(persona, pending)
        ix.state.set_cursor(persona, summary.head)
        ix.state.set_build_identity(persona, ix.build_identity)
        _record_owed(ix, learned)
        ix.state.clear_secret_rechecks(persona, rechecked)
        ix.state.forget_empty(persona)
        ix.state.record_empty(persona, empty, filled=())
        ix.state.clear_sessions_to_build(persona)
        if mark is not None:
            late.keep(ix, persona, mark)
        ix.state.set_backfill_due(persona, None)


# -- entry point -------------------------------------------------------------------------------------


def _forget_replaced_source(ix: Indexer, reader: LedgerReader, targets: Sequence[str]) -> None:
    """Another ledger now sits at the configured path: a new source. Its ids
    mean nothing to our cursors, and the old ledger's pending turns, bad rows
    and derived sets describe rows that no longer exist. Personas it no longer
    holds leave every store; the others are backfilled (unchanged documents
    are skipped by hash, so that is cheap)."""
    present = set(reader.personas())
    for persona in set(targets) | set(ix.state.personas_indexed()):
        if persona not in present:
            gone = ix.state.paths(persona)
            if gone:
                for sink in ix.sinks:
                    sink.delete(persona, gone)
            with ix.state.atomic():
                ix.state.forget_documents(persona, gone)
            log.warning("ledger.persona_gone", persona=persona, documents_removed=len(gone))
        ix.state.forget_source(persona)
    ix.quiet.forget()


def _remember_cursor_row(ix: Indexer, reader: LedgerReader, persona: str, checked: Position | None = None) -> None:
    """Record the digest of the row at the cursor. ``checked``: the position :func:`_history_rewritten`
    found intact this pass (the cursor unchanged since: nothing to do)."""
    position = ix.state.position(persona)
    if position is None or position == checked:
        return  # a no-op pass reads and writes nothing more
    ix.state.set_cursor_row(persona, Position(position.history_id, reader.history_row_fingerprint(position.history_id)))


def _history_rewritten(reader: LedgerReader, position: Position) -> tuple[bool, Position | None]:
    """One primary-key lookup a pass: is the row at the cursor still the one we processed?
    Also returns the position when it was found intact (for :func:`_remember_cursor_row`)."""
    if position.row is None:
        return False, None  # not recorded for this cursor (older index, or a kill before it was): nothing to compare
    if reader.history_row_fingerprint(position.history_id) != position.row:
        return True, None
    return False, position


@dataclass(frozen=True)
class PersonaPlan:
    """What a pass will do for one persona, decided before any of it is done."""

    persona: str
    mode: str  # tail | backfill | rebuild
    cursor: int | None
    head: int
    cursor_row: Position | None = None  # the cursor's position found intact (tail only)


def _decide(ix: Indexer, reader: LedgerReader, persona: str, *, force: bool) -> PersonaPlan:
    head = reader.head_id()
    cursor = ix.state.get_cursor(persona)
    changed = ix.build_identity.differences(ix.state.build_identity(persona))
    sink_wants_rebuild = any(sink.needs_rebuild(persona) for sink in ix.sinks)
    if not force and cursor is not None and ix.state.has_documents(persona):
        # The state DB lists documents a sink no longer holds at all (its folder deleted, another
        # index location configured): hash skips would write nothing and search would stay empty.
        lost = [why for sink in ix.sinks if (why := sink.missing(persona))]
        if lost:
            log.warning("index.lost", persona=persona, sinks=lost, action="rebuilding the persona from the ledger")
            sink_wants_rebuild = True
    if force or sink_wants_rebuild or (cursor is not None and changed):
        if not force and cursor is not None and changed:
            log.info("index.build_changed", persona=persona, changed=changed)
        return PersonaPlan(persona, "rebuild", cursor, head)
    if cursor is None:
        return PersonaPlan(persona, "backfill", cursor, head)
    due = ix.state.backfill_due(persona)
    if due:  # e.g. the ledger's messages renumbered: which turns got a message since is not known
        log.info("index.backfill_due", persona=persona, why=due)
        return PersonaPlan(persona, "backfill", cursor, head)
    if cursor > head:
        # The ledger was replaced or rewound below our cursor: start over.
        log.warning("ledger.rewound", persona=persona, cursor=cursor, head=head)
        return PersonaPlan(persona, "backfill", cursor, head)
    rewritten, cursor_row = _history_rewritten(reader, ix.state.position(persona))
    if rewritten:
        # Rows at or below the cursor were deleted and their ids reused
        # (no AUTOINCREMENT): the tail would never read them.
        log.warning("ledger.ids_reused", persona=persona, cursor=cursor, head=head)
        return PersonaPlan(persona, "backfill", cursor, head)
    return PersonaPlan(persona, "tail", cursor, head, cursor_row)


def _planned_documents(ix: Indexer, reader: LedgerReader, plan: PersonaPlan, *, retry_bad: bool) -> int:
    """How many turns the pass will consider for ``plan.persona``: every turn of every live
    session for a backfill or a rebuild; for a tail, the turns not indexed yet of the sessions
    with new history rows (plus the bad turns a ``--retry-bad`` builds again). No query at all
    when the cursor is at the head: a no-op pass stays free."""
    if plan.mode != "tail":
        with reader.snapshot():
            return sum(reader.ancestry_lengths(plan.persona).values())
    work = ix.state.bad_count(plan.persona) if retry_bad else 0
    if plan.cursor is None or plan.cursor >= plan.head:
        return work
    with reader.snapshot():
        lengths = reader.ancestry_lengths(plan.persona, history_range=(plan.cursor, plan.head))
    known = ix.state.indexed_turn_counts(plan.persona, lengths)
    return work + sum(max(0, n - known.get(label, 0)) for label, n in lengths.items())


def select_personas(ix: Indexer, reader: LedgerReader) -> list[str]:
    configured = list(ix.config.ledger.personas)
    # and a persona whose every session left the ledger: its pass purges their documents
    return configured or sorted(set(reader.personas()) | ix.state.personas_with_live_sessions())


class UnknownPersonas(ValueError):
    """Personas named for a pass that neither the ledger, the config nor the index knows (a typo
    would otherwise "succeed" with nothing written and leave an empty index behind)."""


def _check_named(ix: Indexer, reader: LedgerReader, personas: Sequence[str]) -> None:
    known = (set(select_personas(ix, reader)) | set(reader.personas()) | set(ix.config.memory)
             | set(ix.state.personas_indexed()))
    unknown = sorted(set(personas) - known)
    if unknown:
        raise UnknownPersonas(f"unknown persona(s): {', '.join(map(repr, unknown))} — known: "
                              f"{', '.join(map(repr, sorted(known))) or 'none yet'} (names are case-sensitive)")


def sync_once(
    ix: Indexer,
    *,
    force: bool = False,
    personas: Sequence[str] | None = None,
    stop: threading.Event | None = None,
    progress: Progress | None = None,
    retry_bad: bool = False,
) -> SyncSummary:
    """One pass over every selected persona. Raises on sink or ledger failure,
    after which cursor and hashes are exactly as the last committed batch left them."""
    started = time.monotonic()
    summary = SyncSummary()
    stamp = ledger_stamp(ix.config.ledger.path)  # before any read: a write after it changes the next one
    reader = ix.pass_reader(stamp)
    ok = False
    try:
        if personas:
            _check_named(ix, reader, personas)
        targets = list(personas) if personas else select_personas(ix, reader)
        identity = reader.identity()
        known_identity = ix.state.ledger_identity()
        if identity and known_identity and identity != known_identity:
            # Another ledger file now sits at the configured path: its ids mean
            # nothing to our cursors. Start over from a backfill (hash skip keeps it cheap).
            log.warning("ledger.replaced", path=str(ix.config.ledger.path))
            _forget_replaced_source(ix, reader, targets)
        if identity and identity != known_identity:
            ix.state.set_ledger_identity(identity)
        if not ix.late_marks_converted:  # marks of an earlier layout, every persona's: until done
            ix.late_marks_converted = late.convert_marks(ix)
        plans = [_decide(ix, reader, persona, force=force) for persona in targets]
        if progress is not None:
            # Count the work of every persona before doing any: one total from the first second.
            progress.planned({plan.persona: _planned_documents(ix, reader, plan, retry_bad=retry_bad)
                              for plan in plans})
        # Before any write: a private session's turns this pass indexes are known as its own before a
        # fork's copies of them are — in every persona holding private sessions, not only those synced
        # now (a subagent of another persona may fork from one). Read again only when the ledger
        # moved; kept past a delete or rewind.
        for persona in sorted({p.persona for p in plans} | ix.state.personas_with_private_sessions()):
            if not ix.quiet.unchanged("private", persona, stamp):
                remember_private_turns(ix, reader, persona)
                ix.quiet.ran("private", persona, stamp)
        for plan in plans:
            persona, mode, cursor, head, cursor_row = plan.persona, plan.mode, plan.cursor, plan.head, plan.cursor_row
            ps = PersonaSummary(persona=persona, mode=mode, cursor_before=cursor, head=head)
            summary.personas[persona] = ps
            try:
                if mode == "tail":
                    _tail(ix, reader, persona, cursor or 0, ps, stop, progress, retry_bad=retry_bad, stamp=stamp)
                elif mode == "backfill":
                    _backfill(ix, reader, persona, ps, stop, progress)
                else:
                    _rebuild(ix, reader, persona, ps, stop, progress)
                if mode != "rebuild":
                    ps.documents_written += ix.sync_memory(persona)
                removed, restored = reconcile_unscoped(ix, reader, persona)
                ps.documents_deleted += removed
                ps.documents_written += restored
            except SyncInterrupted:
                ix.quiet.forget(persona)  # a check marked done may have found work the pass did not finish
                summary.interrupted = True
                ps.cursor = ix.state.get_cursor(persona)
                break
            except BaseException:
                ix.quiet.forget(persona)  # e.g. bad turns found changed whose rebuild failed: compare again
                raise
            ps.pending_turns = ix.state.pending_count(persona)
            _remember_cursor_row(ix, reader, persona, cursor_row)
            if progress is not None:
                progress.finished(persona)
        if summary.documents_written or summary.total("documents_deleted"):
            with UNSCOPED_WRITES:  # one `qmd update` at a time (apply_visibility runs it too)
                for sink in ix.sinks:
                    sink.after_batch()
        if not summary.interrupted:
            # object storage: readers on other machines scope by what the writer publishes
            # (sessions registered or deleted, build identities); skipped when nothing changed
            ix.publish_scopes()
        ok = True
    finally:
        ix.end_pass_reader(reader, stamp if ok else None)
        summary.seconds = time.monotonic() - started
    log.info("sync.done", **{k: v for k, v in summary.as_dict().items() if k != "personas"},
             modes={p: s.mode for p, s in summary.personas.items()})
    return summary

