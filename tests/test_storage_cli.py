"""Every CLI command on an index folder it cannot write names the cause (read-only file system,
permission, disk full) and the fix, with exit 1 (issue 35): never "move state.sqlite aside" for
a healthy file (that loses project memberships and visibility changes), never "please report it".

Real file systems: a read-only bind mount, a full tmpfs, and a folder a non-root user may not
write (root ignores file modes, so that case runs the CLI as ``nobody``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from indexer.cli.demo import write_demo
from indexer.state.db import StateDB
from tests.cli_runner import ROOT, run_cli
from tests.full_disk import SmallDisk, small_disk, unmount  # noqa: F401

READ_ONLY_FIX = "remount it read-write"


def _healthy_index(root: Path, *, index_dir: Path | None = None) -> Path:
    """The demo's config with a healthy state DB (a project membership in it); its config path."""
    config, _ = write_demo(root)
    if index_dir is not None:
        text = config.read_text().replace('dir = "index"', f'dir = "{index_dir}"')
        config.write_text(text.replace('export_dir = "index/qmd"', f'export_dir = "{index_dir / "qmd"}"'))
    state = StateDB((index_dir or root / "index") / "state.sqlite")
    state.project_add("infra", ["main"])
    state.close()
    return config


@pytest.fixture
def read_only_index(tmp_path: Path) -> Iterator[Path]:
    """A healthy demo index seen through a read-only bind mount: the config path inside it."""
    _healthy_index(tmp_path / "rw")
    view = tmp_path / "ro"
    view.mkdir()
    done = subprocess.run(["mount", "--bind", str(tmp_path / "rw"), str(view)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"a read-only file system needs a bind mount (root or CAP_SYS_ADMIN): {done.stderr.strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], check=True, capture_output=True)
        assert os.statvfs(view).f_flag & os.ST_RDONLY
        yield view / "ledger-indexer.toml"
    finally:
        unmount(view)


def _named(result, cause: str, fix: str) -> str:
    assert result.returncode == 1, (result.returncode, result.stderr)
    err = result.stderr
    assert "please report it" not in err and "move it aside" not in err and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("ledger-indexer:")]
    assert len(lines) == 1, err
    assert cause in lines[0] and fix in lines[0], lines[0]
    return lines[0]


COMMANDS = [
    ("status",),
    ("search", "jwt", "--persona", "atlas"),
    ("get", "sessions/main.md", "--persona", "atlas"),
    ("sync",),
    ("reindex",),
    ("project", "list"),
    ("project", "add", "infra", "research"),
    ("session", "visibility", "main", "private"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_every_command_on_a_read_only_file_system_names_it_and_the_fix(read_only_index, command):
    line = _named(run_cli("--config", str(read_only_index), *command), "read-only file system", READ_ONLY_FIX)
    assert str(read_only_index.parent / "index") in line  # the folder that shows it


def test_the_healthy_state_database_on_it_is_left_as_it_was(read_only_index, tmp_path):
    run_cli("--config", str(read_only_index), "sync")
    state = StateDB(tmp_path / "rw" / "index" / "state.sqlite")
    try:
        assert state.projects() == {"infra": ["main"]}
    finally:
        state.close()


@pytest.fixture
def nobody_index() -> Iterator[Path]:
    """A healthy index in a folder owned by root, mode 0755, in a tree ``nobody`` can read."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("the permission case runs the CLI as `nobody`: it needs root and setpriv")
    root = Path(tempfile.mkdtemp(prefix="li-perm-", dir="/tmp"))
    try:
        root.chmod(0o755)
        config = _healthy_index(root / "demo")
        for path in (root / "demo", *(root / "demo").rglob("*")):
            path.chmod(0o755 if path.is_dir() else 0o644)
        yield config
    finally:
        shutil.rmtree(root)


def _as_nobody(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_INDEXER_")}
    env.update(HOME="/tmp", PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                           sys.executable, "-m", "indexer.cli", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", [("status",), ("sync",), ("project", "add", "infra", "research")],
                         ids=lambda c: " ".join(c[:2]))
def test_a_folder_the_user_may_not_write_is_named_permission_and_the_fix(nobody_index, command):
    done = _as_nobody("--config", str(nobody_index), *command)
    line = _named(done, "permission denied", "chown/chmod")
    assert str(nobody_index.parent / "index") in line


def test_sync_on_a_full_disk_names_it_and_the_fix(small_disk: SmallDisk, tmp_path):  # noqa: F811
    config = _healthy_index(tmp_path / "demo", index_dir=small_disk.path / "index")
    small_disk.fill()
    line = _named(run_cli("--config", str(config), "sync"), "disk full", "free space on that file system")
    assert str(small_disk.path) in line
