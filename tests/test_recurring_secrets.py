"""A secret a rule recognises in one turn (``the vpn password is X``) is masked wherever X recurs
bare in the session's other turns — later ones, earlier ones already indexed, compaction summaries —
and in every fork's copy of such a turn; the values themselves are never written anywhere. Real WAL
ledger, the real redactor, real LanceDB and the QMD exporter's files; the fake embedder (what is
tested is the text stored, not what the model understands)."""

from __future__ import annotations

import warnings
from datetime import timedelta
from pathlib import Path

import pytest
import structlog
from fake_embedder import FakeEmbedder

from indexer.sync.context import Indexer, build_sinks
from indexer.sync.engine import sync_once
from indexer.sync.recurring import WAIT, SecretMemory
from redaction import Redactor

VPN = "Zq8-hunter-Vm2"  # no rule knows it alone
DB = "Tr0ub4dor&3xyz"


def indexer(config) -> Indexer:
    return Indexer(config, sinks=build_sinks(config, embedder=FakeEmbedder()))


def fork_family(writer, fork: str = "side") -> tuple[str, str]:
    """main: a turn mentioning the value bare; ``fork`` forked from it, repeating it in a turn of
    its own. Nothing has named it a secret yet. Returns (the shared turn, the fork's own)."""
    early = writer.turn("main", user=f"use {VPN} for the vpn", assistant="ok")
    writer.fork(fork, early)
    return early, writer.turn(fork, user=f"{VPN} did not work from the office")


def one_pass(config) -> None:
    """One sync pass by a process of its own (a fresh indexer, closed after)."""
    ix = indexer(config)
    try:
        sync_once(ix)
    finally:
        ix.close()


def stored_bytes(config) -> dict[str, bytes]:
    """Every file of the index dir (LanceDB, state DB, QMD export), by path."""
    root = Path(config.index.dir)
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def holding(config, value: str) -> list[str]:
    """Files holding ``value``, once LanceDB's old versions and a rebuild's retired generation (the
    text as first written) are gone: the daemon's maintenance removes them after
    ``cleanup_older_than`` and ``retire_grace``."""
    ix = indexer(config)
    try:
        for sink in ix.sinks:
            if hasattr(sink, "cleanup_older_than"):
                sink.cleanup_older_than = sink.retire_grace = timedelta(0)
                with warnings.catch_warnings():  # "removes every version except the latest": the point
                    warnings.simplefilter("ignore", UserWarning)
                    sink.maintain(force=True)
    finally:
        ix.close()
    return sorted(path for path, data in stored_bytes(config).items() if value.encode() in data)


def exported(config, session: str, turn: str) -> str:
    """The exported document of ``session``'s copy of ``turn`` (a turn or a compaction)."""
    [path] = (Path(config.qmd_export_dir) / "atlas" / "sessions" / session).rglob(f"{turn}.md")
    return path.read_text()


@pytest.fixture
def config(config_factory):
    return config_factory(sinks=("lancedb", "qmd"))


def test_the_rules_alone_miss_the_bare_value():
    """The premise: without the session's memory the bare mention stays."""
    assert Redactor().redact(f"use {VPN} for the vpn").text == f"use {VPN} for the vpn"
    assert VPN not in Redactor().redact(f"the vpn password is {VPN}").text


def test_a_value_named_in_one_turn_is_masked_where_a_later_turn_repeats_it(writer, config):
    writer.turn("main", user=f"the db password is {DB}", assistant="noted")
    ix = indexer(config)
    try:
        sync_once(ix)
        later = writer.turn("main", user=f"connect with {DB} please", assistant=f"connected using {DB}")
        sync_once(ix)  # a tail pass: the memory of the first pass is warm
    finally:
        ix.close()
    text = exported(config, "main", later)
    assert DB not in text and "[REDACTED:password-in-prose]" in text
    assert holding(config, DB) == []


@pytest.mark.parametrize("restart", [False, True], ids=["same-process", "after-restart"])
def test_an_earlier_turn_already_indexed_is_written_again_when_the_value_is_named(writer, config, restart):
    early = writer.turn("main", user=f"use {VPN} for the vpn", assistant="ok")
    ix = indexer(config)
    try:
        sync_once(ix)
        assert VPN in exported(config, "main", early)  # nothing said it was a secret yet
        writer.turn("main", user=f"by the way, the vpn password is {VPN}")
        if restart:
            ix.close()
            ix = indexer(config)  # a cold memory: the session's history is read again
        summary = sync_once(ix)
    finally:
        ix.close()
    assert VPN not in exported(config, "main", early)
    assert holding(config, VPN) == []
    assert summary.total("documents_written") == 2  # the new turn and the earlier one, rewritten


def test_a_compaction_summary_repeating_the_value_is_masked(writer, config):
    writer.turn("main", user=f"the vpn password is {VPN}")
    summary = writer.compaction("main", f"User shared the VPN credential {VPN}; told to rotate it.")
    one_pass(config)
    assert VPN not in exported(config, "main", summary)
    assert holding(config, VPN) == []


def test_every_forks_copy_of_a_turn_is_masked_when_the_parent_names_the_value_later(writer, config):
    """side forks main after the bare mention and repeats it in a turn of its own; main names it a
    password only later, in a turn side does not hold: side's copy and side's own turn follow."""
    early, own = fork_family(writer)
    ix = indexer(config)
    try:
        sync_once(ix)
        assert VPN in exported(config, "side", early) and VPN in exported(config, "side", own)
        writer.turn("main", user=f"the vpn password is {VPN}")
        sync_once(ix)  # only main moved
    finally:
        ix.close()
    for session, turn in (("main", early), ("side", early), ("side", own)):
        assert VPN not in exported(config, session, turn), (session, turn)
    assert holding(config, VPN) == []


@pytest.mark.parametrize("fork", ["side", "a-fork"])  # built after / before the session that names the value
@pytest.mark.parametrize("batch", [50, 1])  # one batch (neither session in the state DB yet) / one session a batch
@pytest.mark.parametrize("force", [False, True], ids=["first-pass", "forced-rebuild"])
def test_every_copy_of_a_turn_reads_the_same_after_a_whole_pass(writer, config, monkeypatch, fork, batch, force):
    monkeypatch.setattr("indexer.sync.build.SESSIONS_PER_BATCH", batch)
    early, own = fork_family(writer, fork)
    writer.turn("main", user=f"the vpn password is {VPN}")
    ix = indexer(config)
    try:
        sync_once(ix)
        if force:
            ix.close()
            ix = indexer(config)  # a cold memory, every session built again into a new generation
            sync_once(ix, force=True)
    finally:
        ix.close()
    main, side = exported(config, "main", early), exported(config, fork, early)
    assert main[main.index("User:"):] == side[side.index("User:"):] == (
        "User: use [REDACTED:password-in-prose] for the vpn\n\nAssistant: ok")
    assert VPN not in exported(config, fork, own)
    assert holding(config, VPN) == []


def test_values_never_reach_a_log_line(writer, config):
    writer.turn("main", user=f"use {VPN} for the vpn")
    ix = indexer(config)
    try:
        sync_once(ix)
        writer.turn("main", user=f"the vpn password is {VPN}")
        with structlog.testing.capture_logs() as logs:
            sync_once(ix)
    finally:
        ix.close()
    events = [e for e in logs if e["event"] == "redaction.recurring"]
    assert events == [{"event": "redaction.recurring", "log_level": "info", "persona": "atlas", "sessions": 1,
                       "turns": 2}]
    assert VPN not in repr(logs) and VPN not in repr(ix.secrets)


def test_a_custom_redact_function_learns_nothing(config):
    ix = Indexer(config, sinks=[], redact=str, redaction_version="none")
    try:
        assert ix.secrets is None
    finally:
        ix.close()


# -- found in review: turns that finish later, repairs, restores, rebuilds, broken rows ----------------


@pytest.mark.parametrize("restart", [False, True], ids=["same-process", "after-restart"])
def test_a_streaming_turn_that_names_the_value_when_it_finishes_masks_the_earlier_turns(writer, config, restart):
    """Finishing a turn adds no session_history row: the pass revisits it as a pending turn."""
    early = writer.turn("main", user=f"use {VPN} for the vpn", assistant="ok")
    late = writer.turn("main", user="one more thing", status="streaming")
    ix = indexer(config)
    try:
        sync_once(ix)
        assert VPN in exported(config, "main", early)
        if restart:
            ix.close()
            ix = indexer(config)
        writer.complete(late, assistant=f"by the way, the vpn password is {VPN}")
        sync_once(ix)
    finally:
        ix.close()
    assert VPN not in exported(config, "main", early) and VPN not in exported(config, "main", late)
    assert holding(config, VPN) == []


def _break_a_turn(writer, early):
    naming = writer.turn("main", user=f"by the way, the vpn password is {VPN}", assistant="noted")
    writer.execute("UPDATE turns SET started_at='abc' WHERE id=?", (naming,))
    return "invalid_row", lambda: writer.execute("UPDATE turns SET started_at=1763000000000 WHERE id=?", (naming,))


def _lose_a_compaction_row(writer, early):
    text = f"User said the vpn password is {VPN}."
    summary = writer.compaction("main", text)
    writer.execute("DELETE FROM compactions WHERE turn_id=?", (summary,))
    return "missing_compaction", lambda: writer.execute(
        "INSERT INTO compactions(turn_id, summary, summarized_through_turn_id, turns_summarized, model) "
        "VALUES(?,?,?,?,?)", (summary, text, early, 1, "m"))


@pytest.mark.parametrize("breaking", [_break_a_turn, _lose_a_compaction_row], ids=["turn-field", "compaction-row"])
def test_a_bad_row_repaired_in_place_is_learned_from(writer, config, breaking):
    """The turn naming the value is a bad row when first read; repaired, it is built and learned from."""
    early = writer.turn("main", user=f"use {VPN} for the vpn", assistant="ok")
    reason, repair = breaking(writer, early)
    ix = indexer(config)
    try:
        sync_once(ix)
        assert [b["reason"] for b in ix.state.bad_list("atlas")] == [reason]
        repair()
        sync_once(ix)
        assert ix.state.bad_list("atlas") == []
    finally:
        ix.close()
    assert VPN not in exported(config, "main", early)
    assert holding(config, VPN) == []


def test_a_session_moved_onto_another_branch_takes_the_values_of_the_sessions_it_now_shares(writer, config):
    """The ledger lets a session's head move anywhere: a session the memory knows, moved onto
    another session's turns, must mask what that session found in them."""
    early = writer.turn("main", user=f"use {VPN} for the vpn", assistant="ok")
    writer.turn("main", user=f"the vpn password is {VPN}")
    writer.turn("other", user="unrelated chat", assistant="ok")
    ix = indexer(config)
    try:
        sync_once(ix)
        with writer.conn:
            writer._move("other", "atlas", early, writer.now())
        sync_once(ix)  # the same process: 'other' is known, its history branched
    finally:
        ix.close()
    assert VPN not in exported(config, "other", early)
    assert holding(config, VPN) == []


def test_a_new_fork_in_a_large_family_reads_the_family_once_not_per_member(writer, config, monkeypatch):
    """Pulling for a session new to the process reads the histories of the co-holders it does not
    know in one query; those it knows cost nothing."""
    import ledger.reader as reader_mod

    early, own = fork_family(writer)
    for i in range(30):
        writer.fork(f"f{i:02d}", early)
        writer.turn(f"f{i:02d}", user=f"fork {i}", assistant="ok")
    writer.turn("main", user=f"the vpn password is {VPN}")
    calls: list[int] = []
    real = reader_mod.LedgerReader.sessions

    def sessions(self, **kw):
        calls.append(1)
        return real(self, **kw)

    monkeypatch.setattr(reader_mod.LedgerReader, "sessions", sessions)
    ix = indexer(config)
    try:
        sync_once(ix)  # warm: every session of the family read and learned
        writer.fork("new", early)
        writer.turn("new", user=f"{VPN} is what I typed")
        calls.clear()
        sync_once(ix)
        warm = len(calls)
    finally:
        ix.close()
    ix = indexer(config)  # a restart: nothing known
    try:
        writer.turn("new", user="still there?", assistant="yes")
        calls.clear()
        sync_once(ix)
        cold = len(calls)
    finally:
        ix.close()
    # the pass's own reads, plus one for the family, plus one per build for the sessions' creation
    # times (indexer.sync.build: no context line across a fork)
    assert warm <= 4 and cold <= 5, (warm, cold)
    assert holding(config, VPN) == []


def test_sharing_a_session_again_leaves_the_masking_to_the_next_pass(writer, config):
    """Restoring a session's export (on the API's thread) renders it with what it learns but keeps
    none of it: the next pass learns for itself and rewrites the forks' copies."""
    from indexer.sync.visibility import apply_visibility

    early, own = fork_family(writer)
    ix = indexer(config)
    try:
        sync_once(ix)
        apply_visibility(ix, "main", "private")
        writer.turn("main", user=f"the vpn password is {VPN}")
        apply_visibility(ix, "main", "shared")
        sync_once(ix)
    finally:
        ix.close()
    for session, turn in (("main", early), ("side", early), ("side", own)):
        assert VPN not in exported(config, session, turn), (session, turn)
    assert holding(config, VPN) == []


def test_sharing_a_session_again_from_the_cli_with_no_daemon_running_exports_it_masked(writer, config):
    """The CLI's process never learned anything: the restore reads the history itself."""
    from indexer.cli.visibility import apply_visibility

    early = writer.turn("main", user=f"use {VPN} for the vpn", assistant="ok")
    writer.turn("main", user=f"the vpn password is {VPN}")
    one_pass(config)
    assert apply_visibility(config, "main", "private").removed == 2
    assert apply_visibility(config, "main", "shared").restored == 2
    assert VPN not in exported(config, "main", early)
    assert holding(config, VPN) == []


def test_a_rebuild_reaches_forks_built_in_an_earlier_batch(writer, config, monkeypatch):
    """A rebuild records its documents only at the end: the pass itself remembers who holds what."""
    monkeypatch.setattr("indexer.sync.build.SESSIONS_PER_BATCH", 1)
    writer.turn("zzz", user="an older session", assistant="ok")
    ix = indexer(config)
    try:
        sync_once(ix)  # main and a-fork are new since this pass
        early, own = fork_family(writer, "a-fork")
        writer.turn("main", user=f"the vpn password is {VPN}")
        sync_once(ix, force=True)
    finally:
        ix.close()
    assert VPN not in exported(config, "a-fork", early) and VPN not in exported(config, "a-fork", own)
    assert holding(config, VPN) == []


def test_a_pass_whose_write_failed_learns_and_rewrites_again_next_time(writer, config):
    """The memory takes what a build learned only once its documents are written: a sink failing
    mid-pass must not leave the earlier turn unmasked for good."""
    early = writer.turn("main", user=f"use {VPN} for the vpn", assistant="ok")
    ix = indexer(config)
    try:
        sync_once(ix)
        writer.turn("main", user=f"the vpn password is {VPN}")
        sink = ix.sinks[0]
        real, calls = sink.upsert, []

        def failing(persona, docs):
            calls.append(len(docs))
            raise OSError("disk full")

        sink.upsert = failing
        with pytest.raises(OSError):
            sync_once(ix)
        assert calls, "the write was attempted"
        sink.upsert = real
        sync_once(ix)
    finally:
        ix.close()
    assert VPN not in exported(config, "main", early)
    assert holding(config, VPN) == []


def test_a_fork_whose_thread_row_broke_still_has_its_copy_masked(writer, config):
    early = writer.turn("main", user=f"use {VPN} for the vpn", assistant="ok")
    writer.fork("side", early)
    head = writer.turn("side", user="something else", assistant="ok")
    ix = indexer(config)
    try:
        sync_once(ix)
        writer.execute("UPDATE threads SET ancestry='not json' WHERE turn_id=?", (head,))
        writer.turn("main", user=f"the vpn password is {VPN}")
        sync_once(ix)
    finally:
        ix.close()
    assert VPN not in exported(config, "side", early)
    assert holding(config, VPN) == []


def test_a_redactor_error_on_one_text_is_that_turns_bad_row_and_the_pass_goes_on(writer, config, monkeypatch):
    from redaction import Redactor as RealRedactor

    real = RealRedactor.redact

    def redact(self, text, **kw):
        if "trips the redactor" in text:
            raise RuntimeError("redactor bug")
        return real(self, text, **kw)

    monkeypatch.setattr(RealRedactor, "redact", redact)
    writer.turn("s", user="a fine question", assistant="a fine answer")
    bad = writer.turn("s", user="this one trips the redactor", assistant="answer")
    writer.turn("calm", user="another session", assistant="ok")
    ix = indexer(config)
    try:
        summary = sync_once(ix)
        assert [(b["turn_id"], b["reason"], b["detail"]) for b in ix.state.bad_list("atlas")] == [
            (bad, "invalid_row", "RuntimeError: redactor bug")]
        assert summary.total("documents_written") == 2
    finally:
        ix.close()


def test_learning_reads_only_new_turns_of_a_session_with_a_turn_streaming_forever(writer, config, monkeypatch):
    """A turn left streaming (the runtime died mid-answer) must not make every later pass redact
    the rest of the history again; nor must a regenerated last turn."""
    import indexer.sync.recurring as recurring

    redacted: list[int] = []
    real = recurring.SecretMemory.learn

    def learn(self, persona, label, ancestry, texts):
        redacted.append(sum(isinstance(v, str) for v in texts.values()))
        return real(self, persona, label, ancestry, texts)

    monkeypatch.setattr(recurring.SecretMemory, "learn", learn)
    writer.turn("main", user="start", assistant="ok")
    writer.turn("main", user="hello", status="streaming")
    for i in range(5):
        writer.turn("main", user=f"turn {i}", assistant="ok")
    ix = indexer(config)
    try:
        sync_once(ix)
        assert sum(redacted) == 6
        for i in range(3):
            redacted.clear()
            writer.turn("main", user=f"later {i}", assistant="ok")
            sync_once(ix)
            assert sum(redacted) == 1, (i, redacted)  # the new turn only
        redacted.clear()
        parent = writer.conn.execute("SELECT parent_turn_id FROM turns WHERE id=?",
                                     (writer.head("main"),)).fetchone()[0]
        writer.turn("main", user="regenerated", assistant="ok", parent=parent)  # a sibling of the head
        sync_once(ix)
        assert sum(redacted) == 1, redacted
    finally:
        ix.close()


# -- the memory alone ------------------------------------------------------------------------------


def test_the_memory_covers_a_growing_history_and_reads_a_rewound_one_from_where_it_diverges():
    memory = SecretMemory(Redactor())
    assert memory.unlearned("p", "s", ["a", "b"]) == ["a", "b"]
    assert memory.learn("p", "s", ["a", "b"], {"a": f"the vpn password is {VPN}", "b": "hello"}) == {
        VPN: "password-in-prose"}
    assert memory.knows("p", "s")
    assert memory.unlearned("p", "s", ["a", "b", "c"]) == ["c"]
    assert memory.unlearned("p", "s", ["a", "x", "c"]) == ["x", "c"]  # rewound past b
    assert memory.unlearned("p", "s", ["a"]) == []
    assert memory.learn("p", "s", ["a", "b", "c"], {"c": f"the vpn password is {VPN}"}) == {}


def test_a_turn_that_cannot_be_read_yet_waits_and_is_learned_once_it_can():
    memory = SecretMemory(Redactor())
    memory.learn("p", "s", ["a", "b", "c"], {"a": "hello", "b": WAIT, "c": None})
    assert memory.unlearned("p", "s", ["a", "b", "c"]) == ["b"]
    assert memory.unlearned("p", "s", ["a", "b", "c", "d"]) == ["b", "d"]
    assert memory.learn("p", "s", ["a", "b", "c", "d"], {"b": f"the db password is {DB}", "d": "x"}) == {
        DB: "password-in-prose"}
    assert memory.unlearned("p", "s", ["a", "b", "c", "d"]) == []


def test_values_given_by_another_session_are_masked_and_reported_once():
    memory = SecretMemory(Redactor())
    assert memory.recurring("p", "fork") is None
    assert memory.add("p", "fork", {VPN: "password-in-prose"}) == {VPN: "password-in-prose"}
    assert memory.add("p", "fork", {VPN: "password-in-prose"}) == {}
    assert memory.redact("p", "fork")(f"try {VPN} now") == "try [REDACTED:password-in-prose] now"
    assert memory.redact("p", "other")(f"try {VPN} now") == f"try {VPN} now"  # per session
    assert not memory.knows("p", "fork")  # given values, but none of its history read yet
    assert VPN not in repr(memory) + repr(memory.recurring("p", "fork")) + repr(memory._sessions)


def test_a_staged_memory_takes_effect_only_when_committed():
    memory = SecretMemory(Redactor())
    memory.add("p", "s", {DB: "password-in-prose"})
    staged = memory.stage()
    assert staged.learn("p", "s", ["a"], {"a": f"the vpn password is {VPN}"}) == {VPN: "password-in-prose"}
    assert staged.redact("p", "s")(f"{VPN} {DB}") == "[REDACTED:password-in-prose] [REDACTED:password-in-prose]"
    assert memory.redact("p", "s")(f"{VPN} {DB}") == f"{VPN} [REDACTED:password-in-prose]"  # not yet
    assert not memory.knows("p", "s") and memory.unlearned("p", "s", ["a"]) == ["a"]
    memory.add("p", "s", {"Other-Value-42x": "known-secret"})  # another build's, meanwhile
    staged.commit()
    assert memory.knows("p", "s") and memory.unlearned("p", "s", ["a"]) == []
    assert memory.redact("p", "s")(f"{VPN} {DB} Other-Value-42x") == (
        "[REDACTED:password-in-prose] [REDACTED:password-in-prose] [REDACTED:known-secret]")


def test_a_rebuild_remembers_only_the_holders_the_state_db_lacks(writer, config, monkeypatch):
    """The in-pass map of who holds which turn covers what the state DB cannot say yet (sessions
    new since the last pass), not every turn of the ledger."""
    import indexer.sync.build as engine  # every pass builds through it

    maps: list[dict] = []
    real = engine.build_sessions

    def spy(*args, **kwargs):
        built = real(*args, **kwargs)
        if kwargs.get("pass_holders") is not None:
            maps.append(kwargs["pass_holders"])
        return built

    monkeypatch.setattr(engine, "build_sessions", spy)
    monkeypatch.setattr(engine, "SESSIONS_PER_BATCH", 1)
    early, own = fork_family(writer)
    writer.turn("main", user=f"the vpn password is {VPN}")
    one_pass(config)
    late = writer.turn("late", user="a session new since the last pass")
    ix = indexer(config)
    try:
        sync_once(ix, force=True)
    finally:
        ix.close()
    assert maps and all(m is maps[0] for m in maps)  # one map for the whole rebuild
    assert maps[0] == {late: {"late"}}
    assert holding(config, VPN) == []


# -- a subagent of another persona forked from the session -------------------------------------------


def subagent_family(writer) -> tuple[str, str]:
    """main (atlas): a turn mentioning the value bare; ``sub`` (persona nova) forked from it, repeating
    it in a turn of its own. Returns (the shared turn, sub's own)."""
    early = writer.turn("main", user=f"use {VPN} for the vpn", assistant="ok")
    writer.fork("sub", early, persona="nova")
    return early, writer.turn("sub", user=f"{VPN} did not work from the office", persona="nova")


def nova_exported(config, turn: str) -> str:
    [path] = (Path(config.qmd_export_dir) / "nova" / "sessions" / "sub").rglob(f"{turn}.md")
    return path.read_text()


@pytest.mark.parametrize("order", [None, ["nova", "atlas"]], ids=["atlas-first", "nova-first"])
def test_a_subagents_copies_are_masked_when_the_parent_names_the_value_later(writer, config_factory, order):
    """The parent's build cannot write nova's documents: it leaves the value to nova's next build."""
    extra = {"ledger": {"personas": order}} if order else {}
    config = config_factory(sinks=("lancedb", "qmd"), **extra)
    early, own = subagent_family(writer)
    ix = indexer(config)
    try:
        sync_once(ix)
        assert VPN in nova_exported(config, early) and VPN in nova_exported(config, own)
        writer.turn("main", user=f"the vpn password is {VPN}")
        sync_once(ix)
        sync_once(ix)  # nova first: the value reaches nova's build on the pass after
    finally:
        ix.close()
    assert VPN not in nova_exported(config, early) and VPN not in nova_exported(config, own)
    assert holding(config, VPN) == []


def test_a_subagent_first_read_after_a_restart_takes_the_parents_values(writer, config_factory):
    config = config_factory(sinks=("lancedb", "qmd"))
    early, own = subagent_family(writer)
    writer.turn("main", user=f"the vpn password is {VPN}")
    ix = indexer(config)
    try:
        sync_once(ix)
    finally:
        ix.close()
    ix = indexer(config)  # a restart: nothing known; only the subagent moves
    try:
        later = writer.turn("sub", user=f"tried {VPN} again", persona="nova")
        sync_once(ix)
    finally:
        ix.close()
    assert VPN not in nova_exported(config, later)
    assert VPN not in nova_exported(config, early) and VPN not in nova_exported(config, own)
    assert holding(config, VPN) == []


def test_what_is_owed_to_a_subagent_survives_a_restart_before_its_personas_pass(writer, config_factory):
    """Only the session's label is recorded (the state DB never holds a value): after a restart the
    subagent is read again and takes the value from its parent's history."""
    config = config_factory(sinks=("lancedb", "qmd"))
    early, own = subagent_family(writer)
    ix = indexer(config)
    try:
        sync_once(ix)
        writer.turn("main", user=f"the vpn password is {VPN}")
        sync_once(ix, personas=["atlas"])  # the process stops after atlas's part
        assert ix.state.secret_rechecks("nova") == {"sub"}
    finally:
        ix.close()
    assert VPN in nova_exported(config, early)
    one_pass(config)  # a new process; nothing moved since
    assert VPN not in nova_exported(config, early) and VPN not in nova_exported(config, own)
    assert holding(config, VPN) == []
    ix = indexer(config)
    try:
        assert ix.state.secret_rechecks("nova") == set()
    finally:
        ix.close()


def test_a_value_a_subagent_names_reaches_its_parents_copy_across_a_restart(writer, config_factory):
    config = config_factory(sinks=("lancedb", "qmd"))
    early = writer.turn("main", user=f"use {VPN} for the vpn", assistant="ok")
    writer.fork("sub", early, persona="nova")
    ix = indexer(config)
    try:
        sync_once(ix)
        writer.turn("sub", user=f"the vpn password is {VPN}", persona="nova")
        sync_once(ix)  # atlas first (nothing new), then nova: owes atlas's main
    finally:
        ix.close()
    one_pass(config)
    assert VPN not in exported(config, "main", early)
    assert holding(config, VPN) == []


def test_an_owed_session_whose_thread_row_broke_is_rewritten_once_not_every_pass(writer, config_factory,
                                                                                  monkeypatch):
    import indexer.sync.build as engine  # every pass builds through it

    config = config_factory(sinks=("lancedb", "qmd"))
    early, own = subagent_family(writer)
    ix = indexer(config)
    try:
        sync_once(ix)
        writer.execute("UPDATE threads SET ancestry='not json' WHERE turn_id=?", (own,))
        writer.turn("main", user=f"the vpn password is {VPN}")
        sync_once(ix)
        sync_once(ix)
        built: list[list[str]] = []
        real = engine.build_sessions
        monkeypatch.setattr(engine, "build_sessions", lambda *a, **k: built.append([s.label for s in a[3]])
                            or real(*a, **k))
        for _ in range(3):
            sync_once(ix)
        assert built == [], built  # nothing owed any more: quiet passes build nothing
    finally:
        ix.close()
    assert VPN not in nova_exported(config, early) and VPN not in nova_exported(config, own)
    assert holding(config, VPN) == []


def test_a_new_subagent_of_a_known_parent_without_secrets_reads_nothing_more(writer, config_factory, monkeypatch):
    from indexer.sync.recurring import SecretMemory as Memory

    config = config_factory(sinks=("qmd",))
    for i in range(50):
        last = writer.turn("main", user=f"question {i}", assistant="answer")
    scanned: list[str] = []
    real = Memory.found_in
    monkeypatch.setattr(Memory, "found_in", lambda self, text: scanned.append(text) or real(self, text))
    ix = indexer(config)
    try:
        sync_once(ix)
        for k in range(3):
            writer.fork(f"sub{k}", last, persona="nova")
            writer.turn(f"sub{k}", user="a task", persona="nova")
            scanned.clear()
            sync_once(ix)
            assert scanned == [], (k, len(scanned))  # main is known: its memory answers, no re-read
    finally:
        ix.close()


def test_a_recurring_value_is_masked_in_its_encoded_forms_under_the_rule_that_found_it():
    import json
    from urllib.parse import quote

    from redaction import Recurring

    value = 'Zq8"hunter/Vm2'
    recurring = Recurring({value: "password-in-prose"})
    red = Redactor()
    for form in (value, json.dumps({"pw": value}), quote(value, safe="")):
        out = red.redact(f"sent {form} again", recurring=recurring)
        assert "hunter" not in out.text and [f.rule for f in out.findings] == ["password-in-prose"], (form, out)


def test_the_recorded_owed_sessions_are_read_once_a_process_not_every_pass(writer, config):
    """A quiet pass must stay cheap: after this process built what an earlier one recorded, its own
    memory lists every owed session."""
    writer.turn("main", user="hello", assistant="hi")
    ix = indexer(config)
    try:
        sync_once(ix)  # backfill: no tail yet
        reads: list[str] = []
        real = ix.state.secret_rechecks
        ix.state.secret_rechecks = lambda persona: reads.append(persona) or real(persona)
        for _ in range(3):
            sync_once(ix)
        assert reads == ["atlas"]
    finally:
        ix.close()
