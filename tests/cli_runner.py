"""One way to run the CLI in tests: in-process (``run_cli``), as sqlite-utils and
datasette do — fast, and a traceback fails the test instead of hiding in stderr —
or as a real process (``run_cli_process``) where the process is the point (the
daemon, signals, a fresh interpreter's start-up)."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import structlog

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class CliResult:
    returncode: int
    stdout: str
    stderr: str


def _clean_env(env: dict | None) -> dict[str, str]:
    """The environment without the operator's LEDGER_INDEXER_* settings, plus ``env``."""
    out = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_INDEXER_")}
    out.update(env or {})
    return out


@contextlib.contextmanager
def _environ(env: dict[str, str]):
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _logging_restored():
    """The CLI configures logging for its own streams: put the test run's back afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    config = structlog.get_config()
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        structlog.configure(**config)


def run_cli(*args: str, env: dict | None = None, stdin: str | None = None, check: bool = False) -> CliResult:
    """``ledger-indexer ARGS`` in this process: exit code, stdout and stderr.

    An exception escaping ``main`` is a bug (every path must end in one line and an
    exit code): it propagates and fails the calling test."""
    from indexer.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    fake_stdin = io.TextIOWrapper(io.BytesIO((stdin or "").encode("utf-8")), encoding="utf-8")
    saved_stdin = sys.stdin
    with _environ(_clean_env(env)), _logging_restored(), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        sys.stdin = fake_stdin
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse: usage errors and --help
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        finally:
            sys.stdin = saved_stdin
    result = CliResult(int(code or 0), out.getvalue(), err.getvalue())
    if check:
        assert result.returncode == 0, result.stderr
    return result


def run_cli_process(*args: str, env: dict | None = None, stdin: str | None = None, check: bool = False,
                    timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m indexer.cli ARGS`` as a real process."""
    proc = subprocess.run([sys.executable, "-m", "indexer.cli", *args], cwd=ROOT, env=_clean_env(env),
                          input=stdin, capture_output=True, text=True, timeout=timeout)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc
