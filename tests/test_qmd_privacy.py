"""QMD has no scopes: a private or deleted session's documents are never in the
export. Checked with the real `qmd` CLI over the export, on a real WAL ledger."""

from __future__ import annotations

from pathlib import Path

from exporters.qmd import QmdExporter
from indexer.cli.visibility import apply_visibility
from indexer.sync.context import open_indexer
from indexer.sync.engine import sync_once
from ledger.writer import LedgerWriter
from tests.conftest import make_config
from tests.qmd_tool import QmdCli


def _files(config, label_fragment: str) -> set[str]:
    return {p for p in QmdExporter(config.qmd_export_dir).paths("atlas") if label_fragment in p}


def _sync(config) -> None:
    ix = open_indexer(config)
    try:
        sync_once(ix)
    finally:
        ix.close()


def _qmd_finds(cli: QmdCli, word: str) -> list[str]:
    cli.update()
    return cli.search_files(word, n=20)


def test_private_session_leaves_the_export_and_comes_back_when_shared(tmp_path: Path):
    ledger = tmp_path / "agents.db"
    with LedgerWriter(ledger, seed=3) as w:
        w.turn("open", user="the quokka migration plan", assistant="ship the quokka plan on monday")
        w.turn("diary", user="my private axolotl notes", assistant="the axolotl notes stay here")
        w.turn("diary", user="second axolotl entry", assistant="noted")
    config = make_config(tmp_path, ledger, sinks=("qmd",))
    _sync(config)
    cli = QmdCli(tmp_path / "qmd-home")
    cli.collection_add(config.qmd_export_dir / "atlas", "mem")
    assert len(_files(config, "/diary/")) == 2
    assert any("diary" in f for f in _qmd_finds(cli, "axolotl"))

    change = apply_visibility(config, "diary", "private")
    assert (change.removed, change.via_daemon) == (2, False)
    assert _files(config, "/diary/") == set()
    assert _files(config, "/open/")  # other sessions stay
    assert _qmd_finds(cli, "axolotl") == []

    # A new turn of the private session, a plain sync and a forced rebuild: still not exported.
    with LedgerWriter(ledger, seed=4) as w:
        w.turn("diary", user="third axolotl entry while private", assistant="ok")
    _sync(config)
    assert _files(config, "/diary/") == set()
    ix = open_indexer(config)
    try:
        sync_once(ix, force=True)
        assert ix.state.paths("atlas", session="diary")  # indexed (state knows it), just not exported
    finally:
        ix.close()
    assert _files(config, "/diary/") == set()
    assert _qmd_finds(cli, "axolotl") == []

    change = apply_visibility(config, "diary", "shared")
    assert change.restored == 3
    assert len(_files(config, "/diary/")) == 3
    assert any("diary" in f for f in _qmd_finds(cli, "axolotl"))


def test_a_visibility_change_made_in_the_state_db_is_applied_by_the_next_pass(tmp_path: Path):
    """Another writer of the state DB (the API of a daemon, an older CLI): the
    sync pass reconciles the export whatever the path the change took."""
    ledger = tmp_path / "agents.db"
    with LedgerWriter(ledger, seed=5) as w:
        w.turn("diary", user="axolotl", assistant="axolotl care")
        w.turn("open", user="quokka", assistant="quokka plan")
    config = make_config(tmp_path, ledger, sinks=("qmd", "lancedb"))
    _sync(config)
    ix = open_indexer(config)
    try:
        ix.state.set_visibility("diary", "private")
        summary = sync_once(ix)
        assert summary.personas["atlas"].documents_deleted == 1
        assert _files(config, "/diary/") == set()
        # LanceDB enforces scopes at query time: it keeps the document.
        lance = next(s for s in ix.sinks if s.name == "lancedb")
        assert any("/diary/" in p for p in lance.paths("atlas"))
        ix.state.set_visibility("diary", "shared")
        sync_once(ix)
        assert len(_files(config, "/diary/")) == 1
    finally:
        ix.close()


def test_deleted_sessions_are_never_exported(tmp_path: Path):
    ledger = tmp_path / "agents.db"
    with LedgerWriter(ledger, seed=6) as w:
        w.turn("gone", user="axolotl", assistant="axolotl")
        w.turn("open", user="quokka", assistant="quokka")
    config = make_config(tmp_path, ledger, sinks=("qmd",))
    _sync(config)
    assert _files(config, "/gone/")
    with LedgerWriter(ledger, seed=7) as w:
        w.set_session_status("gone", "deleted")
    _sync(config)
    assert _files(config, "/gone/") == set() and _files(config, "/open/")


def test_visibility_is_refused_with_a_clear_message_while_a_sync_runs_and_applies_after(tmp_path: Path):
    import pytest

    from indexer.cli.common import CliError
    from indexer.state.lock import acquire

    ledger = tmp_path / "agents.db"
    with LedgerWriter(ledger, seed=8) as w:
        w.turn("diary", user="axolotl", assistant="ok")
    config = make_config(tmp_path, ledger, sinks=("qmd",))
    _sync(config)
    held = acquire(config.index.dir, "sync")  # a one-off `ledger-indexer sync` in progress
    try:
        with pytest.raises(CliError) as caught:
            apply_visibility(config, "diary", "private")
        assert "in use by" in str(caught.value)
    finally:
        held.release()
    assert apply_visibility(config, "diary", "private").removed == 1


def test_a_persona_whose_every_session_is_private_is_not_rebuilt_on_every_pass(tmp_path: Path):
    """With LanceDB and QMD, a persona whose sessions are all private holds nothing in QMD. Its empty
    export folder is its (empty) set: were it pruned, every pass would find QMD's set 'lost' and rebuild
    the persona — re-embedding it and swapping LanceDB tables each time."""
    ledger = tmp_path / "agents.db"
    with LedgerWriter(ledger, seed=5) as w:
        w.turn("diary", user="my private axolotl notes", assistant="the axolotl notes stay here")
    config = make_config(tmp_path, ledger, sinks=("lancedb", "qmd"))
    _sync(config)
    apply_visibility(config, "diary", "private")
    ix = open_indexer(config)
    try:
        (lance,) = [sink for sink in ix.sinks if sink.name == "lancedb"]
        modes = [sync_once(ix, force=i == 0).personas["atlas"].mode for i in range(4)]
        generation = lance._active["personas"]["atlas"]["generation"]
        assert modes == ["rebuild", "tail", "tail", "tail"]
        with LedgerWriter(ledger, seed=6) as w:  # a new private turn: written to LanceDB only
            w.turn("diary", user="another axolotl entry", assistant="noted")
        assert [sync_once(ix).personas["atlas"].mode for _ in range(2)] == ["tail", "tail"]
        assert lance._active["personas"]["atlas"]["generation"] == generation
        assert len(ix.state.paths("atlas", session="diary")) == 2  # indexed for scoped search
    finally:
        ix.close()
    assert _files(config, "/diary/") == set()
    assert (config.qmd_export_dir / "atlas").is_dir()


def test_a_rebuild_written_in_place_with_nothing_left_to_export_keeps_the_folder(tmp_path: Path, monkeypatch):
    """The only session goes private between staging and the switch: the staged set is dropped and
    the new set written over the live one — nothing. The persona's folder must still be there (its
    empty set), or the next pass finds QMD's set lost and rebuilds again."""
    from indexer.sync import engine

    ledger = tmp_path / "agents.db"
    with LedgerWriter(ledger, seed=7) as w:
        w.turn("diary", user="my private axolotl notes", assistant="noted")
    config = make_config(tmp_path, ledger, sinks=("lancedb", "qmd"))
    _sync(config)
    real = engine.switch_in_rebuild
    switched = []

    def private_before_the_switch(ix, persona, *args, **kwargs):
        ix.state.set_visibility("diary", "private")  # as the admin API does, mid-rebuild
        switched.append(persona)
        return real(ix, persona, *args, **kwargs)

    monkeypatch.setattr(engine, "switch_in_rebuild", private_before_the_switch)
    import shutil

    shutil.rmtree(config.qmd_export_dir / "atlas")  # the export lost: a rebuild writes it anew
    ix = open_indexer(config)
    try:
        assert sync_once(ix).personas["atlas"].mode == "rebuild"  # index.lost
        assert switched == ["atlas"]
        monkeypatch.setattr(engine, "switch_in_rebuild", real)
        assert (config.qmd_export_dir / "atlas").is_dir()
        assert _files(config, "/diary/") == set()
        assert [sync_once(ix).personas["atlas"].mode for _ in range(2)] == ["tail", "tail"]
    finally:
        ix.close()
