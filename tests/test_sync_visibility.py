"""``apply_visibility(ix, label, visibility)``: the one call the CLI and the
daemon's admin API use. It changes the state DB and the QMD export at once,
also while a sync pass runs on another thread and a writer appends to the
ledger. Checked with the real `qmd` CLI over the export."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from exporters.qmd import QmdExporter
from indexer.sync.context import open_indexer
from indexer.sync.engine import sync_once
from indexer.sync.visibility import apply_visibility
from ledger.writer import LedgerWriter
from tests.conftest import make_config
from tests.qmd_tool import QmdCli
from tests.test_sync import expected_paths


def _diary_files(export: Path) -> set[str]:
    """Documents of the session in the export, listed without opening an exporter
    (opening one sweeps temp files, which would race the sync thread's writes)."""
    folder = export / "atlas" / "sessions" / "diary"
    return {str(p.relative_to(export)) for p in folder.rglob("*.md")} if folder.exists() else set()


def test_apply_visibility_updates_state_export_and_qmd_index_at_once(tmp_path: Path):
    ledger = tmp_path / "agents.db"
    with LedgerWriter(ledger, seed=21) as w:
        w.turn("open", user="the quokka migration plan", assistant="ship the quokka plan")
        w.turn("diary", user="my private axolotl notes", assistant="the axolotl notes stay here")
    cli = QmdCli(tmp_path / "qmd-home")
    config = make_config(tmp_path, ledger, sinks=("qmd",), qmd={"update_command": cli.command("update")})
    ix = open_indexer(config)
    try:
        sync_once(ix)
        cli.collection_add(config.qmd_export_dir / "atlas", "mem")
        cli.update()
        assert any("diary" in f for f in cli.search_files("axolotl"))

        change = apply_visibility(ix, "diary", "private")
        assert change is not None
        assert (change.persona, change.removed, change.restored) == ("atlas", 1, 0)
        assert ix.state.session("diary").visibility == "private"
        assert _diary_files(config.qmd_export_dir) == set()
        # The update hook ran inside the call: QMD's own index forgot it, no `qmd update` by hand.
        assert cli.search_files("axolotl") == []
        assert cli.search_files("quokka")  # the other session is still found

        change = apply_visibility(ix, "diary", "shared")
        assert (change.removed, change.restored) == (0, 1)
        assert any("diary" in f for f in cli.search_files("axolotl"))

        assert apply_visibility(ix, "no-such-session", "private") is None
        with pytest.raises(ValueError):
            apply_visibility(ix, "diary", "secret")
    finally:
        ix.close()


def test_visibility_changes_while_passes_run_and_a_writer_appends(tmp_path: Path):
    """A sync thread runs passes (every third one a forced rebuild into a staged
    folder) while a writer thread appends turns to the session; the main thread
    flips it private and shared. Whenever a private change has returned, the
    export holds none of its files, however the passes interleave."""
    ledger = tmp_path / "agents.db"
    with LedgerWriter(ledger, seed=22) as w:
        for i in range(5):
            w.turn("diary", user=f"axolotl entry {i}", assistant="noted")
            w.turn("open", user=f"quokka entry {i}", assistant="noted")
    config = make_config(tmp_path, ledger, sinks=("qmd",))
    export = config.qmd_export_dir
    ix = open_indexer(config)
    sync_once(ix)  # the sessions are known to the state DB
    stop = threading.Event()
    passes = {"tail": 0, "rebuild": 0, "backfill": 0}
    appended = [0]
    failures: list[BaseException] = []

    def syncer() -> None:
        try:
            n = 0
            while not stop.is_set():
                summary = sync_once(ix, force=(n % 3 == 2))
                passes[summary.personas["atlas"].mode] += 1
                n += 1
        except BaseException as exc:  # surfaced by the assertion below
            failures.append(exc)

    def appender() -> None:
        try:
            with LedgerWriter(ledger, seed=23) as w:
                while not stop.is_set():
                    w.turn("diary" if appended[0] % 2 else "open", user=f"axolotl late {appended[0]}",
                           assistant="noted")
                    appended[0] += 1
                    time.sleep(0.01)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=syncer), threading.Thread(target=appender)]
    for t in threads:
        t.start()
    checks = 0
    try:
        for _round in range(6):
            assert apply_visibility(ix, "diary", "private") is not None
            deadline = time.monotonic() + 0.4
            while time.monotonic() < deadline:
                assert _diary_files(export) == set()
                checks += 1
                time.sleep(0.01)
            assert apply_visibility(ix, "diary", "shared") is not None
            time.sleep(0.15)
        assert apply_visibility(ix, "diary", "private") is not None
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            assert _diary_files(export) == set()
            checks += 1
            time.sleep(0.01)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    assert not failures, failures
    assert passes["rebuild"] >= 2 and passes["tail"] >= 2, passes  # the passes really ran alongside
    assert appended[0] >= 20 and checks >= 100
    try:
        sync_once(ix)
        assert _diary_files(export) == set()
        assert ix.state.paths("atlas", session="diary")  # indexed, only kept out of the export
        apply_visibility(ix, "diary", "shared")
        sync_once(ix)
        assert QmdExporter(export).paths("atlas") == expected_paths(ledger, "atlas")
    finally:
        ix.close()
