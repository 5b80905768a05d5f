"""What every CLI command shares: exit codes, the error that carries one, JSON output.

Kept apart from ``indexer.cli`` so that ``python -m indexer.cli`` (where that
module runs as ``__main__``) and the command modules see the same classes.
"""

from __future__ import annotations

import json
import sys

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class CliError(Exception):
    """A command failed; the message says what to do, ``code`` is the exit code."""

    def __init__(self, message: str, code: int = EXIT_FAIL):
        super().__init__(message)
        self.code = code


def print_json(obj) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, default=str) + "\n")
