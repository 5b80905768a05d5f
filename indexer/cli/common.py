"""What every CLI command shares: exit codes, the error that carries one, JSON output."""

from __future__ import annotations

import json
import sys

from indexer.core.errors import Failure, Problem, first_invalid

__all__ = ["EXIT_OK", "EXIT_FAIL", "EXIT_USAGE", "CliError", "exit_code", "defer_logging", "ensure_logging",
           "print_json"]

# 2: the call or the set-up is wrong (systemd's unit does not restart into it); 1: anything else.
EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class CliError(Failure):
    """A failure of a command's own making, with its exit code (``code``)."""

    def __init__(self, message: str, code: int = EXIT_FAIL):
        super().__init__(message, Problem.INVALID if code == EXIT_USAGE else Problem.FAILED)
        self.code = code


def exit_code(exc: Failure) -> int:
    """The exit code a failure ends a command with: 2 for what the caller must fix, else 1."""
    if isinstance(exc, CliError):
        return exc.code
    return EXIT_USAGE if exc.problem is Problem.INVALID else EXIT_FAIL


_pending_logging: list = []


def defer_logging(setup) -> None:
    """Logging set-up a command runs only when it works in-process (:func:`ensure_logging`):
    a call answered by the daemon never imports the logging stack."""
    _pending_logging[:] = [setup]


def ensure_logging() -> None:
    while _pending_logging:
        _pending_logging.pop()()


def print_json(obj) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, default=str) + "\n")


def invalid_line(exc: Exception) -> str:
    """A refused request in one line, as the HTTP API words it (``query: query is blank``): pydantic's
    own message spans several lines and links its docs. Not a validation error: its text, one line."""
    first = first_invalid(exc)
    if first is None:
        return " ".join(str(exc).split())
    field, message, _kind, more = first
    return f"{field or 'request'}: {message}" + (f" (and {more} more)" if more else "")
