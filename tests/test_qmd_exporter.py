"""QMD sink: files on the real filesystem, searched with the real QMD CLI."""

from __future__ import annotations

import errno
import os
import tempfile
import time
from pathlib import Path

import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporters.base import Exporter, Rebuild, SinkError
from exporters.qmd import HEADER_LINES, QmdExporter, UpdateResult
from exporters.qmd import files as qmd_files
from exporters.qmd import rebuild as qmd_rebuild
from indexer.core.safe_names import safe_segment
from indexer.core.types import DocKind, Document, Source
from tests.builders import document

try:
    from tests.qmd_tool import QmdCli
except ImportError:  # tests/ on sys.path itself (rootdir-relative import mode)
    from qmd_tool import QmdCli  # type: ignore[no-redef]

PERSONA = "atlas"


def make_doc(
    label: str,
    turn: str,
    body: str,
    *,
    persona: str = PERSONA,
    kind: DocKind = DocKind.TURN,
    title: str | None = None,
    path: str | None = None,
) -> Document:
    return document(body, path=path, persona=persona, session=label, turn=turn, kind=kind, title=title)


def memory_doc(path: str, text: str, persona: str = PERSONA) -> Document:
    return document(text, path=path, persona=persona, session=None, turn=None, kind=DocKind.MEMORY,
                    source=Source.MEMORY, title=path.rsplit("/", 1)[-1])


class RecordingLogger:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict]] = []

    def _rec(self, level: str):
        return lambda event, **kw: self.events.append((level, event, kw))

    def __getattr__(self, level: str):
        return self._rec(level)

    def named(self, event: str) -> list[dict]:
        return [kw for _lvl, ev, kw in self.events if ev == event]


def all_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def dot_entries(root: Path) -> list[Path]:
    return [p for p in root.rglob(".*")]


# --------------------------------------------------------------------- layout


def test_satisfies_protocol_with_default_construction(tmp_path):
    exp = QmdExporter(tmp_path / "qmd")
    assert isinstance(exp, Exporter)
    assert exp.name == "qmd"
    assert isinstance(exp.rebuild(PERSONA), Rebuild)
    assert exp.paths(PERSONA) == set()
    assert exp.read(PERSONA, "sessions/x/turns/t1.md") is None
    exp.after_batch()  # no update command: nothing to run
    assert exp.last_update == UpdateResult(ok=True, skipped=True, reason="no_command")
    exp.close()


def test_layout_title_line_and_read_roundtrip(tmp_path):
    root = tmp_path / "qmd"
    exp = QmdExporter(root)
    turn = make_doc("dm:+1 555/123", "t1", "User: hi\n\nAssistant: hello", title="Deploy plan")
    comp = make_doc("dm:+1 555/123", "t2", "Summary: all good", kind=DocKind.COMPACTION)
    mem = memory_doc("memory/notes/today.md", "# Today\nremember the milk\n")
    exp.upsert(PERSONA, [turn, comp, mem])

    safe_label = safe_segment("dm:+1 555/123")
    assert safe_label != "dm:+1 555/123"
    f = root / PERSONA / "sessions" / safe_label / "turns" / "t1.md"
    assert f.read_text() == "# Deploy plan\n\n" + turn.text
    assert f.read_text().split("\n")[HEADER_LINES:] == turn.lines
    assert (root / PERSONA / "sessions" / safe_label / "compactions" / "t2.md").is_file()
    assert (root / PERSONA / "memory" / "notes" / "today.md").is_file()

    assert exp.paths(PERSONA) == {turn.path, comp.path, mem.path}
    for d in (turn, comp, mem):
        assert exp.read(PERSONA, d.path) == d.text


def test_persona_folder_is_made_safe(tmp_path):
    root = tmp_path / "qmd"
    exp = QmdExporter(root)
    persona = "../evil persona"
    exp.upsert(persona, [make_doc("s", "t1", "x", persona=persona)])
    (folder,) = [p for p in root.iterdir()]
    assert folder.name == safe_segment(persona)
    assert folder.parent == root
    assert exp.paths(persona) == {"sessions/s/turns/t1.md"}
    assert exp.paths("other") == set()


def test_title_is_one_line_and_never_empty(tmp_path):
    root = tmp_path / "qmd"
    exp = QmdExporter(root)
    a = make_doc("s", "t1", "body", title="line one\nline two\r\n  three")
    b = make_doc("s", "t2", "body", title="   ")
    exp.upsert(PERSONA, [a, b])
    assert (root / PERSONA / a.path).read_text().split("\n")[0] == "# line one line two three"
    assert (root / PERSONA / b.path).read_text().split("\n")[0] == "# t2"
    assert exp.read(PERSONA, a.path) == a.text
    assert exp.read(PERSONA, b.path) == b.text


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(title=st.text(max_size=40), text=st.text(max_size=300))
def test_read_returns_exactly_the_text(title, text):
    with tempfile.TemporaryDirectory() as d:
        exp = QmdExporter(Path(d) / "qmd")
        doc = Document(
            path="sessions/s/turns/t1.md", source=Source.SESSIONS, persona=PERSONA, session="s",
            turn_id="t1", kind=DocKind.TURN, title=title, text=text, body=text, content_hash="h",
        )
        exp.upsert(PERSONA, [doc])
        assert exp.read(PERSONA, doc.path) == text


# ------------------------------------------------------------- atomic writes


def test_atomic_write_leaves_no_temp_files_and_skips_identical_bytes(tmp_path):
    root = tmp_path / "qmd"
    exp = QmdExporter(root)
    docs = [make_doc("s", f"t{i}", f"body {i}") for i in range(5)]
    exp.upsert(PERSONA, docs)
    assert dot_entries(root) == []

    target = root / PERSONA / docs[0].path
    old = time.time() - 3600
    os.utime(target, (old, old))
    ino = target.stat().st_ino
    exp.upsert(PERSONA, docs)  # same bytes: not rewritten
    assert target.stat().st_mtime == old
    assert target.stat().st_ino == ino

    changed = make_doc("s", "t0", "body 0 changed")
    exp.upsert(PERSONA, [changed])
    assert target.stat().st_mtime > old
    assert target.stat().st_ino != ino  # replaced, not written in place
    assert exp.read(PERSONA, changed.path) == changed.text
    assert dot_entries(root) == []


def test_upsert_is_idempotent_and_shrinking_leaves_nothing_stale(tmp_path):
    root = tmp_path / "qmd"
    exp = QmdExporter(root)
    big = make_doc("s", "t1", "word " * 500)
    exp.upsert(PERSONA, [big, big])
    exp.upsert(PERSONA, [big])
    small = make_doc("s", "t1", "tiny")
    exp.upsert(PERSONA, [small])
    assert exp.paths(PERSONA) == {small.path}
    assert exp.read(PERSONA, small.path) == small.text
    assert len(all_files(root)) == 1


@pytest.mark.parametrize("code,needle", [
    (errno.ENOSPC, "disk \\(or quota\\) is full"),
    (errno.EACCES, "permission denied"),
    (errno.EROFS, "read-only"),
])
def test_write_errors_raise_sink_error_and_clean_up(tmp_path, monkeypatch, code, needle):
    root = tmp_path / "qmd"
    exp = QmdExporter(root)
    exp.upsert(PERSONA, [make_doc("s", "t1", "old")])

    def failing_write(fd, data):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(qmd_files.os, "write", failing_write)
    with pytest.raises(SinkError, match=needle) as info:
        exp.upsert(PERSONA, [make_doc("s", "t1", "new")])
    assert str(root / PERSONA / "sessions/s/turns/t1.md") in str(info.value)
    monkeypatch.undo()
    assert exp.read(PERSONA, "sessions/s/turns/t1.md") == make_doc("s", "t1", "old").text
    assert dot_entries(root) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_real_permission_denied(tmp_path):
    root = tmp_path / "qmd"
    exp = QmdExporter(root)
    exp.upsert(PERSONA, [make_doc("s", "t1", "old")])
    folder = root / PERSONA / "sessions" / "s" / "turns"
    folder.chmod(0o500)
    try:
        with pytest.raises(SinkError, match="permission denied"):
            exp.upsert(PERSONA, [make_doc("s", "t1", "new")])
    finally:
        folder.chmod(0o700)


# ------------------------------------------------------------- path safety


@pytest.mark.parametrize("bad", [
    "../escape.md",
    "sessions/../../escape.md",
    "/etc/escape.md",
    "sessions//turns/t.md",
    "sessions/./turns/t.md",
    "sessions/a b/turns/t.md",
    "sessions/a\\..\\b/turns/t.md",
    "sessions/.hidden/turns/t.md",
    "sessions/s/turns/.t1.md",
    "sessions/s/turns/t1.txt",
    "sessions/s/turns/t1.md/",
    "",
])
def test_unsafe_document_paths_are_rejected(tmp_path, bad):
    root = tmp_path / "export" / "qmd"
    exp = QmdExporter(root)
    with pytest.raises(SinkError, match="refusing document path"):
        exp.upsert(PERSONA, [make_doc("s", "t1", "x", path=bad)])
    assert all_files(tmp_path) == []
    assert exp.read(PERSONA, bad) is None
    exp.delete(PERSONA, [bad])  # ignored, never raises


def test_symlink_escaping_the_export_folder_is_rejected(tmp_path):
    root = tmp_path / "qmd"
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / PERSONA).mkdir(parents=True)
    (root / PERSONA / "sessions").symlink_to(outside, target_is_directory=True)
    exp = QmdExporter(root)
    with pytest.raises(SinkError, match="outside the export folder"):
        exp.upsert(PERSONA, [make_doc("s", "t1", "x")])
    assert list(outside.iterdir()) == []


def test_documents_of_another_persona_are_refused(tmp_path):
    exp = QmdExporter(tmp_path / "qmd")
    with pytest.raises(SinkError, match="belongs to persona"):
        exp.upsert(PERSONA, [make_doc("s", "t1", "x", persona="someone-else")])
    assert all_files(tmp_path) == []


def test_safe_labels_never_land_in_folders_qmd_ignores(tmp_path):
    assert safe_segment("build") != "build" and safe_segment("node_modules") != "node_modules"


def test_folders_qmd_never_indexes_are_logged(tmp_path):
    # safe_segment() never yields such a folder; this guards paths built any other way.
    log = RecordingLogger()
    exp = QmdExporter(tmp_path / "qmd", logger=log)
    raw = "sessions/build/turns/t1.md"
    exp.upsert(PERSONA, [make_doc("build", "t1", "x", path=raw), make_doc("ok", "t1", "y")])
    exp.upsert(PERSONA, [make_doc("build", "t1", "x2", path=raw)])
    (warn,) = log.named("qmd.path_hidden_from_qmd")
    assert warn["path"] == f"{PERSONA}/sessions/build/turns/t1.md"


# --------------------------------------------------------- delete and paths


def test_delete_removes_files_and_prunes_empty_folders_but_the_personas(tmp_path):
    root = tmp_path / "qmd"
    exp = QmdExporter(root)
    a1, a2, b1 = make_doc("a", "t1", "x"), make_doc("a", "t2", "x"), make_doc("b", "t1", "x")
    exp.upsert(PERSONA, [a1, a2, b1])
    exp.delete(PERSONA, [a1.path, "sessions/zzz/turns/nope.md"])
    assert exp.paths(PERSONA) == {a2.path, b1.path}
    exp.delete(PERSONA, [a2.path])
    assert not (root / PERSONA / "sessions" / "a").exists()
    assert (root / PERSONA / "sessions" / "b" / "turns").is_dir()
    exp.delete(PERSONA, [b1.path, b1.path])
    assert exp.paths(PERSONA) == set()
    assert sorted(p.name for p in (root / PERSONA).iterdir()) == []  # an empty set, still held
    assert exp.missing(PERSONA) is None
    assert root.is_dir()  # the export folder itself is never removed


def test_paths_ignores_dot_files_and_non_markdown(tmp_path):
    root = tmp_path / "qmd"
    exp = QmdExporter(root)
    doc = make_doc("s", "t1", "x")
    exp.upsert(PERSONA, [doc])
    turns = root / PERSONA / "sessions" / "s" / "turns"
    (turns / ".t2.md.0123456789ab.tmp").write_text("crash leftover")
    (turns / ".hidden.md").write_text("x")
    (turns / "notes.txt").write_text("x")
    (root / PERSONA / ".qmd").mkdir()
    (root / PERSONA / ".qmd" / "x.md").write_text("x")
    assert exp.paths(PERSONA) == {doc.path}


# ---------------------------------------------------------------- rebuild


def test_rebuild_is_invisible_until_commit_then_replaces_the_set(tmp_path):
    root = tmp_path / "qmd"
    exp = QmdExporter(root)
    keep, stale = make_doc("s", "t1", "old keep"), make_doc("gone", "t1", "stale")
    mem = memory_doc("MEMORY.md", "facts")
    exp.upsert(PERSONA, [keep, stale, mem])
    exp.upsert("other", [make_doc("s", "t1", "other persona", persona="other")])

    rb = exp.rebuild(PERSONA)
    new_keep, fresh = make_doc("s", "t1", "new keep"), make_doc("s", "t9", "fresh")
    rb.upsert([new_keep])
    rb.upsert([fresh, mem])
    # Readers still see the old live set.
    assert exp.paths(PERSONA) == {keep.path, stale.path, mem.path}
    assert exp.read(PERSONA, keep.path) == keep.text
    assert exp.read(PERSONA, fresh.path) is None
    rb.commit()

    assert exp.paths(PERSONA) == {new_keep.path, fresh.path, mem.path}
    assert exp.read(PERSONA, keep.path) == new_keep.text
    assert not (root / PERSONA / "sessions" / "gone").exists()
    assert exp.paths("other") == {"sessions/s/turns/t1.md"}
    assert dot_entries(root) == []  # staging folder and old set are gone
    with pytest.raises(SinkError):
        rb.upsert([fresh])


def test_rebuild_abort_and_exception_keep_the_live_set(tmp_path):
    root = tmp_path / "qmd"
    exp = QmdExporter(root)
    live = [make_doc("s", "t1", "live"), make_doc("s", "t2", "live 2")]
    exp.upsert(PERSONA, live)
    before = {p: p.read_bytes() for p in all_files(root)}

    rb = exp.rebuild(PERSONA)
    rb.upsert([make_doc("s", "t1", "replacement"), make_doc("x", "t1", "new")])
    rb.abort()
    rb.abort()  # idempotent
    assert {p: p.read_bytes() for p in all_files(root)} == before
    assert dot_entries(root) == []

    with pytest.raises(RuntimeError):
        with exp.rebuild(PERSONA) as rb2:
            rb2.upsert([make_doc("s", "t1", "replacement")])
            raise RuntimeError("embedding failed")
    assert {p: p.read_bytes() for p in all_files(root)} == before
    assert dot_entries(root) == []


def test_rebuild_into_new_persona_and_empty_commit(tmp_path):
    root = tmp_path / "qmd"
    exp = QmdExporter(root)
    rb = exp.rebuild(PERSONA)
    doc = make_doc("s", "t1", "first")
    rb.upsert([doc])
    rb.commit()
    assert exp.paths(PERSONA) == {doc.path}

    exp.rebuild(PERSONA).commit()  # an empty rebuild empties the persona; its folder stays
    assert exp.paths(PERSONA) == set()
    assert sorted(p.name for p in (root / PERSONA).iterdir()) == []
    assert exp.missing(PERSONA) is None
    assert root.is_dir()


def test_rebuild_without_renameat2_falls_back_to_renames(tmp_path, monkeypatch):
    monkeypatch.setattr(qmd_rebuild, "_exchange", lambda a, b: False)
    root = tmp_path / "qmd"
    exp = QmdExporter(root)
    exp.upsert(PERSONA, [make_doc("old", "t1", "x")])
    rb = exp.rebuild(PERSONA)
    rb.upsert([make_doc("new", "t1", "y")])
    rb.commit()
    assert exp.paths(PERSONA) == {"sessions/new/turns/t1.md"}
    assert dot_entries(root) == []


def test_rebuild_cleans_staging_left_by_a_crash(tmp_path):
    root = tmp_path / "qmd"
    exp = QmdExporter(root)
    rb = exp.rebuild(PERSONA)
    rb.upsert([make_doc("s", "t1", "x")])  # process "dies" here: no commit, no abort
    assert len(dot_entries(root)) > 0
    exp2 = QmdExporter(root)
    exp2.rebuild(PERSONA).abort()
    assert dot_entries(root) == []
    assert exp2.paths(PERSONA) == set()


# ----------------------------------------------------------- update command


def test_update_command_runs_in_export_dir_only_when_files_changed(tmp_path):
    root = tmp_path / "qmd"
    marker = tmp_path / "calls"
    log = RecordingLogger()
    cmd = ["sh", "-c", f'pwd >> "{marker}"']  # the command may use a shell; the exporter does not
    exp = QmdExporter(root, update_command=cmd, logger=log)
    exp.upsert(PERSONA, [make_doc("s", "t1", "x")])
    exp.after_batch()
    assert exp.last_update is not None and exp.last_update.ok and not exp.last_update.skipped
    assert marker.read_text().splitlines() == [str(root)]
    assert log.named("qmd.update_ok")

    exp.upsert(PERSONA, [make_doc("s", "t1", "x")])  # identical bytes: nothing changed
    exp.after_batch()
    assert exp.last_update.skipped and exp.last_update.reason == "clean"
    exp.delete(PERSONA, ["sessions/s/turns/t1.md"])
    exp.after_batch()
    assert len(marker.read_text().splitlines()) == 2


@pytest.mark.parametrize("cmd,timeout,reason,rc", [
    (["/nonexistent/bin/qmd", "update"], 10, "not_found", None),
    (["sh", "-c", "echo index is locked >&2; exit 1"], 10, "exit_code", 1),
    (["sleep", "30"], 0.3, "timeout", -15),
    # A grandchild holding our pipes must not make the timeout hang.
    (["sh", "-c", "sleep 30 & sleep 30"], 0.3, "timeout", -15),
])
def test_update_failures_are_logged_not_raised(tmp_path, cmd, timeout, reason, rc):
    root = tmp_path / "qmd"
    log = RecordingLogger()
    exp = QmdExporter(root, update_command=cmd, update_timeout_s=timeout, logger=log)
    doc = make_doc("s", "t1", "x")
    exp.upsert(PERSONA, [doc])
    started = time.monotonic()
    exp.after_batch()  # must not raise
    assert time.monotonic() - started < 5
    res = exp.last_update
    assert res is not None and not res.ok and res.reason == reason and res.returncode == rc
    (event,) = log.named("qmd.update_failed")
    assert event["reason"] == reason and event["returncode"] == rc and event["command"] == cmd
    if reason == "exit_code":
        assert "index is locked" in event["stderr_tail"]
    assert exp.read(PERSONA, doc.path) == doc.text  # the export stays
    # Still dirty: the next batch retries even though nothing new was written.
    exp.after_batch()
    assert len(log.named("qmd.update_failed")) == 2


def test_default_logger_is_structlog(tmp_path):
    exp = QmdExporter(tmp_path / "qmd", update_command=["/nonexistent/qmd"])
    with structlog.testing.capture_logs() as logs:
        exp.after_batch()
    (event,) = [e for e in logs if e["event"] == "qmd.update_failed"]
    assert event["log_level"] == "warning" and event["reason"] == "not_found"


# ------------------------------------------------------------- real QMD CLI


@pytest.fixture
def qmd_cli(tmp_path) -> QmdCli:
    return QmdCli(tmp_path / "qmd-home")


def test_exported_turns_are_found_by_qmd_search(tmp_path, qmd_cli):
    root = tmp_path / "export"
    exp = QmdExporter(root)
    label = "dm:+1 555/123"
    target = make_doc(label, "t2", "User: how do we rotate the zanzibar keys?\n\nAssistant: weekly.",
                      title="Rotating keys")
    others = [make_doc("ops", f"t{i}", f"User: deploy number {i}\n\nAssistant: done") for i in range(4)]
    exp.upsert(PERSONA, [target, *others])
    exp.upsert("other", [make_doc("ops", "t1", "nothing here", persona="other")])
    qmd_cli.collection_add(root, "mem")

    hits = qmd_cli.search_json("zanzibar", n=5)
    assert [h["file"] for h in hits] == [f"qmd://mem/{PERSONA}/sessions/{safe_segment(label)}/turns/t2.md"]
    assert hits[0]["title"] == "Rotating keys"
    assert hits[0]["line"] == 4 + HEADER_LINES  # QMD counts the title lines
    assert len(qmd_cli.search_files("deploy")) == 4


def test_qmd_update_through_after_batch_reflects_changes_and_rebuilds(tmp_path, qmd_cli):
    root = tmp_path / "export"
    exp = QmdExporter(root, update_command=qmd_cli.command("update"), update_timeout_s=60)
    a = make_doc("s", "t1", "the quokka ate breakfast")
    b = make_doc("s", "t2", "the wombat ate lunch")
    c = make_doc("s", "t3", "the numbat ate dinner")
    exp.upsert(PERSONA, [a, b, c])
    qmd_cli.collection_add(root, "mem")
    uri = lambda d: f"qmd://mem/{PERSONA}/{d.path}"  # noqa: E731
    assert qmd_cli.search_files("wombat") == [uri(b)]

    exp.upsert(PERSONA, [make_doc("s", "t1", "the quokka ate a capybara")])
    exp.delete(PERSONA, [b.path])
    exp.after_batch()
    assert exp.last_update is not None and exp.last_update.ok, exp.last_update
    assert qmd_cli.search_files("wombat") == []
    assert qmd_cli.search_files("capybara") == [uri(a)]

    rb = exp.rebuild(PERSONA)
    rb.upsert([make_doc("s", "t1", "the quokka only"), make_doc("s", "t7", "a staged platypus")])
    qmd_cli.update()  # e.g. an operator's cron: the staging folder is hidden from QMD
    assert qmd_cli.search_files("platypus") == []
    assert qmd_cli.search_files("numbat") == [uri(c)]
    rb.commit()
    exp.after_batch()
    assert exp.last_update.ok, exp.last_update
    assert qmd_cli.search_files("numbat") == []  # stale file removed by the rebuild
    assert qmd_cli.search_files("quokka") == [uri(a)]


def test_failed_fallback_swap_restores_the_live_set(tmp_path, monkeypatch):
    monkeypatch.setattr(qmd_rebuild, "_exchange", lambda a, b: False)
    root = tmp_path / "qmd"
    exp = QmdExporter(root)
    live = make_doc("old", "t1", "x")
    exp.upsert(PERSONA, [live])
    rb = exp.rebuild(PERSONA)
    rb.upsert([make_doc("new", "t1", "y")])
    real_rename, calls = os.rename, []

    def flaky_rename(src, dst):
        calls.append(src)
        if len(calls) == 2:
            raise OSError(errno.EIO, "I/O error")
        return real_rename(src, dst)

    monkeypatch.setattr(qmd_files.os, "rename", flaky_rename)
    with pytest.raises(SinkError, match="swap in the rebuilt folder"):
        rb.commit()
    monkeypatch.undo()
    assert exp.paths(PERSONA) == {live.path}
    rb.abort()  # removes the staging folder
    assert dot_entries(root) == []
    assert exp.paths(PERSONA) == {live.path}


def test_temp_files_of_a_killed_write_are_swept_at_open(tmp_path):
    export = tmp_path / "export"
    first = QmdExporter(export)
    first.upsert(PERSONA, [make_doc("main", "T1", "User: hello")])
    turns = export / PERSONA / "sessions" / "main" / "turns"
    leftover = turns / ".T1.md.0123456789ab.tmp"
    leftover.write_text("half a document")
    lookalike = turns / ".notes.tmp"  # not one of ours: kept
    lookalike.write_text("x")
    again = QmdExporter(export)
    assert again.swept_tmp_files == 1
    assert sorted(p.name for p in turns.iterdir()) == [".notes.tmp", "T1.md"]
    assert again.read(PERSONA, "sessions/main/turns/T1.md").endswith("User: hello")
