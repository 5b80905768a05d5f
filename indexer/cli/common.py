"""What every CLI command shares: exit codes, the error that carries one, JSON output."""

from __future__ import annotations

import json
import sys

from indexer.core.errors import EXIT_FAIL, EXIT_OK, EXIT_USAGE, CliError

__all__ = ["EXIT_OK", "EXIT_FAIL", "EXIT_USAGE", "CliError", "print_json"]


def print_json(obj) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, default=str) + "\n")
