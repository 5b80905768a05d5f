"""Sync progress in documents: every persona is counted before any work, the count ends at
its total, and the CLI bar shows that total from its first frame (issue 12)."""

from __future__ import annotations

import io
import re

import pytest
from structlog.testing import capture_logs

from exporters.qmd import QmdExporter
from indexer.cli.progress_bar import ProgressBar
from indexer.sync.context import Indexer
from indexer.sync.engine import sync_once
from indexer.sync.progress import PersonaProgress, ProgressTotals


class Recorder(ProgressTotals):
    """Keeps every call in order, and what the sinks held when it came."""

    def __init__(self, ix):
        super().__init__()
        self.events: list[tuple] = []
        self.ix = ix

    def planned(self, documents):
        written = sum(len(s.paths(p)) for s in self.ix.sinks for p in ("atlas", "nova"))
        self.events.append(("planned", dict(documents), written))
        super().planned(documents)

    def advanced(self, persona, documents):
        self.events.append(("advanced", persona, documents))
        super().advanced(persona, documents)

    def finished(self, persona):
        self.events.append(("finished", persona))
        super().finished(persona)


@pytest.fixture
def ix(config_factory, tmp_path):
    made = Indexer(config_factory(), sinks=[QmdExporter(tmp_path / "export")])
    yield made
    made.close()


def _ledger(writer) -> dict[str, int]:
    """atlas: `main` 5 turns + a compaction + a streaming turn (7 in its ancestry); `alt`
    forked from main's 3rd turn + 2 own turns (5: forked turns are documents of both sessions);
    `gone` deleted (not counted). nova: 4 turns. Returns the turns each persona's sessions hold."""
    ids = [writer.turn("main", user=f"question {i} about the JWT expiry", assistant=f"answer {i}") for i in range(5)]
    writer.compaction("main", "Summary: we chose 15 minute access tokens.")
    writer.turn("main", user="still typing", status="streaming")
    writer.fork("alt", ids[2])
    for i in range(2):
        writer.turn("alt", user=f"alt question {i}", assistant=f"alt answer {i}")
    writer.turn("gone", user="deleted later", assistant="bye")
    writer.turn("gone", user="deleted later 2", assistant="bye 2")
    writer.set_session_status("gone", "deleted")
    for i in range(4):
        writer.turn("n1", persona="nova", user=f"nova {i}", assistant=f"reply {i}")
    return {"atlas": 7 + 5, "nova": 4}


def test_a_backfill_counts_every_persona_first_and_ends_at_its_total(writer, ix):
    expected = _ledger(writer)
    rec = Recorder(ix)
    summary = sync_once(ix, progress=rec)
    # every persona planned, once, before the first document was considered or written
    assert rec.events[0] == ("planned", expected, 0)
    assert [e for e in rec.events if e[0] == "planned"] == [rec.events[0]]
    assert rec.snapshot() == {p: PersonaProgress(n, n) for p, n in expected.items()}
    assert [e for e in rec.events if e[0] == "finished"] == [("finished", "atlas"), ("finished", "nova")]
    # the plan was the truth, not a figure corrected at the end: done reached it before `finished`
    before_finish = [i for i, e in enumerate(rec.events) if e[0] == "finished"][0]
    assert sum(e[2] for e in rec.events[:before_finish] if e[0] == "advanced" and e[1] == "atlas") == 12
    # 12 considered for atlas: 11 documents written, the streaming turn left pending
    assert summary.personas["atlas"].documents_written == 11
    assert summary.personas["atlas"].pending_turns == 1
    assert summary.personas["nova"].documents_written == 4


def test_a_tail_counts_only_the_turns_not_indexed_yet(writer, ix):
    _ledger(writer)
    sync_once(ix)
    writer.turn("main", user="new one", assistant="new answer")
    writer.turn("main", user="new two", assistant="new answer two")
    writer.turn("fresh", user="a new session", assistant="welcome")
    rec = Recorder(ix)
    summary = sync_once(ix, progress=rec)
    assert summary.personas["atlas"].mode == "tail"
    # main: 3 new turns in its ancestry (2 completed + the still-streaming one, built again), fresh: 1
    assert [e[1] for e in rec.events if e[0] == "planned"][0] == {"atlas": 4, "nova": 0}
    assert rec.snapshot() == {"atlas": PersonaProgress(4, 4), "nova": PersonaProgress(0, 0)}
    assert summary.personas["atlas"].documents_written == 3


def test_a_pass_with_nothing_new_plans_nothing(writer, ix):
    _ledger(writer)
    sync_once(ix)
    rec = Recorder(ix)
    sync_once(ix, progress=rec)
    assert rec.snapshot() == {"atlas": PersonaProgress(0, 0), "nova": PersonaProgress(0, 0)}
    assert [e for e in rec.events if e[0] == "advanced" and e[2]] == []


def test_a_forced_reindex_counts_every_turn_again(writer, ix):
    expected = _ledger(writer)
    sync_once(ix)
    rec = Recorder(ix)
    summary = sync_once(ix, force=True, progress=rec)
    assert {p: s.mode for p, s in summary.personas.items()} == {"atlas": "rebuild", "nova": "rebuild"}
    assert [e[1] for e in rec.events if e[0] == "planned"][0] == expected
    assert rec.snapshot() == {p: PersonaProgress(n, n) for p, n in expected.items()}


def test_a_broken_ancestry_counts_zero_like_the_sync_that_skips_it(writer, ix):
    _ledger(writer)
    writer.turn("broken", user="x", assistant="y")
    writer.execute("UPDATE threads SET ancestry = '{not json' WHERE turn_id = "
                   "(SELECT thread_id FROM sessions WHERE label = 'broken')")
    rec = Recorder(ix)
    sync_once(ix, progress=rec)
    assert [e[1] for e in rec.events if e[0] == "planned"][0]["atlas"] == 12


def test_the_totals_never_show_more_done_than_planned():
    totals = ProgressTotals()
    totals.planned({"a": 2})
    totals.advanced("a", 3)  # a session grew while the pass ran
    assert totals.snapshot() == {"a": PersonaProgress(3, 3)}
    totals.planned({"b": 5})
    totals.advanced("b", 1)
    totals.finished("b")  # the rest were gone by the time they were read
    assert (totals.done, totals.total) == (4, 4)
    assert PersonaProgress(0, 0).fraction == 1.0 and PersonaProgress(1, 4).fraction == 0.25


def _frames(out: str) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in re.findall(r"(\d+)/(\d+) \[", out)]


def test_the_cli_bar_shows_the_whole_total_from_its_first_frame(writer, ix):
    _ledger(writer)
    out = io.StringIO()
    bar = ProgressBar("sync", file=out, tty=True)
    sync_once(ix, progress=bar)
    bar.close()
    frames = _frames(out.getvalue())
    assert frames[0] == (0, 16)  # both personas counted before the first document
    assert frames[-1] == (16, 16)
    assert all(total == 16 and done <= total for done, total in frames)
    assert [d for d, _ in frames] == sorted(d for d, _ in frames)
    assert "doc/s" in out.getvalue() or "s/doc" in out.getvalue()  # a rate in documents, not sessions


def test_without_a_terminal_the_counts_are_logged_as_events(writer, ix):
    _ledger(writer)
    out = io.StringIO()
    bar = ProgressBar("sync", file=out, tty=False, log_every_s=0)
    with capture_logs() as logs:
        sync_once(ix, progress=bar)
    bar.close()
    events = [e for e in logs if e["event"] == "sync.progress"]
    assert out.getvalue() == ""  # no bar drawn into a pipe
    assert events and all(e["documents_total"] == 16 for e in events)
    assert events[-1]["documents_done"] == 16 and events[-1]["eta_seconds"] == 0
