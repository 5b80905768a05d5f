"""Nothing silently lost (issue 10): oversized messages, bad turns, odd labels,
replaced ledgers, reused ids, a full disk. Real WAL ledgers, real sinks."""

from __future__ import annotations

from exporters.qmd import QmdExporter
from indexer.commands import status_report
from indexer.sync import sync_once, truncated_documents
from tests.test_sync import expected_paths, make_indexer  # noqa: F401  (fixture)


def test_an_oversized_message_is_truncated_with_a_marker_not_dropped(writer, make_indexer, ledger_path, tmp_path):
    big = "alpha " * 400  # 2,400 bytes
    writer.turn("main", user=big, assistant="the assistant answer survives")
    ix = make_indexer(ledger={"max_message_bytes": 1000})
    sync_once(ix)
    path = next(iter(ix.state.paths("atlas")))
    text = QmdExporter(tmp_path / "export").read("atlas", path)
    assert "the assistant answer survives" in text
    assert "[… truncated: 1,400 more bytes (ledger.max_message_bytes = 1,000)]" in text
    assert truncated_documents(ix.state, "atlas") == [path]
    report = status_report(ix.config, ix.state)
    assert report["personas"]["atlas"]["truncated_documents"] == 1
    assert report["personas"]["atlas"]["bad_rows_skipped"] == 0


def test_raising_the_cap_rebuilds_and_readmits_the_whole_text(writer, make_indexer, tmp_path):
    writer.turn("main", user="beta " * 400, assistant="ok")
    ix = make_indexer(ledger={"max_message_bytes": 1000})
    sync_once(ix)
    assert len(truncated_documents(ix.state, "atlas")) == 1
    ix.close()
    wider = make_indexer(ledger={"max_message_bytes": 5000})
    summary = sync_once(wider)
    assert summary.personas["atlas"].mode == "rebuild"
    path = next(iter(wider.state.paths("atlas")))
    text = QmdExporter(tmp_path / "export").read("atlas", path)
    assert "truncated" not in text and text.count("beta") == 400
    assert truncated_documents(wider.state, "atlas") == []
