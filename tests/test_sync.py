"""sync_once() against real WAL ledgers, with the real QMD file sink."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from exporters.base import SinkError
from exporters.qmd import QmdExporter
from indexer.core.safe_names import safe_segment
from indexer.sync.context import Indexer
from indexer.sync.engine import sync_once
from indexer.sync.progress import ProgressTotals
from ledger.writer import ToolUse

ROOT = Path(__file__).resolve().parents[1]


def expected_paths(ledger: Path, persona: str) -> set[str]:
    """An independent oracle: the document set the ledger implies, by plain SQL."""
    con = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)
    out = set()
    for label, head in con.execute(
        "SELECT label, thread_id FROM sessions WHERE persona_id=? AND status != 'deleted'", (persona,)
    ):
        row = con.execute("SELECT ancestry FROM threads WHERE turn_id=?", (head,)).fetchone()
        try:
            ancestry = json.loads(row[0]) if row else []
        except json.JSONDecodeError:
            continue
        if not isinstance(ancestry, list):
            continue
        for tid in ancestry:
            turn = con.execute("SELECT turn_type, status FROM turns WHERE id=?", (tid,)).fetchone()
            if not turn or turn[1] not in ("completed", "failed"):
                continue
            if turn[0] == "compaction":
                ok = con.execute("SELECT 1 FROM compactions WHERE turn_id=? AND length(summary) > 0", (tid,)).fetchone()
                folder = "compactions"
            else:
                ok = con.execute(
                    "SELECT 1 FROM messages WHERE turn_id=? AND role IN ('user','assistant') "
                    "AND content IS NOT NULL AND length(trim(content)) > 0", (tid,)
                ).fetchone()
                folder = "turns"
            if ok:
                out.add(f"sessions/{safe_segment(label)}/{folder}/{tid}.md")
    con.close()
    return out


class FailingSink(QmdExporter):
    """A real sink that fails after accepting ``fail_after`` documents."""

    def __init__(self, export_dir: Path, fail_after: int):
        super().__init__(export_dir)
        self.fail_after = fail_after
        self.accepted = 0

    def upsert(self, persona, docs):
        room = max(0, self.fail_after - self.accepted)
        super().upsert(persona, list(docs)[:room])
        self.accepted += min(room, len(docs))
        if len(docs) > room:
            raise SinkError("disk full (simulated)")


def identity(text: str) -> str:
    return text


@pytest.fixture
def make_indexer(config_factory, tmp_path):
    made = []

    try:
        import redaction  # noqa: F401
        from redaction import Redactor  # noqa: F401
        default_redact = None  # the real redactor
    except ImportError:  # pragma: no cover - only while the package is being written
        default_redact = identity

    def factory(*, sinks=None, redact=None, **cfg):
        redact = redact or default_redact
        config = config_factory(**cfg)
        sink_list = sinks if sinks is not None else [QmdExporter(tmp_path / "export")]
        kwargs = {"redact": redact, "redaction_version": "test"} if redact else {}
        ix = Indexer(config, sinks=sink_list, **kwargs)
        made.append(ix)
        return ix

    yield factory
    for ix in made:
        ix.close()


def test_turn_documents_follow_the_content_contract(writer, make_indexer, tmp_path):
    writer.turn("main", user="What JWT expiry did we pick?", assistant="15 minutes for access tokens.",
                system="SYSTEM PROMPT SECRET", thinking="THINKING TEXT",
                tools=[ToolUse("bash", {"cmd": "TOOLPARAM"}, "TOOLRESULT")])
    ix = make_indexer()
    summary = sync_once(ix)
    assert summary.documents_written == 1
    sink = ix.sinks[0]
    (path,) = sink.paths("atlas")
    assert path.startswith("sessions/main/turns/") and path.endswith(".md")
    text = sink.read("atlas", path)
    header, body = text.split("\n\n", 1)
    assert header.startswith("Session: main\nTurn: ")
    assert "Time: 2025-" in header and "Model: claude-sonnet-4" in header
    assert body == "User: What JWT expiry did we pick?\n\nAssistant: 15 minutes for access tokens."
    for hidden in ("SYSTEM PROMPT", "THINKING", "TOOLPARAM", "TOOLRESULT"):
        assert hidden not in text


def test_second_sync_with_nothing_new_writes_nothing(writer, make_indexer):
    for i in range(5):
        writer.turn(f"s{i % 2}", user=f"question {i}", assistant=f"answer {i}")
    ix = make_indexer()
    first = sync_once(ix)
    assert first.documents_written == 5
    second = sync_once(ix)
    assert second.documents_written == 0 and second.total("documents_deleted") == 0
    assert second.personas["atlas"].mode == "tail"


def test_forks_give_one_document_per_session(writer, make_indexer, ledger_path):
    t1 = writer.turn("main", user="root question", assistant="root answer")
    writer.turn("main", user="second", assistant="two")
    writer.fork("main/fork", t1)
    writer.turn("main/fork", user="fork question", assistant="fork answer")
    ix = make_indexer()
    sync_once(ix)
    paths = ix.sinks[0].paths("atlas")
    assert paths == expected_paths(ledger_path, "atlas")
    assert f"sessions/{safe_segment('main/fork')}/turns/{t1}.md" in paths
    assert f"sessions/main/turns/{t1}.md" in paths
    assert len(paths) == 4


def test_compaction_documents(writer, make_indexer):
    writer.turn("main", user="hello", assistant="hi")
    cid = writer.compaction("main", "We decided on 15-minute JWTs.")
    ix = make_indexer()
    sync_once(ix)
    text = ix.sinks[0].read("atlas", f"sessions/main/compactions/{cid}.md")
    assert text is not None and "Kind: compaction" in text and text.endswith("Summary: We decided on 15-minute JWTs.")


def test_pending_turn_is_indexed_when_it_completes(writer, make_indexer):
    writer.turn("main", user="one", assistant="1")
    tid = writer.turn("main", user="two", status="streaming")
    ix = make_indexer()
    s1 = sync_once(ix)
    assert s1.documents_written == 1 and s1.personas["atlas"].pending_turns == 1
    writer.complete(tid, assistant="2")  # no session_history row
    s2 = sync_once(ix)
    assert s2.documents_written == 1
    assert f"sessions/main/turns/{tid}.md" in ix.sinks[0].paths("atlas")
    assert s2.personas["atlas"].pending_turns == 0


def test_deleted_sessions_are_purged_and_recorded(writer, make_indexer):
    writer.turn("keep", user="keep me", assistant="ok")
    writer.turn("gone", user="delete me", assistant="ok")
    ix = make_indexer()
    sync_once(ix)
    writer.set_session_status("gone", "deleted")
    summary = sync_once(ix)
    assert summary.total("documents_deleted") == 1
    assert all("gone" not in p for p in ix.sinks[0].paths("atlas"))
    assert ix.state.session("gone").ledger_status == "deleted"
    assert ix.state.paths("atlas", session="gone") == set()


def test_rewound_session_drops_documents_that_left_its_history(writer, make_indexer, ledger_path):
    t1 = writer.turn("main", user="a", assistant="a")
    writer.turn("main", user="b", assistant="b")
    ix = make_indexer()
    sync_once(ix)
    writer.fork("main", t1)  # the runtime moved main back to t1 (an edit/rewind)
    writer.turn("main", user="c", assistant="c")
    sync_once(ix)
    assert ix.sinks[0].paths("atlas") == expected_paths(ledger_path, "atlas")


def test_sink_failure_mid_batch_leaves_state_unchanged_and_next_sync_converges(writer, make_indexer, tmp_path,
                                                                              ledger_path):
    for i in range(6):
        writer.turn(f"s{i % 3}", user=f"q{i}", assistant=f"a{i}")
    ix = make_indexer()
    sync_once(ix)
    cursor = ix.state.get_cursor("atlas")
    hashes = dict(ix.state.File.select(ix.state.File.path, ix.state.File.content_hash).tuples())
    for i in range(6, 12):
        writer.turn(f"s{i % 3}", user=f"q{i}", assistant=f"a{i}")
    failing = FailingSink(tmp_path / "export", fail_after=2)
    ix.sinks[0] = failing
    with pytest.raises(SinkError):
        sync_once(ix)
    assert ix.state.get_cursor("atlas") == cursor
    assert dict(ix.state.File.select(ix.state.File.path, ix.state.File.content_hash).tuples()) == hashes
    ix.sinks[0] = QmdExporter(tmp_path / "export")
    summary = sync_once(ix)
    assert summary.documents_written == 6
    assert ix.sinks[0].paths("atlas") == expected_paths(ledger_path, "atlas")
    assert ix.state.paths("atlas") == expected_paths(ledger_path, "atlas")


def test_bad_rows_are_skipped_and_counted(writer, make_indexer, ledger_path):
    good = writer.turn("good", user="fine", assistant="fine")
    writer.turn("badjson", user="x", assistant="y")
    writer.execute("UPDATE threads SET ancestry='[not json' WHERE turn_id=(SELECT thread_id FROM sessions WHERE label='badjson')")
    t = writer.turn("dangling", user="real", assistant="real")
    writer.execute("UPDATE threads SET ancestry=? WHERE turn_id=?", (json.dumps(["NO_SUCH_TURN", t]), t))
    writer.turn("nulls", user=None, assistant=None)
    writer.turn("nulls", user="after null", assistant="ok")
    writer.turn("huge", user="x" * 5_000_000, assistant="too big")
    writer.turn("huge", user="small one", assistant="ok")
    ix = make_indexer()
    summary = sync_once(ix)
    ps = summary.personas["atlas"]
    assert ps.documents_skipped_bad == 2  # bad ancestry, dangling turn (the 5 MB message is truncated, not bad)
    paths = ix.sinks[0].paths("atlas")
    assert f"sessions/good/turns/{good}.md" in paths
    assert f"sessions/dangling/turns/{t}.md" in paths
    assert paths == expected_paths(ledger_path, "atlas")
    assert len([p for p in paths if p.startswith("sessions/huge/")]) == 2
    assert ix.state.bad_count("atlas") == 2
    again = sync_once(ix)  # a bad row is counted once, not on every pass
    assert again.personas["atlas"].documents_skipped_bad == 0


def test_invalid_utf8_is_decoded_leniently(writer, make_indexer):
    tid = writer.turn("main", user="placeholder", assistant="ok")
    writer.execute("UPDATE messages SET content=CAST(X'48656c6c6fff' AS TEXT) WHERE turn_id=? AND role='user'", (tid,))
    ix = make_indexer()
    sync_once(ix)
    assert "User: Hello\ufffd" in ix.sinks[0].read("atlas", f"sessions/main/turns/{tid}.md")


def test_personas_are_selected_from_config_or_ledger(writer, make_indexer):
    writer.turn("a", persona="atlas", user="x", assistant="y")
    writer.turn("n", persona="nova", user="x", assistant="y")
    ix = make_indexer()
    assert set(sync_once(ix).personas) == {"atlas", "nova"}
    only = make_indexer(ledger={"personas": ["nova"]})
    assert set(sync_once(only).personas) == {"nova"}


def test_hostile_labels_stay_inside_the_export(writer, make_indexer, tmp_path):
    labels = ["../../etc/passwd", "a/b", "a_b", "", "x" * 300, "ünï©ødé 🚀", "nul\x00byte", ".", ".."]
    for label in labels:
        writer.turn(label, user=f"hello from {label!r}", assistant="ok")
    ix = make_indexer()
    sync_once(ix)
    export = (tmp_path / "export").resolve()
    files = [p for p in export.rglob("*.md")]
    assert len(files) == len(labels)
    assert all(export in p.resolve().parents for p in files)
    assert len({p.parent.parent.name for p in files}) == len(labels)  # a/b and a_b differ


def test_cursor_is_stored_per_persona(writer, make_indexer):
    writer.turn("a", persona="atlas", user="x", assistant="y")
    writer.turn("n", persona="nova", user="x", assistant="y")
    ix = make_indexer()
    sync_once(ix)
    P = ix.state.PersonaState
    rows = dict(P.select(P.persona, P.cursor).tuples())
    assert rows == {"atlas": 2, "nova": 2}


def replace_ledger(writer, ledger_path: Path, *, turns: int, seed: int) -> None:
    """The runtime's ledger file is replaced by another one with ``turns`` turns."""
    from ledger.writer import LedgerWriter

    writer.close()
    for suffix in ("", "-wal", "-shm"):
        Path(str(ledger_path) + suffix).unlink(missing_ok=True)
    with LedgerWriter(ledger_path, seed=seed, start_ms=1_700_000_000_000) as w2:
        for i in range(turns):
            w2.turn("other", user=f"new history {i}", assistant="ok")


@pytest.mark.parametrize("new_turns", [1, 8], ids=["shrunk-below-cursor", "longer-history"])
def test_a_replaced_ledger_triggers_backfill(writer, make_indexer, ledger_path, new_turns):
    for i in range(4):
        writer.turn("main", user=f"q{i}", assistant=f"a{i}")
    ix = make_indexer()
    sync_once(ix)
    replace_ledger(writer, ledger_path, turns=new_turns, seed=9)  # 8 turns: the head passes the old cursor
    summary = sync_once(ix)
    assert summary.personas["atlas"].mode == "backfill"
    assert ix.sinks[0].paths("atlas") == expected_paths(ledger_path, "atlas")


def test_force_rebuild_reproduces_the_same_set(writer, make_indexer, ledger_path):
    for i in range(5):
        writer.turn(f"s{i % 2}", user=f"q{i}", assistant=f"a{i}")
    ix = make_indexer()
    sync_once(ix)
    summary = sync_once(ix, force=True)
    assert summary.personas["atlas"].mode == "rebuild"
    assert ix.sinks[0].paths("atlas") == expected_paths(ledger_path, "atlas")
    assert ix.state.paths("atlas") == expected_paths(ledger_path, "atlas")


def test_tail_is_correct_against_a_concurrent_writer_process(writer, make_indexer, ledger_path):
    writer.turn("seed", user="seed", assistant="seed")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger.writer", "append", str(ledger_path), "--turns", "150", "--sessions", "7",
         "--delay", "0.02", "--fork-every", "25"],  # ≥ 3 s of writing: several passes overlap it on a loaded box
        cwd=ROOT, stdout=subprocess.DEVNULL,
    )
    ix = make_indexer()
    written = []  # documents written by each pass made while the writer process was still appending
    while proc.poll() is None:
        written.append(sync_once(ix).documents_written)
    assert proc.returncode == 0
    sync_once(ix)
    assert sum(1 for n in written if n) >= 2, written  # several passes really overlapped the writes
    assert ix.sinks[0].paths("atlas") == expected_paths(ledger_path, "atlas")
    assert ix.state.paths("atlas") == expected_paths(ledger_path, "atlas")
    assert sync_once(ix).documents_written == 0


def test_stop_event_interrupts_between_writes_and_next_pass_converges(writer, make_indexer, ledger_path):
    import threading

    for i in range(200):
        writer.turn(f"s{i % 3}", user=f"q{i}", assistant=f"a{i}")
    per_write = 32  # seven writes: the stop comes after the second
    ix = make_indexer(sync={"docs_per_write": per_write})
    stop = threading.Event()
    calls = []

    class StopAfterTwoWrites(ProgressTotals):
        def advanced(self, persona, documents):
            super().advanced(persona, documents)
            calls.append(documents)
            if len(calls) == 2:
                stop.set()

    summary = sync_once(ix, stop=stop, progress=StopAfterTwoWrites())
    assert summary.interrupted and summary.documents_written == 2 * per_write
    assert ix.state.get_cursor("atlas") is None  # a backfill sets its cursor only when complete
    sync_once(ix)
    assert ix.sinks[0].paths("atlas") == expected_paths(ledger_path, "atlas")


@pytest.mark.slow
def test_soak_tail_against_a_long_concurrent_writer(writer, make_indexer, ledger_path):
    """Opt-in (`make test-slow`): 3,000 turns with forks written while syncs run."""
    writer.turn("seed", user="seed", assistant="seed")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger.writer", "append", str(ledger_path), "--turns", "3000", "--sessions", "40",
         "--delay", "0.001", "--fork-every", "100"],
        cwd=ROOT, stdout=subprocess.DEVNULL,
    )
    ix = make_indexer()
    written = []
    while proc.poll() is None:
        written.append(sync_once(ix).documents_written)
    assert proc.returncode == 0
    sync_once(ix)
    assert sum(1 for n in written if n) >= 2, written  # several passes really overlapped the writes
    assert ix.sinks[0].paths("atlas") == expected_paths(ledger_path, "atlas")
    assert sync_once(ix).documents_written == 0


@pytest.mark.parametrize("lost", ["lancedb folder", "lancedb table", "qmd export"])
def test_a_sink_whose_stored_set_is_gone_is_rebuilt_from_the_ledger(lost, writer, make_indexer, ledger_path, tmp_path):
    import shutil

    from fake_embedder import FakeEmbedder

    from exporters.lancedb import LanceSink

    def sinks():
        return [LanceSink(tmp_path / "lance", FakeEmbedder()), QmdExporter(tmp_path / "export")]

    for i in range(4):
        writer.turn(f"s{i % 2}", user=f"the harbour crane {i}", assistant=f"noted {i}")
    ix = make_indexer(sinks=sinks())
    sync_once(ix)
    want = expected_paths(ledger_path, "atlas")
    assert [s.paths("atlas") for s in ix.sinks] == [want, want]
    ix.close()
    if lost == "lancedb folder":
        shutil.rmtree(tmp_path / "lance")
    elif lost == "lancedb table":
        [table] = [p for p in (tmp_path / "lance").iterdir() if p.name.endswith(".lance")]
        shutil.rmtree(table)
    else:
        shutil.rmtree(ix.sinks[1].persona_dir("atlas"))
    ix = make_indexer(sinks=sinks())
    summary = sync_once(ix)  # the cursor is at the head: without the check, a pass that writes nothing
    assert summary.personas["atlas"].mode == "rebuild"
    assert [s.paths("atlas") for s in ix.sinks] == [want, want]
    assert sync_once(ix).personas["atlas"].mode == "tail"  # and quiet again
