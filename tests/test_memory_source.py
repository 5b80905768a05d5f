"""The memory source: workspace memory files, re-indexed on change, removed when gone."""

from __future__ import annotations

from exporters.qmd import QmdExporter
from indexer.sync.context import Indexer
from indexer.sync.engine import sync_once
from indexer.sync.memory_source import list_memory_files


def test_memory_files_follow_the_workspace(writer, config_factory, tmp_path):
    writer.turn("main", user="hello", assistant="hi")
    ws = tmp_path / "ws"
    (ws / "memory" / "notes").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Atlas\nprefers short tokens\n")
    (ws / "memory" / "2026-11-01.md").write_text("decided: canary first\n")
    (ws / "memory" / "notes" / "odd name!.md").write_text("nested note\n")
    (ws / "memory" / ".hidden.md").write_text("ignored\n")
    (ws / "memory" / "notes.txt").write_text("ignored\n")
    config = config_factory(memory={"atlas": [str(ws / "MEMORY.md"), str(ws / "memory")]})
    sink = QmdExporter(tmp_path / "export")
    ix = Indexer(config, sinks=[sink])
    try:
        sync_once(ix)
        paths = {p for p in sink.paths("atlas") if p.startswith("memory/")}
        assert paths == {f for _, f in list_memory_files(config.memory["atlas"])}
        assert len(paths) == 3 and "memory/MEMORY.md" in paths
        assert all(ix.state.file("atlas", p).source == "memory" for p in paths)
        assert sync_once(ix).documents_written == 0  # unchanged hashes
        (ws / "memory" / "2026-11-01.md").write_text("decided: canary first, then 10%\n")
        assert sync_once(ix).documents_written == 1
        assert sink.read("atlas", "memory/memory/2026-11-01.md").endswith("then 10%")
        (ws / "memory" / "notes" / "odd name!.md").unlink()
        sync_once(ix)
        assert len({p for p in sink.paths("atlas") if p.startswith("memory/")}) == 2
        assert not any("odd" in p for p in ix.state.paths("atlas", source="memory"))
    finally:
        ix.close()


def test_missing_memory_paths_are_ignored(tmp_path):
    assert list_memory_files((tmp_path / "nope.md", tmp_path / "nodir")) == []


def test_a_memory_file_that_cannot_be_read_keeps_its_indexed_document(writer, config_factory, tmp_path):
    """Unreadable for a moment (permissions during an editor's save) or grown past the size limit:
    the file is still there, so its document indexed before stays; logged as skipped."""
    import os

    from structlog.testing import capture_logs

    from indexer.sync import memory_source

    writer.turn("main", user="hello", assistant="hi")
    ws = tmp_path / "ws"
    ws.mkdir()
    note = ws / "MEMORY.md"
    note.write_text("# Atlas\ndecided: canary first\n")
    config = config_factory(memory={"atlas": [str(note)]})
    sink = QmdExporter(tmp_path / "export")
    ix = Indexer(config, sinks=[sink])
    try:
        sync_once(ix)
        assert sink.read("atlas", "memory/MEMORY.md") == "# Atlas\ndecided: canary first"
        note.write_text("# Atlas\n" + "x" * 100 + "\n")
        limit = memory_source.MAX_MEMORY_FILE_BYTES
        memory_source.MAX_MEMORY_FILE_BYTES = 50  # grown past the limit
        try:
            with capture_logs() as logs:
                sync_once(ix)
        finally:
            memory_source.MAX_MEMORY_FILE_BYTES = limit
        assert [e["reason"] for e in logs if e["event"] == "memory.skipped"] == ["too_large"]
        assert sink.read("atlas", "memory/MEMORY.md") == "# Atlas\ndecided: canary first"
        assert ix.state.paths("atlas", source="memory") == {"memory/MEMORY.md"}
        if os.geteuid() != 0:  # root reads any file: the permission case needs an ordinary user
            note.chmod(0)
            try:
                sync_once(ix)
            finally:
                note.chmod(0o644)
            assert ix.state.paths("atlas", source="memory") == {"memory/MEMORY.md"}
        sync_once(ix)  # readable and small again: its new text
        assert sink.read("atlas", "memory/MEMORY.md") == "# Atlas\n" + "x" * 100
        note.unlink()  # gone: its document goes
        sync_once(ix)
        assert ix.state.paths("atlas", source="memory") == set() == {
            p for p in sink.paths("atlas") if p.startswith("memory/")}
    finally:
        ix.close()


def _one_memory_file(writer, config_factory, tmp_path, text: str):
    """A ledger turn and one memory file holding ``text``, both sinks configured: (the file, config)."""
    writer.turn("main", user="hello", assistant="hi")
    ws = tmp_path / "ws"
    ws.mkdir()
    note = ws / "MEMORY.md"
    note.write_text(text)
    return note, config_factory(memory={"atlas": [str(note)]}, sinks=("lancedb", "qmd"))


def test_a_rebuild_carries_over_the_document_of_a_memory_file_it_cannot_read(writer, config_factory, tmp_path):
    """A rebuild replaces the whole set: the document of a file there but not readable (here: past the
    size limit) is carried over from the live sinks, the same text, so a later pass skips it by hash."""
    from fake_embedder import FakeEmbedder

    from indexer.sync import memory_source
    from indexer.sync.context import build_sinks

    note, config = _one_memory_file(writer, config_factory, tmp_path, "# Atlas\ndecided: canary first\n")
    ix = Indexer(config, sinks=build_sinks(config, embedder=FakeEmbedder()), redact=lambda s: s,
                 redaction_version="t")
    try:
        sync_once(ix)
        before = ix.state.file("atlas", "memory/MEMORY.md").content_hash
        note.write_text("# Atlas\n" + "x" * 100 + "\n")
        limit = memory_source.MAX_MEMORY_FILE_BYTES
        memory_source.MAX_MEMORY_FILE_BYTES = 50
        try:
            assert sync_once(ix, force=True).personas["atlas"].mode == "rebuild"
        finally:
            memory_source.MAX_MEMORY_FILE_BYTES = limit
        for sink in ix.sinks:
            assert sink.read("atlas", "memory/MEMORY.md") == "# Atlas\ndecided: canary first", sink.name
        assert ix.state.file("atlas", "memory/MEMORY.md").content_hash == before
        sync_once(ix)  # readable again: its new text replaces it
        assert ix.sinks[1].read("atlas", "memory/MEMORY.md") == "# Atlas\n" + "x" * 100
    finally:
        ix.close()


def test_a_carried_over_memory_document_is_redacted_by_the_rebuilds_rules(writer, config_factory, tmp_path):
    """The rebuild a new known secret asks for must mask it in a memory file it cannot read too: the
    text carried over from a sink was redacted by the rules before."""
    from fake_embedder import FakeEmbedder

    from indexer.sync import memory_source
    from indexer.sync.context import build_sinks

    note, config = _one_memory_file(writer, config_factory, tmp_path, "# Atlas\ndb password hunter2-canary-730519\n")

    def indexer(redact, version):
        return Indexer(config, sinks=build_sinks(config, embedder=FakeEmbedder()), redact=redact,
                       redaction_version=version)

    ix = indexer(lambda s: s, "v1")
    try:
        sync_once(ix)
    finally:
        ix.close()
    note.write_text("# Atlas\n" + "x" * 100 + "\n")
    limit = memory_source.MAX_MEMORY_FILE_BYTES
    memory_source.MAX_MEMORY_FILE_BYTES = 50
    ix = indexer(lambda s: s.replace("hunter2-canary-730519", "***"), "v2")  # a new known secret
    try:
        assert sync_once(ix).personas["atlas"].mode == "rebuild"
        for sink in ix.sinks:
            assert sink.read("atlas", "memory/MEMORY.md") == "# Atlas\ndb password ***", sink.name
    finally:
        memory_source.MAX_MEMORY_FILE_BYTES = limit
        ix.close()
