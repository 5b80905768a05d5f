"""``sync_once()``: one pass from the ledger to the sinks. The daemon only repeats it.

Per persona:

- **tail** (cursor present; :mod:`indexer.sync.tail`): one read of what changed
  (the ledger's sessions, the messages after the late mark, the bad rows'
  digests, the revisit queue), one plan made of it by a pure function
  (:class:`indexer.sync.tail_plan.TailPlan`: sessions to purge, leave, build
  or revisit, each with its reason, and the history rows after the cursor),
  then its builds batch by batch.
- **backfill** (cursor missing, or due: the ledger's messages renumbered):
  every session of the persona.
- **rebuild** (``force=True`` or a change of the index metadata: redaction,
  embedding model, chunking, sinks): every session, written into a new
  generation of every sink, switched in only when complete, so search keeps
  answering from the old one meanwhile.

Each persona's mode, and why, is a plan decided before anything is done
(:mod:`indexer.sync.plan`, a pure function of what the ledger and the state
say); so is a tail's work (:mod:`indexer.sync.tail_plan`) and the registry's
changes of a backfill or rebuild (:mod:`indexer.sync.registry`). Write order per
batch: sinks first, then hashes, the revisit queue and the cursor in one state-DB
transaction (:mod:`indexer.sync.commit`). Sinks are idempotent (upsert by path),
so a crash between the two replays the batch and neither loses nor duplicates.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import structlog

from indexer.core.documents import Skip
from indexer.core.types import Document, Source
from indexer.state.db import Position
from indexer.sync import build, late
from indexer.sync.build import Built
from indexer.sync.commit import commit_state, log_skips, record_owed
from indexer.sync.context import Indexer
from indexer.sync.plan import PassMode, PersonaPlan, decide, gather, log_plan
from indexer.sync.progress import Progress
from indexer.sync.quiet import ledger_stamp
from indexer.sync.recurring import StagedMemory
from indexer.sync.registry import refresh_registry
from indexer.sync.summary import PersonaSummary, SyncInterrupted, SyncSummary, check_stop
from indexer.sync.tail import run_tail
from indexer.sync.visibility import UNSCOPED_WRITES, reconcile_unscoped, remember_private_turns, switch_in_rebuild
from indexer.sync.work import EVERY_TURN
from indexer.sync.writes import Target, live_targets, record_truncations, write_in_parts
from ledger.reader import LedgerReader

log = structlog.get_logger("indexer.sync")


# -- the three modes ------------------------------------------------------------------------------


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
    size = build.SESSIONS_PER_BATCH
    for start in range(0, len(sessions), size):
        check_stop(stop)
        part = sessions[start : start + size]
        with reader.snapshot():
            built = build.build_sessions(ix, reader, persona, part, step=EVERY_TURN, pass_holders=pass_holders,
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
    refresh_registry(ix, reader, persona, sessions, summary)

    def commit(written: list[Document], built: Built) -> None:
        commit_state(ix, persona, summary, built, set(), None)

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
        ix.state.clear_late(persona)  # every turn was built as the ledger has it
    summary.documents_deleted += len(stale)
    summary.cursor = summary.head


def _rebuild(ix: Indexer, reader: LedgerReader, persona: str, summary: PersonaSummary,
             stop: threading.Event | None, progress: Progress | None) -> None:
    mark = late.start(ix, reader)
    with reader.snapshot():
        sessions = reader.sessions(persona=persona)
    refresh_registry(ix, reader, persona, sessions, summary, rebuilding=True)
    rebuilds = [sink.rebuild(persona) for sink in ix.sinks]
    targets = [Target(ix, persona, sink, rebuild=rebuild) for sink, rebuild in zip(ix.sinks, rebuilds)]
    # what the rebuild learns takes effect once its generation is switched in
    got = Rebuilt(mark=mark, learned=ix.secrets.stage() if ix.secrets is not None else None)
    try:
        _walk_all(ix, reader, persona, summary, targets, rebuilding=True, stop=stop, progress=progress,
                  on_batch=got.add, learned=got.learned)
        memory_docs = ix.memory_documents(persona)
        for rebuild in rebuilds:
            if memory_docs:
                rebuild.upsert(memory_docs)
        # Switch in, settle what a visibility change did meanwhile, and record
        # the new set, with no visibility change in between (see sync_visibility).
        with UNSCOPED_WRITES:
            # noted while staged, by the visibility then; no change comes between this and the record
            ix.in_flight.note(persona, got.docs)
            for t, rebuild in zip(targets, rebuilds):
                if t.unscoped:
                    switch_in_rebuild(ix, persona, t.sink, rebuild, got.docs + list(memory_docs),
                                      t.staged_sessions, t.withheld)
                else:
                    rebuild.commit()
            _record_rebuild(ix, persona, summary, got, memory_docs)
        if got.learned is not None:
            got.learned.commit()
        log_skips(persona, got.skips)  # a rebuild skips like a tail: one line per session and reason
    except BaseException:
        for rebuild in rebuilds:
            try:
                rebuild.abort()
            except Exception as exc:  # keep the original error
                log.warning("rebuild.abort_failed", persona=persona, error=str(exc))
        raise
    summary.cursor = summary.head


@dataclass
class Rebuilt:
    """What a rebuild's batches built, recorded in one transaction at its switch."""

    mark: late.LateMark
    learned: StagedMemory | None
    docs: list[Document] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)
    pending: list[tuple[str, str]] = field(default_factory=list)
    fingerprints: dict[str, str] = field(default_factory=dict)
    rechecked: list[str] = field(default_factory=list)
    empty: list[tuple[str, str]] = field(default_factory=list)

    def add(self, written: list[Document], built: Built) -> None:
        self.rechecked.extend(built.rechecked)
        self.docs.extend(written)
        self.skips.extend(built.skips)
        self.pending.extend(built.pending)
        self.fingerprints.update(built.fingerprints)
        self.empty.extend(built.empty)


def _record_rebuild(ix: Indexer, persona: str, summary: PersonaSummary, got: Rebuilt,
                    memory_docs: list[Document]) -> None:
    docs, skips = got.docs, got.skips
    old = ix.state.paths(persona)  # read before the write transaction (no read-to-write upgrade in it)
    with ix.state.atomic():
        ix.state.forget_documents(persona, old)
        ix.state.clear_bad(persona)
        ix.state.record_documents(docs + list(memory_docs))
        record_truncations(ix, persona, docs, fresh=True)
        summary.documents_skipped_bad += ix.state.record_bad(
            persona, [(s.session, s.turn_id or "", s.reason.value, s.detail) for s in skips], got.fingerprints)
        ix.state.clear_pending(persona, ix.state.pending(persona))  # what the ledger gives now, only
        ix.state.set_pending(persona, got.pending)
        ix.state.set_cursor(persona, summary.head)
        ix.state.set_build_identity(persona, ix.build_identity)
        record_owed(ix, got.learned)
        ix.state.clear_secret_rechecks(persona, got.rechecked)
        ix.state.forget_empty(persona)
        ix.state.record_empty(persona, got.empty, filled=())
        ix.state.clear_sessions_to_build(persona)
        ix.state.clear_late(persona)
        late.keep(ix, persona, got.mark)
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
    """Record the digest of the row at the cursor. ``checked``: the position the plan
    found intact this pass (:func:`indexer.sync.plan.decide`: the cursor unchanged since, nothing to do)."""
    position = ix.state.position(persona)
    if position is None or position == checked:
        return  # a no-op pass reads and writes nothing more
    ix.state.set_cursor_row(persona, Position(position.history_id, reader.history_row_fingerprint(position.history_id)))


def _planned_documents(ix: Indexer, reader: LedgerReader, plan: PersonaPlan, *, retry_bad: bool) -> int:
    """How many turns the pass will consider for ``plan.persona``: every turn of every live
    session for a backfill or a rebuild; for a tail, the turns not indexed yet of the sessions
    with new history rows (plus the bad turns a ``--retry-bad`` builds again). No query at all
    when the cursor is at the head: a no-op pass stays free."""
    if plan.mode is not PassMode.TAIL:
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
        replaced = bool(identity and known_identity and identity != known_identity)
        if replaced:
            # Another ledger file now sits at the configured path: its ids mean
            # nothing to our cursors. Start over from a backfill (hash skip keeps it cheap).
            log.warning("ledger.replaced", path=str(ix.config.ledger.path))
            _forget_replaced_source(ix, reader, targets)
        if identity and identity != known_identity:
            ix.state.set_ledger_identity(identity)
        if not ix.late_marks_converted:  # marks of an earlier layout, every persona's: until done
            ix.late_marks_converted = late.convert_marks(ix)
        plans = [decide(gather(ix, reader, persona, force=force, ledger_replaced=replaced)) for persona in targets]
        for plan in plans:
            log_plan(plan)
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
                if mode is PassMode.TAIL:
                    run_tail(ix, reader, persona, cursor or 0, ps, stop, progress, retry_bad=retry_bad, stamp=stamp)
                elif mode is PassMode.BACKFILL:
                    _backfill(ix, reader, persona, ps, stop, progress)
                else:
                    _rebuild(ix, reader, persona, ps, stop, progress)
                if mode is not PassMode.REBUILD:
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
             modes={p: str(s.mode) for p, s in summary.personas.items()})
    return summary

