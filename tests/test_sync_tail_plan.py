"""The plan of a tail pass as one value (:class:`indexer.sync.tail_plan.TailPlan`): every case a
revisit mechanism handled, asserted on ``make_plan`` — a pure function of what one read of the ledger
and the state gave (:class:`TailChanges`), no ledger or sink needed. Then a real pass whose build fails
after the plan was committed: the queue holds what it had found, and the next pass builds it."""

from __future__ import annotations

import pytest

from exporters.base import SinkError
from exporters.qmd import QmdExporter
from indexer.state.db import Position
from indexer.sync.context import Indexer
from indexer.sync.engine import sync_once
from indexer.sync.plan import PassMode, PersonaFacts, Why, decide
from indexer.sync.registry import RegistryFacts, plan_registry
from indexer.sync.tail import history_batch
from indexer.sync.tail_plan import TailChanges, TailPlan, make_plan
from indexer.sync.work import Revisit, RevisitWhy, Step, StepKind
from ledger.rows import SessionRow

W = RevisitWhy


def changes(*, known: dict | None = None, sessions: tuple = (("main", "atlas", "active"),), quiet: bool = False,
            registry: dict | None = None, **kw) -> TailChanges:
    """A tail's changes for atlas, cursor 12, head 20. ``sessions``: the ledger's (label, persona,
    status); ``known``: the state's registry (label → status); ``quiet``: the ledger files unchanged."""
    facts = None
    if not quiet:
        facts = RegistryFacts("atlas", known if known is not None else {"main": "active"}, sessions, tail=True,
                              **(registry or {}))
    return TailChanges(**{"persona": "atlas", "cursor": 12, "head": 20,
                          "registry": None if facts is None else (facts, plan_registry(facts)), **kw})


def test_a_pass_with_nothing_new_plans_nothing_and_writes_nothing():
    plan = make_plan(changes(quiet=True, head=12))
    assert (plan.revisits, plan.history, plan.registry, plan.writes_plan()) == ((), None, None, False)


def test_history_rows_after_the_cursor_are_read_in_batches_from_the_cursor_to_the_head():
    assert make_plan(changes(quiet=True)).history == (12, 20)


def test_a_pending_turn_is_built_again_when_the_ledger_files_changed():
    plan = make_plan(changes(pending=(("main", "T1"),)))
    assert plan.turns == (Revisit("main", "T1", W.PENDING_TURN),)
    assert plan.why("main", "T1") is W.PENDING_TURN
    assert make_plan(changes(quiet=True, pending=(("main", "T1"),))).turns == ()  # nothing can have finished


def test_a_late_message_is_queued_with_the_mark_and_built_again():
    plan = make_plan(changes(late=(("main", "T3"),)))
    assert plan.turns == (Revisit("main", "T3", W.LATE_MESSAGE),)
    assert plan.queue_late == (("main", "T3"),)  # a queue row, committed with the late mark before building


def test_a_late_message_queued_by_a_pass_that_stopped_is_built_and_not_queued_twice():
    plan = make_plan(changes(late_queued=(("main", "T3"),), late=(("main", "T3"), ("main", "T4"))))
    assert plan.turns == (Revisit("main", "T3", W.LATE_MESSAGE), Revisit("main", "T4", W.LATE_MESSAGE))
    assert plan.queue_late == (("main", "T4"),)


def test_a_turn_pending_and_given_a_late_message_is_built_once_as_pending():
    plan = make_plan(changes(pending=(("main", "T1"),), late=(("main", "T1"),)))
    assert plan.turns == (Revisit("main", "T1", W.PENDING_TURN),)
    assert plan.queue_late == (("main", "T1"),)  # cleared with the pending row once built


def test_a_bad_row_repaired_in_place_rebuilds_its_session():
    plan = make_plan(changes(quiet=True, bad_compared=(("s1", "T1", "fp1"), ("s2", "T2", "fp2"), ("s2", "T5", "x")),
                             bad_now={"T1": "fp1", "T2": "fp2-repaired", "T5": "y"}))
    assert plan.sessions == (Revisit("s2", "", W.BAD_ROW_REPAIRED),)
    assert plan.bad_sessions() == ["s2"]


def test_retry_bad_rebuilds_every_session_holding_a_bad_turn_but_deleted_ones():
    plan = make_plan(changes(known={"s1": "active", "gone": "active"},
                             sessions=(("s1", "atlas", "active"), ("gone", "atlas", "deleted")),
                             retry_bad=True, bad=(("s1", "T1"), ("s1", "T2"), ("gone", "T3"))))
    assert plan.sessions == (Revisit("s1", "", W.BAD_ROW_REQUESTED),)


def test_an_owed_secret_rebuilds_the_sessions_owed_this_process_and_recorded_by_an_earlier_one():
    plan = make_plan(changes(quiet=True, owing=("b",), owed_recorded=("a", "b")))
    assert plan.owed == (Revisit("a", "", W.OWED_SECRET), Revisit("b", "", W.OWED_SECRET))
    assert Step(StepKind.NEW_TURNS, plan.owed).recheck == ["a", "b"]


def test_a_session_moved_away_is_left_and_purged_and_nothing_of_it_is_revisited_here():
    plan = make_plan(changes(known={"main": "active", "s1": "active"}, registry={"elsewhere": {"s1": "nova"}},
                             pending=(("s1", "T1"),), late=(("s1", "T2"),), late_queued=(("s1", "T3"),),
                             bad_compared=(("s1", "T4", "a"),), bad_now={"T4": "b"}))
    assert plan.leave == {"s1": "nova"}
    assert "s1" in plan.purge["atlas"]
    assert (plan.turns, plan.sessions, plan.queue_late) == ((), (), ())
    assert plan.drop_late == (("s1", "T3"),)  # its queued late turn goes with it


def test_a_session_moved_here_is_built_and_purged_from_its_old_persona():
    plan = make_plan(changes(known={"main": "active"}, sessions=(("main", "atlas", "active"), ("s2", "atlas", "active")),
                             registry={"registered_elsewhere": {"s2": "nova"}}))
    assert plan.sessions == (Revisit("s2", "", W.MOVED_HERE),)
    assert plan.purge["nova"] == frozenset({"s2"})


def test_a_deleted_session_is_purged_and_its_pending_late_and_bad_turns_are_not_built():
    plan = make_plan(changes(known={"s1": "active"}, sessions=(("s1", "atlas", "deleted"),),
                             pending=(("s1", "T1"),), late=(("s1", "T2"),),
                             bad_compared=(("s1", "T4", "a"),), bad_now={"T4": "b"}))
    assert "s1" in plan.deleted and "s1" in plan.purge["atlas"]
    assert (plan.turns, plan.sessions, plan.queue_late) == ((), (), ())
    assert plan.registry is not None and plan.registry.dropped_pending == ()  # (none was queued in its facts)


def test_a_session_deleted_while_the_ledger_is_unchanged_is_known_from_the_state():
    plan = make_plan(changes(quiet=True, deleted=frozenset({"s1"}), bad_compared=(("s1", "T4", "a"),),
                             bad_now={"T4": "b"}))
    assert plan.sessions == () and plan.deleted == {"s1"}


def test_a_revived_session_is_built_with_no_history_row_naming_it():
    plan = make_plan(changes(known={"s1": "deleted"}, sessions=(("s1", "atlas", "active"),)))
    assert plan.sessions == (Revisit("s1", "", W.REVIVED),)
    assert plan.why("s1") is W.REVIVED


def test_a_session_queued_by_a_pass_that_failed_is_built_first_once_whatever_else_names_it():
    plan = make_plan(changes(registry={"queued": frozenset({"main"})}, bad_compared=(("main", "T1", "a"),),
                             bad_now={"T1": "b"}))
    assert plan.sessions == (Revisit("main", "", W.QUEUED),)  # its build retries its bad turns too


def test_a_replaced_ledger_or_reused_history_ids_make_no_tail_plan_but_a_backfill():
    at_12 = Position(12, "row-12")
    replaced = decide(PersonaFacts("atlas", 20, None, ledger_replaced=True))
    reused = decide(PersonaFacts("atlas", 20, at_12, row_at_cursor="another row"))
    assert (replaced.mode, replaced.why) == (PassMode.BACKFILL, Why.LEDGER_REPLACED)
    assert (reused.mode, reused.why) == (PassMode.BACKFILL, Why.IDS_REUSED)


def test_the_plan_is_a_frozen_value():
    plan = make_plan(changes())
    assert isinstance(plan, TailPlan)
    with pytest.raises(AttributeError):
        plan.cursor = 3  # type: ignore[misc]
    assert make_plan(changes()) == plan  # the same changes, the same plan


def test_a_history_batch_builds_its_live_sessions_the_latest_written_first():
    def row(label: str, status: str = "active") -> SessionRow:
        return SessionRow(label=label, thread_id=f"t-{label}", persona="atlas", status=status, created_at=0, updated_at=0)

    out = history_batch(["b", "a"], [row("a"), row("b"), row("c", "deleted")])
    assert [s.label for s in out] == ["b", "a"]


# -- end to end: a build that fails after the plan was committed ------------------------------------------


class FailingOnce(QmdExporter):
    """A QMD sink whose next upsert fails (a full disk, say), after the pass committed its plan."""

    fail_next = False

    def upsert(self, persona, docs):
        if self.fail_next and docs:
            self.fail_next = False
            raise SinkError("disk full")
        return super().upsert(persona, docs)


def test_a_late_message_found_by_a_pass_that_crashed_while_building_it_is_built_by_the_next(
        writer, config_factory, tmp_path):
    writer.turn("earlier", user="an earlier session", assistant="ok")
    sink = FailingOnce(tmp_path / "export")
    ix = Indexer(config_factory(), sinks=[sink])
    try:
        sync_once(ix)
        turn = writer.turn("main", user="what port did we pick?", assistant=None)
        sync_once(ix)
        writer.execute("INSERT INTO messages(id, turn_id, role, content, sequence, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                       (f"late-{turn}", turn, "assistant", "port 8765", 5, writer.now()))
        mark_before = ix.state.late_mark("atlas")
        sink.fail_next = True
        with pytest.raises(SinkError):
            sync_once(ix)
        # the crash came after the plan's transaction: the mark moved on, the turn waits in the queue
        assert ix.state.late_mark("atlas") != mark_before
        assert ix.state.late_queued("atlas") == [("main", turn)]
        sync_once(ix)
        assert "port 8765" in sink.read("atlas", f"sessions/main/turns/{turn}.md")
        assert ix.state.late_queued("atlas") == []
    finally:
        ix.close()
