"""The plan of a pass as a value: each case the revisit mechanisms handle, asserted on the pure
functions that decide it (no ledger, no sinks: their inputs are what the ledger and the state say).
The suites that run whole passes (test_sync, test_late_messages, test_sessions_moving,
test_recurring_secrets, test_ledger_bad_values) show the same cases end to end."""

from __future__ import annotations

from indexer.state.db import Position
from indexer.sync.plan import PassMode, PersonaFacts, Why, decide
from indexer.sync.registry import BuildWhy, RegistryFacts, first_seen, leaving, plan_registry
from indexer.sync.revisit import Revisit, RevisitWhy, owed_sessions, repaired, requested, turn_revisits

AT_12 = Position(12, "row-12")


def facts(**kw) -> PersonaFacts:
    return PersonaFacts(**{"persona": "atlas", "head": 20, "position": AT_12, "row_at_cursor": "row-12", **kw})


# -- the pass mode -----------------------------------------------------------------------------------


def test_a_cursor_that_holds_is_a_tail_and_keeps_its_intact_position():
    plan = decide(facts())
    assert (plan.mode, plan.why, plan.cursor, plan.head, plan.cursor_row) == (PassMode.TAIL, Why.CURSOR, 12, 20, AT_12)
    assert plan.mode == "tail"  # reports and logs show the value


def test_a_first_pass_is_a_backfill():
    assert decide(facts(position=None, row_at_cursor=None)).why is Why.NO_CURSOR


def test_a_replaced_ledger_is_backfilled_from_no_cursor():
    plan = decide(facts(position=None, row_at_cursor=None, ledger_replaced=True))
    assert (plan.mode, plan.why, plan.cursor) == (PassMode.BACKFILL, Why.LEDGER_REPLACED, None)


def test_reused_history_ids_below_the_cursor_make_a_backfill():
    plan = decide(facts(row_at_cursor="another row"))
    assert (plan.mode, plan.why) == (PassMode.BACKFILL, Why.IDS_REUSED)


def test_a_cursor_with_no_row_recorded_yet_is_a_tail_with_nothing_to_compare():
    plan = decide(facts(position=Position(12), row_at_cursor=None))
    assert (plan.mode, plan.cursor_row) == (PassMode.TAIL, None)


def test_a_ledger_rewound_below_the_cursor_makes_a_backfill():
    assert decide(facts(head=5)).why is Why.LEDGER_REWOUND


def test_a_backfill_recorded_as_due_comes_before_the_cursor_checks():
    plan = decide(facts(backfill_due="messages_renumbered", head=5))
    assert (plan.mode, plan.why, plan.detail) == (PassMode.BACKFILL, Why.BACKFILL_DUE, ("messages_renumbered",))


def test_rebuilds_forced_changed_lost_or_asked_for_by_a_sink():
    assert decide(facts(force=True, backfill_due="x")).why is Why.FORCED
    lost = decide(facts(sinks_lost=("qmd: the export folder is gone",)))
    assert (lost.mode, lost.why, lost.detail) == (PassMode.REBUILD, Why.SINK_LOST, ("qmd: the export folder is gone",))
    assert decide(facts(sink_wants_rebuild=True)).why is Why.SINK_WANTS_REBUILD
    changed = decide(facts(build_changed=("redaction",)))
    assert (changed.mode, changed.detail) == (PassMode.REBUILD, ("redaction",))
    # before a first complete build everything "differs": that is a backfill, not a rebuild
    assert decide(facts(position=None, build_changed=("redaction", "sinks"))).mode is PassMode.BACKFILL


# -- the registry: moved, deleted, revived sessions ---------------------------------------------------


def registry(**kw) -> RegistryFacts:
    return RegistryFacts(**{"persona": "atlas", "tail": True, **kw})


def test_a_session_deleted_in_the_ledger_is_purged_and_its_streaming_turn_dropped():
    plan = plan_registry(registry(known={"main": "active", "old": "active"},
                                  sessions=[("main", "atlas", "active"), ("old", "atlas", "deleted")],
                                  pending=[("old", "T1"), ("main", "T2")]))
    assert plan.register == (("old", "atlas", "deleted"),)
    assert plan.deleted == {"old"} and plan.purge == {"atlas": {"old"}}
    assert plan.dropped_pending == (("old", "T1"),) and plan.build == {}


def test_a_session_gone_from_the_ledger_is_deleted_here():
    plan = plan_registry(registry(known={"gone": "active"}, sessions=[], elsewhere={}))
    assert plan.register == (("gone", "atlas", "deleted"),) and plan.purge["atlas"] == {"gone"}
    assert leaving({"gone": "active", "long gone": "deleted"}, set()) == ["gone"]  # looked up in the ledger


def test_a_revived_session_is_built_with_no_history_row_naming_it():
    plan = plan_registry(registry(known={"back": "deleted"}, sessions=[("back", "atlas", "active")]))
    assert plan.revived == ("back",) and plan.build == {"back": BuildWhy.REVIVED}
    assert plan.register == (("back", "atlas", "active"),) and plan.deleted == frozenset()


def test_a_session_moved_out_leaves_its_documents_and_its_row_to_the_persona_it_went_to():
    plan = plan_registry(registry(known={"s": "active"}, sessions=[], elsewhere={"s": "nova"},
                                  synced=frozenset({"atlas", "nova"})))
    assert plan.moved_out == {"s": "nova"} and plan.unsynced == {}
    assert plan.register == () and plan.purge == {"atlas": {"s"}}


def test_a_session_moved_to_a_persona_not_synced_goes_with_its_row_as_deleted():
    plan = plan_registry(registry(known={"s": "active"}, sessions=[], elsewhere={"s": "other"},
                                  synced=frozenset({"atlas"})))
    assert plan.unsynced == {"s": "other"} and plan.register == (("s", "other", "deleted"),)


def test_a_session_moved_here_is_built_and_the_other_personas_documents_purged():
    plan = plan_registry(registry(known={}, sessions=[("s", "atlas", "active")], registered_elsewhere={"s": "nova"}))
    assert plan.arrived == {"s": "nova"} and plan.build == {"s": BuildWhy.MOVED_HERE}
    assert plan.purge["nova"] == {"s"}


def test_a_new_session_with_new_history_rows_is_left_to_the_history_loop():
    sessions = [("new", "atlas", "active"), ("older", "atlas", "active")]
    assert first_seen({}, sessions) == {"new", "older"}
    plan = plan_registry(registry(known={}, sessions=sessions, with_new_history=frozenset({"new"})))
    assert plan.build == {"older": BuildWhy.FIRST_SEEN}


def test_sessions_queued_by_a_pass_that_failed_are_built_by_the_next_tail_only():
    queued = registry(known={"q": "active"}, sessions=[("q", "atlas", "active")], queued=frozenset({"q"}))
    assert plan_registry(queued).build == {"q": BuildWhy.QUEUED}
    backfill = RegistryFacts("atlas", {"q": "active"}, [("q", "atlas", "active")], queued=frozenset({"q"}))
    assert plan_registry(backfill).build == {}  # a backfill builds every session anyway
    rebuild = RegistryFacts("atlas", {"b": "deleted"}, [("b", "atlas", "active")], rebuilding=True)
    assert plan_registry(rebuild).build == {"b": BuildWhy.REVIVED}  # it may stop before its switch


# -- turns and sessions revisited -----------------------------------------------------------------


def test_a_pending_turn_and_a_late_message_are_revisited_once_each_with_their_reason():
    out = turn_revisits(pending=[("main", "T1"), ("gone", "T2")], late=[("main", "T1"), ("main", "T3")],
                        deleted={"gone"})
    assert out == (Revisit("main", "T1", RevisitWhy.PENDING_TURN), Revisit("main", "T3", RevisitWhy.LATE_MESSAGE))


def test_a_bad_row_repaired_in_place_is_revisited_and_an_unchanged_one_is_not():
    items = [("s1", "T1", "fp1"), ("s2", "T2", "fp2"), ("gone", "T3", "fp3")]
    out = repaired(items, {"T1": "fp1", "T2": "fp2-repaired", "T3": "fp3-repaired"}, deleted={"gone"})
    assert out == (Revisit("s2", "T2", RevisitWhy.BAD_ROW_REPAIRED),)
    assert repaired([("s1", "T1", "fp1")], {}, ()) == (Revisit("s1", "T1", RevisitWhy.BAD_ROW_REPAIRED),)  # rows gone


def test_retry_bad_revisits_every_session_holding_a_bad_turn():
    assert requested([("s1", "T1"), ("s1", "T2"), ("gone", "T3")], {"gone"}) == (
        Revisit("s1", "", RevisitWhy.BAD_ROW_REQUESTED),)


def test_an_owed_secret_is_revisited_whether_this_process_or_an_earlier_one_found_it():
    assert owed_sessions(["b"], ["a", "b"]) == (Revisit("a", "", RevisitWhy.OWED_SECRET),
                                                Revisit("b", "", RevisitWhy.OWED_SECRET))
