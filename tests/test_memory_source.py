"""The memory source: workspace memory files, re-indexed on change, removed when gone."""

from __future__ import annotations

from exporters.qmd import QmdExporter
from indexer.sync.context import Indexer
from indexer.sync.memory_source import list_memory_files
from indexer.sync.engine import sync_once


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
