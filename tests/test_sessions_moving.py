"""Sessions whose documents must change though no ``session_history`` row says so: a session the
ledger deletes and then makes live again, a session whose ``persona_id`` changes, a persona whose
every session leaves the ledger. Real WAL ledger, real QMD file sink and the real redactor; the
oracle is ``expected_paths`` (plain SQL over the ledger)."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from exporters.qmd import QmdExporter
from indexer.sync.context import Indexer
from indexer.sync.engine import sync_once
from indexer.sync.visibility import apply_visibility
from tests.test_sync import expected_paths


@pytest.fixture
def indexer(config_factory, tmp_path):
    made = []

    def factory(**cfg) -> Indexer:
        ix = Indexer(config_factory(**cfg), sinks=[QmdExporter(tmp_path / "export")])
        made.append(ix)
        return ix

    yield factory
    for ix in made:
        ix.close()


def events(logs, name):
    return [{k: v for k, v in e.items() if k not in ("event", "log_level")} for e in logs if e["event"] == name]


def deleted_then_live_again(writer, indexer, ledger_path):
    """Two sessions indexed, ``main`` deleted (a pass purges it), then made live again in the ledger
    (no history row says so). Returns the indexer and every path of the full set."""
    writer.turn("main", user="the staging database rotates monthly", assistant="noted")
    writer.turn("main", user="ship on friday?", assistant="yes, friday")
    writer.turn("keep", user="another session", assistant="ok")
    ix = indexer()
    sync_once(ix)
    everything = expected_paths(ledger_path, "atlas")
    writer.set_session_status("main", "deleted")
    sync_once(ix)
    assert ix.sinks[0].paths("atlas") == expected_paths(ledger_path, "atlas") != everything
    writer.set_session_status("main", "active")
    return ix, everything


def test_a_deleted_session_made_live_again_is_indexed_again_without_a_new_history_row(writer, indexer,
                                                                                        ledger_path):
    ix, everything = deleted_then_live_again(writer, indexer, ledger_path)
    with capture_logs() as logs:
        summary = sync_once(ix)
    assert ix.sinks[0].paths("atlas") == everything
    assert ix.state.paths("atlas") == everything
    assert summary.documents_written == 2
    assert events(logs, "session.status") == [{"persona": "atlas", "session": "main", "status": "active",
                                               "was": "deleted"}]


@pytest.mark.parametrize("order", [["atlas", "zeta"], ["zeta", "atlas"]], ids=["old-first", "new-first"])
def test_a_session_given_to_another_persona_leaves_the_old_one_and_is_indexed_in_the_new(writer, indexer,
                                                                                        ledger_path, order):
    """Whichever persona a pass takes first, the old persona keeps no document of the session (a
    persona never sees another's) and the new one has them all, before the session moves on."""
    writer.turn("other", persona="zeta", user="zeta's own session", assistant="ok")
    writer.turn("keep", user="atlas keeps a session", assistant="ok")
    writer.turn("main", user="what is the vault path?", assistant="it is /srv/vault")
    writer.turn("main", user="and the backup host?", assistant="backup-7")
    ix = indexer(ledger={"personas": order})
    sync_once(ix)
    moving = {p for p in ix.sinks[0].paths("atlas") if p.startswith("sessions/main/")}
    assert len(moving) == 2
    writer.execute("UPDATE sessions SET persona_id = 'zeta' WHERE label = 'main'")
    with capture_logs() as logs:
        sync_once(ix)
    for persona in ("atlas", "zeta"):
        assert ix.sinks[0].paths(persona) == expected_paths(ledger_path, persona), persona
        assert ix.state.paths(persona) == expected_paths(ledger_path, persona), persona
    assert moving <= ix.sinks[0].paths("zeta")
    assert ix.state.session("main").persona == "zeta"
    assert events(logs, "session.moved") == [{"persona": "zeta", "session": "main", "was": "atlas"}]
    # taken first, the old persona removes its copies itself
    assert events(logs, "session.left") == ([{"persona": "atlas", "session": "main", "to": "zeta",
                                               "documents_removed": 2}] if order[0] == "atlas" else [])
    writer.turn("main", persona="zeta", user="a third question after the move", assistant="third answer")
    sync_once(ix)
    assert ix.sinks[0].paths("atlas") == expected_paths(ledger_path, "atlas")
    assert ix.sinks[0].paths("zeta") == expected_paths(ledger_path, "zeta")


def test_a_persona_whose_every_session_left_the_ledger_has_its_documents_purged(writer, indexer,
                                                                             ledger_path):
    writer.turn("gone", user="gone soon", assistant="ok")
    writer.turn("stays", persona="zeta", user="zeta stays", assistant="ok")
    ix = indexer()
    sync_once(ix)
    assert ix.sinks[0].paths("atlas")
    writer.execute("DELETE FROM session_history WHERE session_label = 'gone'")
    writer.execute("DELETE FROM sessions WHERE label = 'gone'")
    sync_once(ix)
    assert ix.sinks[0].paths("atlas") == set() == ix.state.paths("atlas")
    assert ix.sinks[0].paths("zeta") == expected_paths(ledger_path, "zeta") != set()
    assert ix.state.session("gone").ledger_status == "deleted"


def test_a_persona_left_out_of_the_configured_personas_keeps_its_documents_when_its_sessions_leave(
        writer, indexer, ledger_path):
    """``[ledger] personas`` names what a daemon syncs: an indexed persona it leaves out is not
    passed over, even once the ledger holds none of its sessions (the load benchmark serves a
    prebuilt corpus this way, from a ledger that never held it)."""
    writer.turn("gone", user="gone soon", assistant="ok")
    writer.turn("stays", persona="zeta", user="zeta stays", assistant="ok")
    sync_once(indexer())
    before = expected_paths(ledger_path, "atlas")
    writer.execute("DELETE FROM sessions WHERE label = 'gone'")  # its history rows stay: the same ledger
    ix = indexer(ledger={"personas": ["zeta"]})
    with capture_logs() as logs:
        sync_once(ix)
    assert ix.sinks[0].paths("atlas") == before == ix.state.paths("atlas") != set()
    assert ix.state.session("gone").ledger_status == "active"
    assert ix.sinks[0].paths("zeta") == expected_paths(ledger_path, "zeta") != set()
    assert events(logs, "session.status") == []


def test_a_private_session_that_moves_keeps_its_copies_in_the_old_personas_forks_hidden(writer, indexer):
    """A fork of ``main`` stays in atlas when main moves to zeta: main's own turns it copied stay
    hidden there (its record of own turns moves with it, in the same transaction)."""
    writer.turn("other", user="an unrelated session", assistant="ok")
    start = writer.turn("root", user="shared start", assistant="ok")
    writer.fork("main", start)  # main inherits root's turn: root's, not main's own
    secret = writer.turn("main", user="the vault combination is in the red binder", assistant="noted")
    writer.fork("child", secret)
    ix = indexer()
    sync_once(ix)
    apply_visibility(ix, "main", "private")
    copy = f"sessions/child/turns/{secret}.md"
    assert copy not in ix.sinks[0].paths("atlas") and secret in ix.state.scope_facts("atlas", "other").hidden_turns
    writer.execute("UPDATE sessions SET persona_id = 'zeta' WHERE label = 'main'")
    sync_once(ix)
    assert ix.state.session("main").persona == "zeta" and ix.state.session("main").visibility == "private"
    assert copy not in ix.sinks[0].paths("atlas")
    assert ix.state.scope_facts("atlas", "other").hidden_turns == {secret}  # root's own turn stays shown
    assert f"sessions/root/turns/{start}.md" in ix.sinks[0].paths("atlas")
    assert ix.sinks[0].paths("zeta") == set()  # private: never exported


def test_a_session_that_left_the_ledger_is_looked_up_once_not_on_every_pass(writer, indexer, monkeypatch):
    """Whether a vanished session moved to another persona is asked when it goes; once registered
    deleted it is not asked again (a label that is not UTF-8 would cost a scan of the sessions)."""
    from indexer.sync import quiet
    from ledger.reader import LedgerReader

    monkeypatch.setattr(quiet, "SETTLE_S", 0.0)
    writer.turn("gone", user="soon gone", assistant="ok")
    writer.turn("stays", user="stays", assistant="ok")
    ix = indexer()
    sync_once(ix)
    asked: list[set] = []
    real = LedgerReader.sessions

    def counted(self, **kw):
        if kw.get("labels") is not None:
            asked.append(set(kw["labels"]))
        return real(self, **kw)

    monkeypatch.setattr(LedgerReader, "sessions", counted)
    writer.execute("DELETE FROM session_history WHERE session_label = 'gone'")
    writer.execute("DELETE FROM sessions WHERE label = 'gone'")
    sync_once(ix)
    assert {"gone"} in asked
    asked.clear()
    for i in range(2):
        writer.turn("stays", user=f"more {i}", assistant="ok")
        sync_once(ix)
    assert not any("gone" in labels for labels in asked)


class _FailingOnce:
    """The QMD sink whose next upsert of documents raises, as a full disk would."""

    def __init__(self, sink):
        self.sink, self.armed, self.failed = sink, False, 0

    def __call__(self, persona, docs):
        if self.armed and docs:
            self.armed, self.failed = False, self.failed + 1
            from exporters.base import SinkError
            raise SinkError("qmd: disk full (simulated)")
        return self.real(persona, docs)


def _fail_next_upsert(sink, monkeypatch) -> _FailingOnce:
    failing = _FailingOnce(sink)
    failing.real, failing.armed = sink.upsert, True
    monkeypatch.setattr(sink, "upsert", failing)
    return failing


@pytest.mark.parametrize("change", ["revived", "moved"])
def test_a_session_to_build_with_no_history_row_is_built_by_a_later_pass_when_its_write_failed(
        writer, indexer, ledger_path, change, monkeypatch):
    """The registry records the session as live (or as this persona's) before it is built: when the
    write fails, the next pass must still know to build it — no history row will say so."""
    from exporters.base import SinkError

    writer.turn("main", user="the staging database rotates monthly", assistant="noted")
    writer.turn("main", user="ship on friday?", assistant="yes, friday")
    writer.turn("other", persona="zeta", user="zeta's own session", assistant="ok")
    ix = indexer(ledger={"personas": ["atlas", "zeta"]})
    sync_once(ix)
    if change == "revived":
        writer.set_session_status("main", "deleted")
        sync_once(ix)
        writer.set_session_status("main", "active")
        persona = "atlas"
    else:
        writer.execute("UPDATE sessions SET persona_id = 'zeta' WHERE label = 'main'")
        persona = "zeta"
    sink = ix.sinks[0]
    failing = _fail_next_upsert(sink, monkeypatch)
    with pytest.raises(SinkError):
        sync_once(ix)
    assert failing.failed == 1  # the build of the session was under way
    assert ix.state.session("main").ledger_status == "active"  # the registry had taken the change
    assert ix.state.sessions_to_build(persona) == {"main"}
    sync_once(ix)
    assert sink.paths(persona) == expected_paths(ledger_path, persona) != set()
    assert {p for p in sink.paths(persona) if p.startswith("sessions/main/")}
    assert ix.state.sessions_to_build(persona) == set()


def test_a_session_moved_from_a_persona_this_index_does_not_sync_is_built(writer, indexer, ledger_path):
    """Its history rows were passed over (another persona's); the registry never held it."""
    writer.turn("main", user="the vault path is /srv/vault", assistant="noted")
    writer.turn("main", user="and the backup host?", assistant="backup-7")
    writer.turn("own", persona="nova", user="nova's own session", assistant="ok")
    ix = indexer(ledger={"personas": ["nova"]})
    sync_once(ix)
    writer.turn("own", persona="nova", user="a later nova turn", assistant="ok")  # the cursor moves past
    sync_once(ix)
    writer.execute("UPDATE sessions SET persona_id = 'nova' WHERE label = 'main'")
    summary = sync_once(ix)
    assert summary.personas["nova"].mode == "tail"
    assert ix.sinks[0].paths("nova") == expected_paths(ledger_path, "nova")
    assert len({p for p in ix.sinks[0].paths("nova") if p.startswith("sessions/main/")}) == 2


def test_a_changed_bad_turn_whose_rebuild_failed_is_retried_by_the_next_pass(writer, indexer, ledger_path,
                                                                              monkeypatch):
    """Bad turns found changed are marked compared for the ledger as it is; when writing them fails,
    the next pass must compare again, not wait for the full check minutes later."""
    import sqlite3

    from exporters.base import SinkError
    from indexer.sync import quiet

    monkeypatch.setattr(quiet, "SETTLE_S", 0.0)  # trust the ledger files' stamp at once
    bad = writer.turn("main", user="the turn that breaks", assistant="ok")
    writer.turn("calm", user="a calm turn", assistant="ok")
    writer.execute("UPDATE turns SET started_at = 'abc' WHERE id = ?", (bad,))
    ix = indexer()
    sync_once(ix)
    assert [b["turn_id"] for b in ix.state.bad_list("atlas")] == [bad]
    con = sqlite3.connect(ledger_path)
    con.execute("UPDATE turns SET started_at = 1763000000000 WHERE id = ?", (bad,))  # mended in place
    con.commit()
    con.close()
    sink = ix.sinks[0]
    failing = _fail_next_upsert(sink, monkeypatch)
    with pytest.raises(SinkError):
        sync_once(ix)
    assert failing.failed == 1
    sync_once(ix)  # the ledger files unchanged since
    assert ix.state.bad_list("atlas") == []
    assert sink.paths("atlas") == expected_paths(ledger_path, "atlas")


def test_many_sessions_arriving_at_once_are_built_in_batches(writer, indexer, ledger_path, monkeypatch):
    """A whole persona merged into another: its sessions are built (and committed) a batch at a time."""
    from indexer.sync import build as engine  # where the batch size and the builder live

    for i in range(engine.SESSIONS_PER_BATCH + 7):
        writer.turn(f"s{i:03d}", user=f"question {i}", assistant=f"answer {i}")
    writer.turn("own", persona="nova", user="nova's own session", assistant="ok")
    ix = indexer(ledger={"personas": ["nova"]})
    sync_once(ix)
    writer.execute("UPDATE sessions SET persona_id = 'nova' WHERE label LIKE 's%'")
    sizes: list[int] = []
    real = engine.build_sessions

    def counted(ix, reader, persona, sessions, **kw):
        sizes.append(len(sessions))
        return real(ix, reader, persona, sessions, **kw)

    monkeypatch.setattr(engine, "build_sessions", counted)
    sync_once(ix)
    assert sizes[:2] == [engine.SESSIONS_PER_BATCH, 7]
    assert ix.sinks[0].paths("nova") == expected_paths(ledger_path, "nova")


def test_a_session_revived_while_a_forced_rebuild_failed_is_built_by_the_next_pass(writer, indexer, ledger_path,
                                                                                    monkeypatch):
    """The forced rebuild records the revived session as live (registry) and then fails writing:
    the next pass is a tail, and no history row says the session is to be built."""
    from exporters.base import SinkError
    from exporters.qmd.rebuild import QmdRebuild

    ix, everything = deleted_then_live_again(writer, indexer, ledger_path)
    real = QmdRebuild.upsert

    def failing(self, docs):
        raise SinkError("qmd: disk full (simulated)")

    monkeypatch.setattr(QmdRebuild, "upsert", failing)
    with pytest.raises(SinkError):
        sync_once(ix, force=True)
    monkeypatch.setattr(QmdRebuild, "upsert", real)
    summary = sync_once(ix)
    assert summary.personas["atlas"].mode == "tail"
    assert ix.sinks[0].paths("atlas") == everything
    assert ix.state.paths("atlas") == everything


def test_a_session_revived_while_a_forced_rebuild_was_interrupted_is_built_by_the_next_pass(writer, indexer,
                                                                                            ledger_path):
    """As above, with the rebuild stopped (SIGTERM: the daemon's stop event) instead of failing."""
    import threading

    ix, everything = deleted_then_live_again(writer, indexer, ledger_path)
    stop = threading.Event()
    stop.set()
    assert sync_once(ix, force=True, stop=stop).interrupted
    sync_once(ix)
    sync_once(ix)
    assert ix.sinks[0].paths("atlas") == everything


def test_a_session_that_leaves_for_an_unsynced_persona_and_comes_back_is_built_again(writer, indexer, ledger_path):
    writer.turn("main", persona="nova", user="the vault path is /srv/vault", assistant="noted")
    writer.turn("main", persona="nova", user="and the backup host?", assistant="backup-7")
    writer.turn("own", persona="nova", user="nova's own session", assistant="ok")
    ix = indexer(ledger={"personas": ["nova"]})
    sync_once(ix)
    full = expected_paths(ledger_path, "nova")
    assert len({p for p in full if p.startswith("sessions/main/")}) == 2
    writer.execute("UPDATE sessions SET persona_id = 'xeno' WHERE label = 'main'")  # a persona not synced
    sync_once(ix)
    assert not {p for p in ix.sinks[0].paths("nova") if p.startswith("sessions/main/")}
    writer.execute("UPDATE sessions SET persona_id = 'nova' WHERE label = 'main'")  # back, no history row
    sync_once(ix)
    sync_once(ix)
    assert ix.sinks[0].paths("nova") == full
    assert ix.state.paths("nova") == full


def private_session_forked(writer, indexer):
    """``main`` private, ``child`` forked at its secret turn, only atlas synced."""
    writer.turn("other", user="an unrelated session", assistant="ok")
    start = writer.turn("root", user="shared start", assistant="ok")
    writer.fork("main", start)
    secret = writer.turn("main", user="the vault combination is in the red binder", assistant="noted")
    writer.fork("child", secret)
    ix = indexer(ledger={"personas": ["atlas"]})
    sync_once(ix)
    apply_visibility(ix, "main", "private")
    copy = f"sessions/child/turns/{secret}.md"
    assert copy not in ix.sinks[0].paths("atlas")
    return ix, secret, copy


def test_private_forks_copy_hidden_in_the_very_pass_that_moves_it_to_an_unsynced_persona(writer, indexer):
    ix, secret, copy = private_session_forked(writer, indexer)
    writer.execute("UPDATE sessions SET persona_id = 'zeta' WHERE label = 'main'")
    sync_once(ix)  # the very pass that moves it: its record of own turns must go along in it
    assert secret in ix.state.scope_facts("atlas", "other").hidden_turns, "searchable by 'other'"
    assert copy not in ix.sinks[0].paths("atlas"), "re-exported to QMD"


def test_rewound_private_sessions_recorded_turn_stays_hidden_after_move_to_unsynced(writer, indexer):
    """main (private) said `secret`, child forked at it, main then rewound before it (its head moved
    back: the cumulative record keeps `secret` as main's own). main then moves to an unsynced
    persona: its record goes with it (left under atlas it was dropped there, and zeta's, read from the
    ledger, no longer held `secret`)."""
    writer.turn("other", user="an unrelated session", assistant="ok")
    start = writer.turn("root", user="shared start", assistant="ok")
    writer.fork("main", start)
    first = writer.turn("main", user="main's first own words", assistant="ok")
    secret = writer.turn("main", user="the vault combination is in the red binder", assistant="noted")
    writer.fork("child", secret)
    writer.turn("child", user="child's own turn", assistant="ok")
    ix = indexer(ledger={"personas": ["atlas"]})
    sync_once(ix)
    apply_visibility(ix, "main", "private")
    copy = f"sessions/child/turns/{secret}.md"
    # rewind main to `first`
    writer.execute("UPDATE sessions SET thread_id = ? WHERE label = 'main'", (first,))
    writer.execute("INSERT INTO session_history(session_label, thread_id, changed_at) VALUES('main', ?, ?)",
                   (first, writer.now()))
    sync_once(ix)
    sync_once(ix)
    assert copy not in ix.sinks[0].paths("atlas")  # control: hidden while main stays in atlas
    assert secret in ix.state.scope_facts("atlas", "other").hidden_turns
    writer.execute("UPDATE sessions SET persona_id = 'zeta' WHERE label = 'main'")
    sync_once(ix)
    sync_once(ix)
    writer.turn("other", user="later activity", assistant="ok")  # ledger moves: private turns re-read
    sync_once(ix)
    assert ix.state.session("main").visibility == "private"
    assert secret in ix.state.scope_facts("atlas", "other").hidden_turns, "searchable by 'other'"
    assert copy not in ix.sinks[0].paths("atlas"), "re-exported to QMD"
