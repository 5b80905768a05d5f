"""Staging folders of a forced reindex killed mid-way: swept at open and at maintenance, never while a
rebuild of the same process writes into one. The kill is a real SIGKILL of ``ledger-indexer sync
--force`` (QMD sink only: no model), landed while its new file set is being staged."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from structlog.testing import capture_logs

from exporters.qmd import QmdExporter
from tests.daemon_process import ROOT, big_ledger, free_port, write_config
from tests.test_qmd_exporter import PERSONA, make_doc

# Enough that a forced reindex is still staging when it is killed (it is killed at 20 staged files,
# checked every 5 ms: four writes of 128 documents leave a wide margin); 1,500 cost three times as much.
TURNS = 500


def _staging(export: Path) -> dict[str, int]:
    """Staging folders of ``export`` and the files each holds."""
    return {e.name: sum(len(f) for _d, _s, f in os.walk(e)) for e in export.iterdir()
            if e.is_dir() and e.name.startswith(".rebuild-")} if export.is_dir() else {}


def _cli(config: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "indexer.cli", "--config", str(config), *args], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})


def _kill_mid_rebuild(config: Path, export: Path) -> dict[str, int]:
    """Start a forced reindex and SIGKILL it once its staging folder holds files; returns what the
    kill left (asserted: the process was killed, not done, and its new set was never swapped in)."""
    proc = _cli(config, "sync", "--force")
    try:
        deadline = time.monotonic() + 120
        while not any(n >= 20 for n in _staging(export).values()):
            assert proc.poll() is None, f"the reindex ended before it was killed: {proc.stderr.read()[-2000:]}"
            assert time.monotonic() < deadline, "no staging folder filled within 120 s"
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    left = _staging(export)
    assert left and all(n > 0 for n in left.values())
    return left


def test_staging_left_by_a_reindex_killed_mid_way_is_swept_at_maintenance_and_at_open(tmp_path):
    ledger = tmp_path / "agents.db"
    big_ledger(ledger, TURNS, words=12)
    config = write_config(tmp_path, ledger, free_port(), sinks=("qmd",), token=None)
    export = tmp_path / "index" / "qmd"
    first = _cli(config, "sync")
    assert first.wait(timeout=300) == 0, first.stderr.read()[-2000:]
    live = QmdExporter(export).paths(PERSONA)
    assert len(live) == TURNS

    # an exporter open in a running process (the daemon's) finds it at its next maintenance
    running = QmdExporter(export)
    left = _kill_mid_rebuild(config, export)
    with capture_logs() as logs:
        assert running.maintain()["staging_removed"] == len(left)
    assert _staging(export) == {}
    assert [(e["folders"], e["files"]) for e in logs if e["event"] == "qmd.staging_swept"] == [
        (len(left), sum(left.values()))]

    # a process opening the export after the kill sweeps it at open
    left = _kill_mid_rebuild(config, export)
    with capture_logs() as logs:
        reopened = QmdExporter(export)
    assert reopened.swept_staging == len(left) and _staging(export) == {}
    assert any(e["event"] == "qmd.staging_swept" for e in logs)
    assert reopened.paths(PERSONA) == live  # the live set, untouched by the killed reindex


def test_maintenance_never_sweeps_the_staging_folder_of_a_rebuild_in_progress(tmp_path):
    """The daemon runs maintenance beside its reindex job: a rebuild's folder in use stays, and the
    set it commits is whole."""
    exp = QmdExporter(tmp_path / "qmd")
    exp.upsert(PERSONA, [make_doc("old", "t0", "x")])
    rb = exp.rebuild(PERSONA)
    rb.upsert([make_doc("new", "t1", "one")])
    assert len(_staging(exp.export_dir)) == 1  # the write is in progress: staged, not committed
    assert exp.maintain()["staging_removed"] == 0
    rb.upsert([make_doc("new", "t2", "two")])
    rb.commit()
    assert exp.paths(PERSONA) == {"sessions/new/turns/t1.md", "sessions/new/turns/t2.md"}
    assert _staging(exp.export_dir) == {}
    assert exp.maintain()["staging_removed"] == 0


def test_the_sweep_leaves_what_only_looks_like_staging(tmp_path):
    root = tmp_path / "qmd"
    (root / ".rebuild-notes").mkdir(parents=True)  # no random suffix: not a name a rebuild gives
    (root / ".rebuild-atlas-0123abcd").write_text("a file, not a folder")
    (root / ".rebuild-atlas-0123abce").mkdir()
    (root / ".rebuild-atlas-0123abce" / "doc.md").write_text("staged")
    exp = QmdExporter(root)
    assert exp.swept_staging == 1
    assert sorted(e.name for e in root.iterdir()) == [".rebuild-atlas-0123abcd", ".rebuild-notes"]
