"""The documented QMD setup works under the shipped unit's MemoryDenyWriteExecute.

systemd implements MemoryDenyWriteExecute=yes with a seccomp filter; Linux
6.3+ offers the same restriction per process as prctl(PR_SET_MDWE), which a
test can set without systemd. Node's JIT needs writable+executable memory, so
plain `node` aborts under it; the unit's NODE_OPTIONS=--jitless makes the
QMD exporter's update command work.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.qmd_tool import NODE, QMD_JS, QmdCli, isolated_env

ROOT = Path(__file__).resolve().parents[1]
UNIT = ROOT / "systemd" / "ledger-indexer.service"
PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN = 65, 1


def _unit_environment() -> dict[str, str]:
    env = {}
    for line in UNIT.read_text().splitlines():
        if line.startswith("Environment="):
            key, _, value = line.removeprefix("Environment=").partition("=")
            env[key] = value
    return env


def _mdwe_supported() -> bool:
    probe = subprocess.run([sys.executable, "-c", "import ctypes,sys; sys.exit(ctypes.CDLL(None).prctl(65, 1, 0, 0, 0))"])
    return probe.returncode == 0


def _deny_write_execute() -> None:  # preexec_fn: applies to the child and all its children
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) != 0:
        os._exit(97)


pytestmark = pytest.mark.skipif(not _mdwe_supported(), reason="kernel without PR_SET_MDWE (Linux < 6.3)")


def test_the_unit_denies_write_execute_and_sets_jitless_node():
    text = UNIT.read_text()
    assert "\nMemoryDenyWriteExecute=yes\n" in text
    assert _unit_environment()["NODE_OPTIONS"] == "--jitless"


def test_plain_node_aborts_under_the_restriction(tmp_path):
    QmdCli(tmp_path / "home")  # skips (or fails in CI) without the project-local QMD
    env = isolated_env(tmp_path / "home")
    proc = subprocess.run([str(NODE), str(QMD_JS), "status"], env=env, preexec_fn=_deny_write_execute,
                          capture_output=True, text=True, timeout=60)
    # V8 traps when the JIT maps code: killed by a signal, not a clean exit.
    assert proc.returncode < 0, (proc.returncode, proc.stderr[-500:])


def test_exporter_update_command_works_under_the_unit_restriction(tmp_path):
    """The daemon's own code path (QmdExporter.run_update) in a process under
    MDWE with the unit's environment: the update succeeds and qmd finds the turn."""
    cli = QmdCli(tmp_path / "home")
    export = tmp_path / "export"
    (export / "atlas").mkdir(parents=True)
    cli.collection_add(export, "mem")
    env = {**_unit_environment(), **cli.env}
    script = textwrap.dedent(f"""
        import json, sys
        from exporters.qmd import QmdExporter
        from tests.test_qmd_mdwe import doc
        exp = QmdExporter({str(export)!r}, update_command={[str(NODE), str(QMD_JS), "update"]!r})
        exp.upsert("atlas", [doc()])
        result = exp.run_update()
        print(json.dumps({{"ok": result.ok, "skipped": result.skipped}}))
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env={**os.environ, **env},
                          preexec_fn=_deny_write_execute, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"ok": True, "skipped": False}
    hits = subprocess.run([str(NODE), str(QMD_JS), "search", "zebrafish", "--json"], env=env,
                          preexec_fn=_deny_write_execute, capture_output=True, text=True, timeout=60)
    assert hits.returncode == 0, hits.stderr[-1000:]
    files = [h["file"] for h in json.loads(hits.stdout)]
    assert files == ["qmd://mem/atlas/sessions/mdwe/turns/t1.md"]


def doc():
    from tests.test_qmd_exporter import make_doc

    return make_doc("mdwe", "t1", "User: where do zebrafish sleep?\n\nAssistant: in the tank.")
