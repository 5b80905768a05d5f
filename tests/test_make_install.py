"""``make install`` / ``make uninstall``: the ``ledger-indexer`` command on PATH through a launcher in
``$(PREFIX)/bin`` (scripts/launcher.sh). It says whether that folder is on PATH and what to add, never
replaces or removes a file it did not write, and a launcher whose venv is gone says what to do.
tests/test_readme_snippets.py runs the README's commands through it (default PREFIX, a temp HOME)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAUNCHER_SCRIPT = ROOT / "scripts" / "launcher.sh"


def system_path() -> str:
    """PATH without any folder holding a ledger-indexer (the checkout's .venv/bin, an earlier install)."""
    return os.pathsep.join(entry for entry in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep)
                           if entry and not (Path(entry) / "ledger-indexer").exists())


def run(args: list[str], path: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "LEDGER_INDEXER_", "VIRTUAL_ENV"))}
    env.update(PATH=path, HOME=str(home))
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module", autouse=True)
def venv_set_up():
    if subprocess.run(["make", "-q", "setup"], cwd=ROOT, capture_output=True).returncode != 0:
        pytest.fail("the venv is older than pyproject.toml or the model code: run `make setup` first", pytrace=False)


def test_install_off_path_says_what_to_add_and_the_launcher_runs(tmp_path):
    prefix, bindir = tmp_path / "prefix", tmp_path / "prefix" / "bin"
    done = run(["make", "install", f"PREFIX={prefix}"], system_path(), tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"installed {bindir}/ledger-indexer -> {ROOT}/.venv/bin/ledger-indexer" in done.stdout
    assert f"{bindir} is not on PATH" in done.stdout and f'export PATH="{bindir}:$PATH"' in done.stdout
    version = subprocess.run([str(bindir / "ledger-indexer"), "--version"], cwd=tmp_path, capture_output=True,
                             text=True, env={"PATH": system_path()}, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("ledger-indexer "), version


def test_install_on_path_says_so_or_names_the_command_that_comes_first(tmp_path):
    prefix, bindir = tmp_path / "prefix", tmp_path / "prefix" / "bin"
    done = run(["make", "install", f"PREFIX={prefix}"], f"{bindir}{os.pathsep}{system_path()}", tmp_path)
    assert done.returncode == 0 and f"{bindir} is on PATH: run `ledger-indexer --help`" in done.stdout, done
    other = tmp_path / "other"
    other.mkdir()
    (other / "ledger-indexer").write_text("#!/bin/sh\n")
    (other / "ledger-indexer").chmod(0o755)
    shadowed = run(["make", "install", f"PREFIX={prefix}"], os.pathsep.join([str(other), str(bindir), system_path()]),
                   tmp_path)
    assert shadowed.returncode == 0 and f"{other}/ledger-indexer comes first" in shadowed.stdout, shadowed


def test_uninstall_removes_only_its_own_launcher(tmp_path):
    prefix, target = tmp_path / "prefix", tmp_path / "prefix" / "bin" / "ledger-indexer"
    assert run(["make", "install", f"PREFIX={prefix}"], system_path(), tmp_path).returncode == 0
    gone = run(["make", "uninstall", f"PREFIX={prefix}"], system_path(), tmp_path)
    assert gone.returncode == 0 and f"removed {target}" in gone.stdout and not target.exists(), gone
    again = run(["make", "uninstall", f"PREFIX={prefix}"], system_path(), tmp_path)
    assert again.returncode == 0 and "nothing to remove" in again.stdout, again
    target.write_text("#!/bin/sh\necho someone else's\n")
    refused = run(["make", "install", f"PREFIX={prefix}"], system_path(), tmp_path)
    assert refused.returncode != 0 and "was not written by `make install`" in refused.stderr, refused
    kept = run(["make", "uninstall", f"PREFIX={prefix}"], system_path(), tmp_path)
    assert kept.returncode != 0 and "left in place" in kept.stderr, kept
    assert target.read_text() == "#!/bin/sh\necho someone else's\n"


def test_a_launcher_whose_venv_is_gone_says_what_to_do(tmp_path):
    entry = tmp_path / "checkout's venv" / "ledger-indexer"  # a quote in the path, on purpose
    entry.parent.mkdir()
    entry.write_text('#!/bin/sh\necho "entry $*"\n')
    entry.chmod(0o755)
    bindir = tmp_path / "bin"
    assert run(["sh", str(LAUNCHER_SCRIPT), "install", str(bindir), str(entry)], system_path(),
               tmp_path).returncode == 0
    ran = subprocess.run([str(bindir / "ledger-indexer"), "a b", "c"], capture_output=True, text=True, timeout=30)
    assert (ran.returncode, ran.stdout) == (0, "entry a b c\n"), ran
    entry.unlink()
    missing = subprocess.run([str(bindir / "ledger-indexer"), "status"], capture_output=True, text=True, timeout=30)
    assert missing.returncode == 127 and f"{entry} is missing: run 'make setup'" in missing.stderr, missing
