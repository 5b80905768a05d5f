"""A fork of a private session carries its history: the private session's turns, under the fork's
label (and in a compaction the fork made of them), are hidden from every other caller — search in
every mode, memory_get, the QMD export — and come back when the session is shared again. Real WAL
ledger, real LanceDB, the real QMD exporter (files); the fake embedder (what is tested is who may
see a copy, not what the model understands)."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest
from fake_embedder import FakeEmbedder

from indexer.cli.visibility import apply_visibility
from indexer.search.retrieval import DocumentNotFound, get_document
from indexer.search.searcher import Searcher, SearchRequest
from indexer.sync.context import Indexer, build_sinks
from indexer.sync.engine import sync_once

SECRET_WORDS = "zanzibarplum merger closes friday"


@pytest.fixture
def world(writer, config_factory):
    """main: m0 m1; room: forked from m1, its own turn s0 (the secret) and a compaction of it, made
    private; child: forked from that compaction (it carries m0 m1 s0 and the summary), then its own
    turn; other: an unrelated session."""
    m0 = writer.turn("main", user="the heron plan for the harbour cluster")
    m1 = writer.turn("main", user="the heron plan goes live soon")
    writer.fork("room", m1)
    s0 = writer.turn("room", user=f"the {SECRET_WORDS}", assistant="noted, keep it quiet")
    summary = writer.compaction("room", f"summary: the {SECRET_WORDS}")
    writer.fork("child", summary)
    c1 = writer.turn("child", user="child's own words about cabbages")
    writer.turn("other", user="an unrelated session about lunch")
    config = config_factory(sinks=("lancedb", "qmd"))
    embedder = FakeEmbedder()
    ix = Indexer(config, sinks=build_sinks(config, embedder=embedder), redact=lambda s: s, redaction_version="t")
    sync_once(ix)
    ix.close()
    change = apply_visibility(config, "room", "private")
    assert change.removed >= 3  # room's own documents and child's copy of s0 (and its compaction) left the export
    searcher = Searcher(config, embedder=embedder)
    yield config, searcher, {"m0": m0, "m1": m1, "s0": s0, "c1": c1, "summary": summary}
    searcher.close()


def found(searcher, caller, query=SECRET_WORDS, **kw):
    """(session, turn) of every copy the results name (a turn shared by forks is one result listing them)."""
    request = SearchRequest(query=query, persona="atlas", session=caller, max_results=50, **kw)
    return {(session, r.turn_id) for r in searcher.search(request).results for session in r.sessions or [r.session]}


def exported(config) -> set[str]:
    root = config.qmd_export_dir / "atlas"
    return {str(p.relative_to(root)) for p in root.rglob("*.md")}


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "vector"])
@pytest.mark.parametrize("caller", ["main", "other", None])
def test_no_other_caller_finds_the_private_sessions_turns_under_a_forks_label(world, caller, mode):
    config, searcher, t = world
    hits = found(searcher, caller, mode=mode)
    assert not {turn for _, turn in hits} & {t["s0"], t["summary"]}, hits
    assert not {s for s, _ in hits} & {"room"}


def test_the_fork_and_the_private_session_still_see_their_own_history(world):
    config, searcher, t = world
    assert ("child", t["s0"]) in found(searcher, "child", mode="keyword")  # its own copy
    assert ("room", t["s0"]) in found(searcher, "room", mode="keyword")
    assert ("child", t["c1"]) in found(searcher, "main", query="child's own words about cabbages", mode="keyword")


def test_memory_get_of_a_forks_copy_is_not_found_for_others(world):
    config, searcher, t = world
    path = f"sessions/child/turns/{t['s0']}.md"
    for caller in ("main", "other", None):
        with pytest.raises(DocumentNotFound):
            get_document(config, "atlas", path, session=caller)
    assert SECRET_WORDS in get_document(config, "atlas", path, session="child").text


def test_the_export_holds_no_copy_until_the_session_is_shared_again(world):
    config, searcher, t = world
    files = exported(config)
    assert not any(t["s0"] in f or t["summary"] in f for f in files), files
    assert f"sessions/child/turns/{t['c1']}.md" in files  # the fork's own turn stays
    change = apply_visibility(config, "room", "shared")
    assert change.restored >= 3
    files = exported(config)
    assert {f"sessions/room/turns/{t['s0']}.md", f"sessions/child/turns/{t['s0']}.md"} <= files
    assert found(searcher, "other", mode="keyword") & {("child", t["s0"]), ("room", t["s0"])}


def test_a_new_fork_of_the_private_session_is_kept_out_by_the_next_pass(world, writer):
    config, searcher, t = world
    writer.fork("late-child", t["s0"])
    writer.turn("late-child", user="late child's own words")
    ix = Indexer(config, sinks=build_sinks(config, embedder=FakeEmbedder()), redact=lambda s: s,
                 redaction_version="t")
    try:
        sync_once(ix)
    finally:
        ix.close()
    assert not any("late-child" in f and t["s0"] in f for f in exported(config))
    assert ("late-child", t["s0"]) not in found(searcher, "main", mode="keyword")


@contextlib.contextmanager
def searching_after_each_write(searcher, persona, caller, query, *, fork=None):
    """While the block runs: after every LanceDB upsert (the files table not yet recorded), search as
    ``caller`` and keep the turns found (and as ``fork``, which may see the copies: proof that the
    search reads what the write just added); also keep every document the LanceDB and QMD sinks
    were given."""
    from exporters.lancedb import LanceSink
    from exporters.qmd import QmdExporter

    seen = SimpleNamespace(found=[], indexed=[], exported=[], by_fork=[])
    real_upsert, real_export = LanceSink.upsert, QmdExporter.upsert

    def upsert_then_look(self, target, docs):
        real_upsert(self, target, docs)
        seen.indexed.extend(docs)
        seen.found.append({turn for _, turn in found_in(searcher, persona, caller, query=query, mode="keyword")})
        if fork is not None:
            seen.by_fork.append({turn for _, turn in found_in(searcher, persona, fork, query=query, mode="keyword")})

    def export(self, target, docs):
        seen.exported.extend(d.path for d in docs)
        return real_export(self, target, docs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(LanceSink, "upsert", upsert_then_look)
        mp.setattr(QmdExporter, "upsert", export)
        yield seen


def _sync(config, **kw):
    ix = Indexer(config, sinks=build_sinks(config, embedder=FakeEmbedder()), redact=lambda s: s,
                 redaction_version="t")
    try:
        return sync_once(ix, **kw)
    finally:
        ix.close()


def _no_copy_anywhere(config, searcher, t):
    assert not any(t["s0"] in f for f in exported(config)), exported(config)
    for caller in ("main", "other", None):
        assert not {turn for _, turn in found(searcher, caller, mode="keyword")} & {t["s0"]}


def test_a_forced_rebuild_does_not_put_a_forks_copy_back_into_the_export(world):
    config, searcher, t = world
    assert _sync(config, force=True).personas["atlas"].mode == "rebuild"
    _no_copy_anywhere(config, searcher, t)


def test_deleting_the_private_session_does_not_reveal_its_turns_in_forks(world, writer):
    config, searcher, t = world
    writer.set_session_status("room", "deleted")
    _sync(config)  # room's own documents are purged; child's copies stay, and stay hidden
    assert not any("/room/" in f for f in exported(config))
    _no_copy_anywhere(config, searcher, t)


def test_rewinding_the_private_session_does_not_reveal_its_turns_in_forks(world, writer):
    config, searcher, t = world
    writer.fork("room", t["m1"])  # room's head back before s0: s0 leaves room's indexed history
    _sync(config)
    _no_copy_anywhere(config, searcher, t)


def test_a_private_forks_inherited_history_stays_visible_in_its_parent(world):
    """room inherited m0 m1 from main when it forked: those are main's turns, not room's, and making
    room private hides neither main's copies nor the export's."""
    config, searcher, t = world
    for caller in ("other", None):
        seen = found(searcher, caller, query="the heron plan goes live soon", mode="keyword")
        assert ("main", t["m1"]) in seen and ("room", t["m1"]) not in seen, seen
    files = exported(config)
    assert {f"sessions/main/turns/{t['m0']}.md", f"sessions/main/turns/{t['m1']}.md"} <= files
    assert not any("/room/" in f for f in files)


def test_a_forks_copy_of_a_new_private_turn_is_hidden_from_the_pass_that_indexes_it(world, writer):
    """room says something new and is forked at once: the pass that indexes both knows the new turn
    as room's own before it writes the fork's copy (no window in which the copy shows)."""
    config, searcher, t = world
    fresh = writer.turn("room", user="a fresh private kumquat remark")
    writer.fork("fresh-child", fresh)
    with searching_after_each_write(searcher, "atlas", "other", "fresh private kumquat remark") as seen:
        _sync(config)
    assert {d.session for d in seen.indexed if d.turn_id == fresh} == {"room", "fresh-child"}
    assert seen.found and not any(fresh in s for s in seen.found), seen.found  # searched after every write
    assert not any(fresh in f for f in exported(config))


def _a_forks_copy_written_but_not_recorded(config, writer) -> str:
    """room says ``solo`` (indexed); ``late`` forks it; the pass writing late's copy fails right after
    the LanceDB write (the copy noted in flight, never recorded). Returns solo's turn id."""
    from exporters.lancedb import LanceSink

    solo = writer.turn("room", user="a solitary private quince remark")
    _sync(config)
    writer.fork("late", solo)
    real = LanceSink.upsert

    def upsert_then_fail(self, persona, docs):
        real(self, persona, docs)
        raise RuntimeError("disk full")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(LanceSink, "upsert", upsert_then_fail)
        with pytest.raises(RuntimeError, match="disk full"):
            _sync(config)
    return solo


def test_a_copy_whose_write_failed_stays_hidden_and_its_record_goes_once_a_pass_records_it(world, writer):
    """The in-flight record of a fork's copy outlives a failed write (the sink may hold the copy), and
    the next write after the copy is recorded drops it."""
    from indexer.state.db import StateDB

    config, searcher, t = world
    solo = _a_forks_copy_written_but_not_recorded(config, writer)
    state = StateDB(config.state_db_path)
    # late inherits room's whole history: s0, room's compaction and solo, all room's own
    assert state.private.in_flight("atlas") == {
        "copies": {t["s0"]: ["late"], t["summary"]: ["late"], solo: ["late"]},
        "compactions": {t["summary"]: ["late"]}}
    assert ("late", solo) not in found(searcher, "other", query="solitary private quince remark", mode="keyword")
    _sync(config)  # writes and records the copy
    writer.turn("other", user="another lunch")
    _sync(config)  # its write drops what the files table now records
    assert state.private.in_flight("atlas") == {}
    assert ("late", solo) not in found(searcher, "other", query="solitary private quince remark", mode="keyword")
    state.close()


@pytest.mark.parametrize("persona", ["atlas", "nova"], ids=["same-persona", "subagent"])
def test_a_new_fork_of_an_already_indexed_private_turn_is_hidden_while_its_pass_writes_it(world, writer,
                                                                                          persona):
    """room's turn ``solo`` is indexed and held by room alone; then a session forks it (of room's persona,
    or a subagent of another). In the pass that writes the fork's copy, a search run right after the
    LanceDB write — the state DB does not record the copy yet — does not find it, and no write to the
    export holds it."""
    config, searcher, t = world
    solo = writer.turn("room", user="a solitary private quince remark")
    writer.turn("lunch", user="an unrelated session about lunch", persona=persona)
    _sync(config)
    writer.fork("late", solo, persona=persona)
    writer.turn("late", user="late's own words about parsnips", persona=persona)
    with searching_after_each_write(searcher, persona, "lunch", "solitary private quince remark", fork="late") as seen:
        _sync(config)
    assert [d.session for d in seen.indexed if d.turn_id == solo] == ["late"]  # written while searches ran
    assert solo in seen.by_fork[-1]  # the fork's own search finds the fresh copy: others' searches could
    assert seen.found and not any(solo in s for s in seen.found), seen.found
    assert not [p for p in seen.exported if solo in p], seen.exported
    assert not any(solo in f for f in exported_all(config))
    assert ("late", solo) in found_in(searcher, persona, "late", query="solitary private quince remark",
                                      mode="keyword")


def test_a_forks_compaction_written_in_an_earlier_part_than_its_copies_is_hidden_too(world, writer):
    """Writes of one document each (``docs_per_write = 1``, sorted by length: the short compaction goes
    first): the compaction is a fork's by the copies written after it, and hidden from the first write."""
    config, searcher, t = world
    solo = writer.turn("room", user="a solitary private quince remark with a long tail " * 3)
    _sync(config)
    writer.fork("late", solo)
    derived = writer.compaction("late", "quince orchard")
    one_by_one = config.model_copy(update={"sync": config.sync.model_copy(update={"docs_per_write": 1})})
    with searching_after_each_write(searcher, "atlas", "other", "quince orchard", fork="late") as seen:
        _sync(one_by_one)
    assert seen.indexed[0].turn_id == derived and len(seen.indexed) > 1  # written first, before the copies
    assert derived in seen.by_fork[0]  # searchable from the first write on, for the fork itself
    assert not any(derived in s for s in seen.found), seen.found
    assert not [p for p in seen.exported if derived in p], seen.exported


def test_a_session_made_private_while_a_pass_writes_its_forks_copy_hides_the_copy_at_once(world, writer):
    """The daemon's API thread makes ``vault`` private while a pass is writing ``vlate``'s copy of
    vault's turn (after the pass noted its copies under the old visibility, before the LanceDB
    write): from the change on, no search finds the copy and no write puts it into the export."""
    import threading

    from indexer.sync.visibility import apply_visibility as apply_in_process

    config, searcher, t = world
    v = writer.turn("vault", user="a vaulted persimmon secret")
    _sync(config)
    writer.fork("vlate", v)
    ix = Indexer(config, sinks=build_sinks(config, embedder=FakeEmbedder()), redact=lambda s: s,
                 redaction_version="t")
    changes: list = []

    def change_from_another_thread():
        thread = threading.Thread(target=lambda: changes.append(apply_in_process(ix, "vault", "private")))
        thread.start()
        thread.join(timeout=60)
        assert not thread.is_alive()

    from exporters.lancedb import LanceSink
    from exporters.qmd import QmdExporter

    real_upsert, real_export = LanceSink.upsert, QmdExporter.upsert
    seen, exported_after = [], []

    def upsert(self, persona, docs):
        if not changes and any(d.session == "vlate" for d in docs):
            change_from_another_thread()
        real_upsert(self, persona, docs)
        if changes:
            seen.append(found(searcher, "other", query="vaulted persimmon secret", mode="keyword"))

    def export(self, persona, docs):
        if changes:
            exported_after.extend(d.path for d in docs if d.turn_id == v)
        return real_export(self, persona, docs)

    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(LanceSink, "upsert", upsert)
            mp.setattr(QmdExporter, "upsert", export)
            sync_once(ix)
    finally:
        ix.close()
    assert [c.visibility for c in changes] == ["private"] and seen  # changed mid-write, searched after
    assert not any(("vlate", v) in s or ("vault", v) in s for s in seen), seen
    assert exported_after == []
    assert ("vlate", v) in found(searcher, "vlate", query="vaulted persimmon secret", mode="keyword")


def test_a_new_fork_of_an_already_indexed_private_turn_is_hidden_when_a_rebuild_switches_in(world, writer):
    """The same copy written by a forced rebuild: a search right after the LanceDB rebuild's switch
    (the state DB records the new set after it) does not find it."""
    from exporters.lancedb.rebuild import LanceRebuild

    config, searcher, t = world
    solo = writer.turn("room", user="a solitary private quince remark")
    _sync(config)
    writer.fork("late", solo)
    seen: list[set] = []
    by_fork: list[set] = []
    real_commit = LanceRebuild.commit

    def commit_then_look(self):
        real_commit(self)
        seen.append({(s, turn) for s, turn in found(searcher, "other", query="solitary private quince remark",
                                                      mode="keyword")})
        by_fork.append(found(searcher, "late", query="solitary private quince remark", mode="keyword"))

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(LanceRebuild, "commit", commit_then_look)
        assert _sync(config, force=True).personas["atlas"].mode == "rebuild"
    assert ("late", solo) in by_fork[0]  # the switched-in table is searched: the fork finds its copy
    assert seen == [set()]
    assert ("late", solo) in found(searcher, "late", query="solitary private quince remark", mode="keyword")


def test_a_compaction_a_fork_makes_of_private_turns_is_hidden_while_its_pass_writes_it(world, writer):
    config, searcher, t = world
    derived = writer.compaction("child", "child's summary: the quince orchard is for sale")
    with searching_after_each_write(searcher, "atlas", "other", "quince orchard", fork="child") as seen:
        _sync(config)
    assert [d.turn_id for d in seen.indexed] == [derived]
    assert seen.by_fork == [{derived}]  # the search sees the fresh row: the fork does
    assert seen.found == [set()]
    assert not [p for p in seen.exported if derived in p], seen.exported
    assert derived in {turn for _, turn in found(searcher, "child", query="quince orchard", mode="keyword")}


def test_a_compaction_a_fork_makes_of_private_turns_is_hidden_like_them(world, writer):
    """child carries room's own turns; a summary child writes of them is private content too (hidden
    from others, kept out of the export); a compaction main made before any fork stays main's."""
    config, searcher, t = world
    derived = writer.compaction("child", f"child's summary: the {SECRET_WORDS}")
    _sync(config)
    for caller in ("main", "other", None):
        assert derived not in {turn for _, turn in found(searcher, caller, mode="keyword")}
    assert derived in {turn for _, turn in found(searcher, "child", mode="keyword")}
    assert not any(derived in f for f in exported(config))


def test_a_forced_rebuild_keeps_the_parents_history_in_the_export(world):
    """A rebuild writes room's documents and main's in the same batches: main's own turns (which room
    inherited) stay exported."""
    config, searcher, t = world
    assert _sync(config, force=True).personas["atlas"].mode == "rebuild"
    assert {f"sessions/main/turns/{t['m0']}.md", f"sessions/main/turns/{t['m1']}.md"} <= exported(config)


# -- a fork into another persona (a subagent running as its own agent) ----------------------------


def found_in(searcher, persona, caller, query=SECRET_WORDS, **kw):
    request = SearchRequest(query=query, persona=persona, session=caller, max_results=50, **kw)
    return {(session, r.turn_id) for r in searcher.search(request).results for session in r.sessions or [r.session]}


def exported_all(config) -> set[str]:
    root = config.qmd_export_dir
    return {str(p.relative_to(root)) for p in root.rglob("*.md")}


@pytest.fixture
def subagent_world(world, writer):
    """``sub`` (persona nova) forked from room's own turn s0, with a turn of its own; ``lunch``: another
    nova session. Indexed by one pass after room was made private."""
    config, searcher, t = world
    writer.fork("sub", t["s0"], persona="nova")
    t["sub1"] = writer.turn("sub", user="subagent's own words about turnips", persona="nova")
    writer.turn("lunch", user="nova's other session about lunch", persona="nova")
    _sync(config)
    return config, searcher, t


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "vector"])
@pytest.mark.parametrize("caller", ["lunch", None])
def test_another_personas_fork_of_a_private_session_hides_its_turns_from_that_persona(subagent_world, caller,
                                                                                       mode):
    config, searcher, t = subagent_world
    assert t["s0"] not in {turn for _, turn in found_in(searcher, "nova", caller, mode=mode)}
    with pytest.raises(DocumentNotFound):
        get_document(config, "nova", f"sessions/sub/turns/{t['s0']}.md", session=caller)


def test_the_subagent_still_sees_its_own_history_and_its_own_turns_show(subagent_world):
    config, searcher, t = subagent_world
    assert ("sub", t["s0"]) in found_in(searcher, "nova", "sub", mode="keyword")
    assert ("sub", t["sub1"]) in found_in(searcher, "nova", "lunch", query="subagent's own words about turnips",
                                          mode="keyword")


def test_no_persona_exports_a_copy_until_the_session_is_shared_again(subagent_world):
    config, searcher, t = subagent_world
    files = exported_all(config)
    assert not any(t["s0"] in f for f in files), files
    assert f"nova/sessions/sub/turns/{t['sub1']}.md" in files
    apply_visibility(config, "room", "shared")
    files = exported_all(config)
    assert f"nova/sessions/sub/turns/{t['s0']}.md" in files
    assert ("sub", t["s0"]) in found_in(searcher, "nova", "lunch", mode="keyword")


def test_making_the_session_private_after_the_subagent_forked_hides_the_copy_at_once(world, writer):
    config, searcher, t = world
    apply_visibility(config, "room", "shared")
    writer.fork("sub", t["s0"], persona="nova")
    writer.turn("lunch", user="nova's other session about lunch", persona="nova")
    _sync(config)
    assert f"nova/sessions/sub/turns/{t['s0']}.md" in exported_all(config)
    apply_visibility(config, "room", "private")  # no pass in between
    assert not any(t["s0"] in f for f in exported_all(config))
    assert t["s0"] not in {turn for _, turn in found_in(searcher, "nova", "lunch", mode="keyword")}


@pytest.mark.parametrize("order", [None, ["nova", "atlas"]], ids=["atlas-first", "nova-first"])
def test_a_fresh_private_turn_forked_at_once_into_another_persona_never_reaches_its_export(world, writer,
                                                                                            config_factory, order):
    """room says something new and a subagent forks it at once; one pass indexes both. Whichever
    persona the pass takes first, no write to nova's export ever holds the copy, and no search of
    nova's other sessions finds it after the pass."""
    from exporters.qmd import QmdExporter

    config, searcher, t = world
    if order is not None:
        config = config_factory(sinks=("lancedb", "qmd"), ledger={"personas": order})
    fresh = writer.turn("room", user="a fresh private kumquat remark")
    writer.fork("sub", fresh, persona="nova")
    writer.turn("lunch", user="nova's other session about lunch", persona="nova")
    written: list[str] = []
    real = QmdExporter.upsert

    def upsert(self, persona, docs):
        written.extend(f"{persona}/{d.path}" for d in docs)
        return real(self, persona, docs)

    QmdExporter.upsert = upsert
    try:
        _sync(config)
    finally:
        QmdExporter.upsert = real
    assert "nova/sessions/lunch/turns/" in "".join(written)  # nova's pass wrote its export
    assert not [p for p in written if fresh in p], written
    assert not any(fresh in f for f in exported_all(config))
    assert fresh not in {turn for _, turn in found_in(searcher, "nova", "lunch", query="kumquat", mode="keyword")}


def test_a_pass_of_the_other_persona_alone_still_knows_the_private_sessions_new_turns(world, writer,
                                                                                      config_factory):
    """Only nova is synced (`[ledger] personas`, or `sync --persona nova`): room's new turn is still
    recorded as room's own before nova's pass writes a subagent's copy of it."""
    config, searcher, t = world
    nova_only = config_factory(sinks=("lancedb", "qmd"), ledger={"personas": ["nova"]})
    fresh = writer.turn("room", user="a fresh private kumquat remark")
    writer.fork("sub", fresh, persona="nova")
    writer.turn("lunch", user="nova's other session about lunch", persona="nova")
    _sync(nova_only)
    _sync(nova_only)
    assert not any(fresh in f for f in exported_all(config))
    assert fresh not in {turn for _, turn in found_in(searcher, "nova", "lunch", query="kumquat", mode="keyword")}


def test_the_record_of_a_copy_whose_fork_went_away_is_dropped(world, writer):
    """A fork's write failed (its copy noted, never recorded), then the fork was deleted: the next
    write drops the note instead of hiding that turn (and the fork's compactions) for good."""
    from indexer.state.db import StateDB

    config, searcher, t = world
    solo = _a_forks_copy_written_but_not_recorded(config, writer)
    state = StateDB(config.state_db_path)
    assert solo in state.private.in_flight("atlas")["copies"]
    writer.set_session_status("late", "deleted")
    writer.turn("other", user="another lunch")
    _sync(config)
    assert state.private.in_flight("atlas") == {}
    state.close()


@pytest.mark.parametrize("fork_persona", ["atlas", "nova"])
def test_a_private_session_that_moves_and_is_forked_at_once_never_shows_the_new_turn(world, writer, fork_persona):
    """room (private) says something new, moves to nova in the ledger, and a session forks the new turn,
    all before one pass: the turn is recorded as room's own (looked up by label in any persona: the
    registry still says atlas) before the fork's copy is written."""
    config, searcher, t = world
    writer.turn("lunch", user="nova's other session about lunch", persona="nova")
    _sync(config)
    fresh = writer.turn("room", user="a fresh private kumquat remark")
    writer.execute("UPDATE sessions SET persona_id = 'nova' WHERE label = 'room'")
    writer.fork("sub", fresh, persona=fork_persona)
    writer.turn("sub", user="sub's own turnip words", persona=fork_persona)
    caller = "other" if fork_persona == "atlas" else "lunch"
    with searching_after_each_write(searcher, fork_persona, caller, "kumquat", fork="sub") as seen:
        _sync(config)
    assert fresh in set().union(*seen.by_fork)  # the copy was written and searchable for its fork
    assert not any(fresh in s for s in seen.found), seen.found
    assert not [p for p in seen.exported if fresh in p] and not any(fresh in f for f in exported_all(config))


def test_a_copy_never_recorded_stays_hidden_when_its_fork_moves_to_another_persona(world, writer):
    """The fork's copy sits in atlas's index unrecorded (the write failed after LanceDB took it); the fork
    then moves to nova: the note is kept — it is all that hides that copy."""
    config, searcher, t = world
    solo = _a_forks_copy_written_but_not_recorded(config, writer)
    writer.execute("UPDATE sessions SET persona_id = 'nova' WHERE label = 'late'")
    for lunch in ("another lunch", "one more lunch"):  # writes in atlas after the move: notes are pruned
        writer.turn("other", user=lunch)
        _sync(config)
    for caller in ("main", "other", None):
        assert solo not in {turn for _, turn in found(searcher, caller, query="solitary private quince remark",
                                                       mode="keyword")}


def test_a_session_made_private_while_its_head_cannot_be_read_still_hides_its_forks_copies(writer,
                                                                                          config_factory):
    """Its own turns cannot be read from the ledger then: recorded as none, the fork's copy of its
    turn stayed in the export and in everyone's search. It is not recorded at all instead: its
    whole indexed history counts as its own until the head can be read."""
    m0 = writer.turn("main", user="the heron plan for the harbour cluster")
    writer.fork("room", m0)
    s0 = writer.turn("room", user=f"the {SECRET_WORDS}", assistant="noted")
    writer.fork("child", s0)
    writer.turn("child", user="child's own words about cabbages")
    config = config_factory(sinks=("lancedb", "qmd"))
    embedder = FakeEmbedder()
    ix = Indexer(config, sinks=build_sinks(config, embedder=embedder), redact=lambda s: s, redaction_version="t")
    try:
        sync_once(ix)
        head = writer.turn("room", user="a later room turn", assistant="ok")
        writer.execute("UPDATE threads SET ancestry = '[broken' WHERE turn_id = ?", (head,))
        sync_once(ix)
        assert [(b["session"], b["reason"]) for b in ix.state.bad_list("atlas")] == [("room", "bad_ancestry")]
    finally:
        ix.close()
    apply_visibility(config, "room", "private")
    _sync(config)
    _sync(config, force=True)
    assert not any("zanzibarplum" in (config.qmd_export_dir / "atlas" / p).read_text() for p in exported(config))
    searcher = Searcher(config, embedder=embedder)
    try:
        for caller in ("main", None):
            assert not {t for _, t in found(searcher, caller, mode="keyword")} & {s0}, caller
        # the session itself sees it, and so does the fork (its own history)
        assert {("room", s0), ("child", s0)} <= found(searcher, "room", mode="keyword") | found(
            searcher, "child", mode="keyword")
    finally:
        searcher.close()


# -- from a review: a private session whose head cannot be read ------------------------------------


def first_pass(config, embedder) -> list[dict]:
    """One pass, unredacted (the words must stay findable); returns the bad rows it recorded."""
    ix = Indexer(config, sinks=build_sinks(config, embedder=embedder), redact=lambda s: s, redaction_version="t")
    try:
        sync_once(ix)
        return ix.state.bad_list("atlas")
    finally:
        ix.close()


def assert_hidden_from_others(config, embedder, turn: str) -> None:
    """``turn`` is found neither by ``main`` nor by a caller with no session, nor in the export."""
    searcher = Searcher(config, embedder=embedder)
    try:
        leaked = {caller: {t for _, t in found(searcher, caller, mode="keyword")} & {turn} for caller in ("main", None)}
        in_export = [p for p in exported(config) if turn in p]
        assert not any(leaked.values()) and not in_export, (leaked, in_export)
    finally:
        searcher.close()


@pytest.mark.parametrize("broken", [
    "DELETE FROM threads WHERE turn_id = :head",
    "UPDATE threads SET ancestry = '[broken' WHERE turn_id = :head",
    "UPDATE threads SET ancestry = NULL WHERE turn_id = :head",  # with a parent that leads nowhere (below)
])
def test_a_private_session_never_readable_still_hides_the_copies_its_fork_holds(broken, writer, config_factory):
    m0 = writer.turn("main", user="the heron plan for the harbour cluster")
    writer.fork("room", m0)
    s0 = writer.turn("room", user=f"the {SECRET_WORDS}", assistant="noted")
    writer.fork("child", s0)
    writer.turn("child", user="child's own words about cabbages")
    head = writer.turn("room", user="a later room turn", assistant="ok")
    writer.execute(broken.replace(":head", "?"), (head,))
    if "NULL" in broken:
        writer.execute("UPDATE turns SET parent_turn_id = 'no-such-turn' WHERE id = ?", (head,))
    config = config_factory(sinks=("lancedb", "qmd"))
    embedder = FakeEmbedder()
    assert [b["session"] for b in first_pass(config, embedder)] == ["room"]
    apply_visibility(config, "room", "private")
    _sync(config)
    assert_hidden_from_others(config, embedder, s0)


def test_a_private_sessions_new_turn_copied_by_a_fork_while_its_head_is_unreadable_stays_hidden(writer,
                                                                                                config_factory):
    """room is private and readable (its own turns recorded); it says a new secret s1, then its head
    moves to a turn whose thread row is broken; a fork taken at s1 copies it. s1 is room's own turn."""
    m0 = writer.turn("main", user="the heron plan for the harbour cluster")
    writer.fork("room", m0)
    writer.turn("room", user="an early room turn", assistant="ok")
    config = config_factory(sinks=("lancedb", "qmd"))
    embedder = FakeEmbedder()
    first_pass(config, embedder)
    apply_visibility(config, "room", "private")
    s1 = writer.turn("room", user=f"the {SECRET_WORDS}", assistant="noted")
    head = writer.turn("room", user="a later room turn", assistant="ok")
    writer.execute("UPDATE threads SET ancestry = '[broken' WHERE turn_id = ?", (head,))
    writer.fork("child", s1)
    writer.turn("child", user="child's own words about cabbages")
    _sync(config)
    assert_hidden_from_others(config, embedder, s1)
