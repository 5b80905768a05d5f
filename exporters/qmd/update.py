"""Running QMD's update command: bounded in time, the whole process group killed on timeout."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_STDERR_TAIL = 2000
_TERM_GRACE_S = 2.0


@dataclass(frozen=True, slots=True)
class UpdateResult:
    """Outcome of one run of the update command (see :meth:`QmdExporter.run_update`)."""

    ok: bool
    skipped: bool = False
    returncode: int | None = None
    # None (ran fine) | "no_command" | "clean" | "exit_code" | "timeout" | "not_found" | "os_error"
    reason: str | None = None
    duration_s: float = 0.0
    stderr_tail: str = ""


def run_command(command: Sequence[str], cwd: Path, timeout_s: float, log: Any) -> UpdateResult:
    """Run the update command once in ``cwd``; never raises: failures are logged as
    ``qmd.update_failed`` and returned."""
    cmd = list(command)
    started = time.monotonic()
    fields: dict[str, Any] = {"command": cmd, "cwd": str(cwd)}
    try:
        cwd.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # so a timeout can kill the whole process group
        )
    except FileNotFoundError as exc:
        return _update_failed(
            log, "not_found", started, fields, stderr=str(exc),
            hint="the update command's executable was not found; fix qmd.update_command",
        )
    except OSError as exc:
        return _update_failed(log, "os_error", started, fields, stderr=str(exc),
                              hint="could not start the update command")
    try:
        _out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        err = _drain(proc)
        return _update_failed(
            log, "timeout", started, fields, stderr=_tail(err), returncode=proc.returncode,
            timeout_s=timeout_s,
            hint="the update command was killed; QMD's index is stale until the next update",
        )
    if proc.returncode != 0:
        return _update_failed(
            log, "exit_code", started, fields, stderr=_tail(err), returncode=proc.returncode,
            hint="QMD's index is stale until the next successful update",
        )
    duration = time.monotonic() - started
    log.info("qmd.update_ok", duration_ms=round(duration * 1000), **fields)
    return UpdateResult(ok=True, returncode=0, duration_s=duration)


def _update_failed(
    log: Any,
    reason: str,
    started: float,
    fields: dict[str, Any],
    *,
    stderr: str,
    hint: str,
    returncode: int | None = None,
    **extra: Any,
) -> UpdateResult:
    duration = time.monotonic() - started
    log.warning(
        "qmd.update_failed",
        reason=reason,
        returncode=returncode,
        stderr_tail=stderr,
        duration_ms=round(duration * 1000),
        hint=hint,
        **fields,
        **extra,
    )
    return UpdateResult(
        ok=False, returncode=returncode, reason=reason, duration_s=duration, stderr_tail=stderr
    )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the command's process group, then SIGKILL whatever is left."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    try:
        proc.wait(timeout=_TERM_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # children that outlived the leader hold our pipes
    except (ProcessLookupError, PermissionError):
        pass


def _drain(proc: subprocess.Popen[bytes]) -> bytes:
    """Collect stderr after a kill without hanging on a pipe held by an escaped child."""
    try:
        _out, err = proc.communicate(timeout=_TERM_GRACE_S)
        return err or b""
    except subprocess.TimeoutExpired:
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        proc.wait()
        return b""


def _tail(data: bytes | None) -> str:
    if not data:
        return ""
    return data[-_STDERR_TAIL:].decode("utf-8", "replace").strip()


