"""A ledger row whose field has the wrong type (text in an integer column, a BLOB where text belongs,
a pathological ancestry) is a bad row: logged and listed, never a failed pass. The turns around it,
in its own session and in every other persona, are indexed by the same pass (real WAL ledger, real
LanceDB; the fake embedder: what is tested is the reading, not the model)."""

from __future__ import annotations

import sqlite3

import pytest
from fake_embedder import FakeEmbedder

from indexer.sync.context import Indexer, build_sinks
from indexer.sync.engine import sync_once
from tests.test_sync import expected_paths

# (what is broken, SQL run on the ledger with the broken turn's id, its session label and head)
CORRUPTIONS = {
    "turns.started_at text": "UPDATE turns SET started_at = 'abc' WHERE id = :turn",
    "turns.completed_at text": "UPDATE turns SET completed_at = 'soon' WHERE id = :turn",
    "messages.sequence text": "UPDATE messages SET sequence = 'first' WHERE turn_id = :turn",
    "messages.content blob": "UPDATE messages SET content = x'ff00fe41' WHERE turn_id = :turn",
    "messages.content blob utf-8": "UPDATE messages SET content = CAST('blob words' AS BLOB) WHERE turn_id = :turn",
    "sessions.created_at text": "UPDATE sessions SET created_at = 'yesterday' WHERE label = :label",
    "sessions.updated_at text": "UPDATE sessions SET updated_at = 'later' WHERE label = :label",
    "session_history.changed_at text": "UPDATE session_history SET changed_at = 'x' WHERE session_label = :label",
    "session_history.session_label blob": "UPDATE session_history SET session_label = CAST(:label AS BLOB)"
                                          " WHERE session_label = :label",
    "threads.ancestry blob": "UPDATE threads SET ancestry = x'ff5b5d' WHERE turn_id = :head",
    "threads.ancestry deep": "UPDATE threads SET ancestry = :deep WHERE turn_id = :head",
}


def _indexer(config):
    return Indexer(config, sinks=build_sinks(config, embedder=FakeEmbedder()), redact=lambda s: s,
                   redaction_version="t")


@pytest.mark.parametrize("broken", list(CORRUPTIONS))
def test_a_wrongly_typed_field_is_a_bad_row_and_the_pass_goes_on(broken, writer, ledger_path, config_factory):
    writer.turn("calm", persona="atlas", user="the harbour crane is blue", assistant="noted")
    first = writer.turn("hurt", persona="atlas", user="first words of hurt", assistant="ok")
    bad = writer.turn("hurt", persona="atlas", user="the turn that breaks", assistant="ok")
    head = writer.turn("hurt", persona="atlas", user="after the broken turn", assistant="ok")
    writer.turn("elsewhere", persona="nova", user="the okapi sleeps", assistant="fine")
    con = sqlite3.connect(ledger_path)
    con.execute(CORRUPTIONS[broken], {"turn": bad, "label": "hurt", "head": head, "deep": "[" * 100_000})
    con.commit()
    con.close()
    config = config_factory(sinks=("lancedb",))
    ix = _indexer(config)
    try:
        summary = sync_once(ix)  # must not raise
        for persona in ("atlas", "nova"):
            assert ix.state.get_cursor(persona) is not None, persona  # the pass completed: the cursor moved
        indexed = ix.state.paths("atlas")
        assert expected_paths(ledger_path, "nova") == ix.state.paths("nova") != set()
        assert any("/calm/" in p for p in indexed)  # another session of the same persona
        bad_rows = ix.state.bad_list("atlas")
        if broken.startswith("threads.ancestry"):  # the session's head cannot be read: the session is skipped
            assert [(b["session"], b["reason"]) for b in bad_rows] == [("hurt", "bad_ancestry")]
            assert not any("/hurt/" in p for p in indexed)
        elif broken.startswith(("sessions.", "session_history.", "messages.content")):
            # not what a document is made of, or text stored as a BLOB: read leniently (invalid UTF-8
            # replaced, as for text), nothing skipped
            assert bad_rows == [] and {p for p in indexed if "/hurt/" in p} == {
                p for p in expected_paths(ledger_path, "atlas") if "/hurt/" in p}
        else:  # the broken turn alone is a bad row, named with its field; its neighbours are indexed
            assert [(b["session"], b["turn_id"], b["reason"]) for b in bad_rows] == [("hurt", bad, "invalid_row")]
            assert bad_rows[0]["detail"].startswith(f"{broken.split(' ')[0]} is not an integer (text of ")
            assert not any(v in bad_rows[0]["detail"] for v in ("abc", "soon", "first"))  # never the value
            assert {p.rsplit("/", 1)[-1][:-3] for p in indexed if "/hurt/" in p} == {first, head}
        assert summary.personas["atlas"].documents_skipped_bad == len(bad_rows) or broken.startswith("threads")
        # the next passes follow the history past the broken rows (tail mode: session_history is read)
        later = [writer.turn("calm", persona="atlas", user="a later calm turn", assistant="ok"),
                 writer.turn("elsewhere", persona="nova", user="a later okapi turn", assistant="ok")]
        sync_once(ix)
        assert all(any(p.endswith(f"/{t}.md") for p in ix.state.paths(persona))
                   for t, persona in zip(later, ("atlas", "nova")))
        assert ix.state.get_cursor("atlas") == ix.state.get_cursor("nova") == _ledger_head(ledger_path)
    finally:
        ix.close()


def _ledger_head(ledger_path) -> int:
    con = sqlite3.connect(ledger_path)
    try:
        return con.execute("SELECT max(id) FROM session_history").fetchone()[0]
    finally:
        con.close()


@pytest.mark.parametrize("broken, repair", [
    ("UPDATE turns SET started_at = 'abc' WHERE id = :turn", "UPDATE turns SET started_at = 1763000000000 WHERE id = :turn"),
    ("UPDATE messages SET sequence = 'first' WHERE turn_id = :turn AND role = 'user'",
     "UPDATE messages SET sequence = 0 WHERE turn_id = :turn AND role = 'user'"),
])
def test_a_bad_field_repaired_in_place_is_indexed_by_a_later_pass(broken, repair, writer, ledger_path,
                                                                   config_factory):
    bad = writer.turn("hurt", persona="atlas", user="the turn that breaks", assistant="ok")
    writer.turn("calm", persona="atlas", user="a calm turn", assistant="ok")

    def run(sql: str) -> None:
        con = sqlite3.connect(ledger_path)
        con.execute(sql, {"turn": bad})
        con.commit()
        con.close()

    run(broken)
    ix = _indexer(config_factory(sinks=("lancedb",)))
    try:
        sync_once(ix)
        assert [b["turn_id"] for b in ix.state.bad_list("atlas")] == [bad]
        run(repair)  # in place: no new history row, the session does not move
        ix.quiet.forget()  # as after the ledger files' settle time: the per-pass checks run in full
        sync_once(ix)
        assert ix.state.bad_list("atlas") == []
        assert ix.state.paths("atlas") == expected_paths(ledger_path, "atlas")
    finally:
        ix.close()


@pytest.mark.parametrize("whole_build", ["rebuild", "backfill"])
@pytest.mark.parametrize("broken", ["UPDATE threads SET ancestry = '[broken' WHERE turn_id = :head",
                                    "DELETE FROM threads WHERE turn_id = :head"])
def test_a_whole_build_keeps_the_indexed_turns_of_a_session_whose_new_head_cannot_be_read(
        whole_build, broken, writer, ledger_path, config_factory):
    """A backfill or a forced rebuild builds every session from its head. One whose new head row is
    broken cannot be walked: its turns indexed before are built from their own rows and kept (they
    were deleted as stale), the head is a bad row, and once mended the head is indexed too."""

    older = [writer.turn("flaky", user=f"flaky question {i}", assistant=f"flaky answer {i}") for i in range(3)]
    writer.turn("calm", user="a calm turn", assistant="ok")
    ix = _indexer(config_factory(sinks=("lancedb", "qmd")))
    try:
        sync_once(ix)
        before = {p for p in ix.state.paths("atlas") if "/flaky/" in p}
        assert {p.rsplit("/", 1)[-1][:-3] for p in before} == set(older)
        head = writer.turn("flaky", user="the new question", assistant="the new answer")
        original = sqlite3.connect(ledger_path).execute(
            "SELECT ancestry FROM threads WHERE turn_id = ?", (head,)).fetchone()[0]
        con = sqlite3.connect(ledger_path)
        con.execute(broken, {"head": head})
        con.commit()
        con.close()
        if whole_build == "rebuild":
            summary = sync_once(ix, force=True).personas["atlas"]
        else:  # what a renumbered `messages` table schedules
            ix.state.set_backfill_due("atlas", "messages_renumbered")
            summary = sync_once(ix).personas["atlas"]
        assert summary.mode == whole_build
        for sink in ix.sinks:
            assert {p for p in sink.paths("atlas") if "/flaky/" in p} == before, sink.name
        assert {p for p in ix.state.paths("atlas") if "/flaky/" in p} == before
        assert [(b["session"], b["turn_id"]) for b in ix.state.bad_list("atlas")] == [("flaky", head)]
        con = sqlite3.connect(ledger_path)  # mended in place
        if broken.startswith("DELETE"):
            con.execute("INSERT INTO threads(turn_id, ancestry, depth, persona_id, thread_key) VALUES(?,?,?,?,?)",
                        (head, original, 4, "atlas", head))
        else:
            con.execute("UPDATE threads SET ancestry = ? WHERE turn_id = ?", (original, head))
        con.commit()
        con.close()
        ix.quiet.forget()
        sync_once(ix)
        assert {p.rsplit("/", 1)[-1][:-3] for p in ix.state.paths("atlas") if "/flaky/" in p} == {*older, head}
        assert ix.state.bad_list("atlas") == []
    finally:
        ix.close()


def test_a_head_whose_ancestry_is_null_is_read_from_its_turns_parents(writer, ledger_path, config_factory):
    """``threads.ancestry`` may be NULL (a runtime that fills it in a second write). Read as a
    one-turn history it looked rewound to its head: the tail deleted every earlier document of the
    session, and filling the ancestry in later brought none back. The parents give the history."""
    older = [writer.turn("main", user=f"decision {i}: use postgres", assistant=f"ok {i}") for i in range(3)]
    ix = _indexer(config_factory(sinks=("lancedb", "qmd")))
    try:
        sync_once(ix)
        head = writer.turn("main", user="the new question", assistant="the new answer")
        writer.execute("UPDATE threads SET ancestry = NULL WHERE turn_id = ?", (head,))
        summary = sync_once(ix).personas["atlas"]
        assert summary.documents_deleted == 0
        want = {*older, head}
        for sink in ix.sinks:
            assert {p.rsplit("/", 1)[-1][:-3] for p in sink.paths("atlas")} == want, sink.name
        assert ix.state.bad_list("atlas") == []
    finally:
        ix.close()


def _indexed_then_a_null_ancestry_with_a_broken_parent(writer, ix) -> tuple[list[str], str]:
    """Two turns indexed; then a head whose ancestry is NULL, and the oldest turn's parent a turn
    that does not exist. Returns (the two turns, the head)."""
    older = [writer.turn("main", user=f"decision {i}: use postgres", assistant=f"ok {i}") for i in range(2)]
    sync_once(ix)
    head = writer.turn("main", user="the new question", assistant="the new answer")
    writer.execute("UPDATE threads SET ancestry = NULL WHERE turn_id = ?", (head,))
    writer.execute("UPDATE turns SET parent_turn_id = 'no-such-turn' WHERE id = ?", (older[0],))
    return older, head


def test_a_null_ancestry_whose_parents_lead_nowhere_is_a_bad_row_and_the_session_keeps_its_documents(
        writer, ledger_path, config_factory):
    ix = _indexer(config_factory(sinks=("lancedb",)))
    try:
        older, head = _indexed_then_a_null_ancestry_with_a_broken_parent(writer, ix)
        summary = sync_once(ix).personas["atlas"]
        assert summary.documents_deleted == 0
        assert {p.rsplit("/", 1)[-1][:-3] for p in ix.state.paths("atlas")} == set(older)
        bad = ix.state.bad_list("atlas")
        assert [(b["session"], b["turn_id"], b["reason"]) for b in bad] == [("main", head, "bad_ancestry")]
        assert bad[0]["detail"] == "threads.ancestry is NULL and the turns' parents do not lead to a root"
    finally:
        ix.close()


def test_parent_chain_reads_root_first_and_refuses_cycles(writer, ledger_path):
    from ledger.reader import LedgerReader

    ids = [writer.turn("main", user=f"q{i}", assistant=f"a{i}") for i in range(3)]
    reader = LedgerReader.open(ledger_path)
    try:
        assert reader.parent_chain(ids[2]) == ids
        assert reader.parent_chain(ids[0]) == ids[:1]
        assert reader.parent_chain("no-such-turn") is None
        writer.execute("UPDATE turns SET parent_turn_id = ? WHERE id = ?", (ids[2], ids[0]))  # a cycle
        assert reader.parent_chain(ids[2]) is None
        assert len(reader._chain_rows(ids[2])) == 3  # each turn read once, not walked to the limit
    finally:
        reader.close()


def test_a_null_ancestry_bad_for_a_broken_parent_is_indexed_once_the_parent_is_mended(writer, ledger_path,
                                                                                      config_factory):
    """The bad row is the head's, but what broke is an older turn's parent: mending that turn must
    change the head's fingerprint, or the head stays bad until a --retry-bad."""
    ix = _indexer(config_factory(sinks=("lancedb",)))
    try:
        older, head = _indexed_then_a_null_ancestry_with_a_broken_parent(writer, ix)
        sync_once(ix)
        assert [b["turn_id"] for b in ix.state.bad_list("atlas")] == [head]
        writer.execute("UPDATE turns SET parent_turn_id = NULL WHERE id = ?", (older[0],))  # mended
        ix.quiet.forget()  # as after the ledger files' settle time
        sync_once(ix)
        assert ix.state.bad_list("atlas") == []
        assert {p.rsplit("/", 1)[-1][:-3] for p in ix.state.paths("atlas")} == {*older, head}
    finally:
        ix.close()
