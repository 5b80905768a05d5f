"""A CLI command's storage failure, named: the cause (disk full, read-only file system, permission,
I/O error, a damaged file), the folder that shows it and what to do, with exit code 1.

Every command's door asks here before calling a failure unforeseen: an index folder on a file
system mounted read-only is not a bug to report, and a healthy state database on it is not to be
moved aside (that would lose project memberships and visibility changes).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from indexer.cli.common import EXIT_FAIL, CliError
from indexer.core.errors import Failure
from indexer.runtime.storage_errors import StorageFault, classify

if TYPE_CHECKING:
    from indexer.runtime.config import Config

__all__ = ["command_places", "named_storage", "storage_refusal"]


def command_places(config: Config | None) -> list[Path]:
    """The local folders a command of ``config`` reads and writes, the index folder first."""
    if config is None:
        return []
    from indexer.service.storage import storage_places

    return storage_places(config)


def storage_refusal(exc: BaseException, places: Sequence[Path], doing: str) -> CliError | None:
    """``exc`` as one line naming its storage cause and the fix (exit 1), None when it has none."""
    fault: StorageFault | None = getattr(exc, "fault", None)
    if not isinstance(fault, StorageFault):
        fault = classify(exc, places)
    if fault is None:
        return None
    return CliError(f"{doing} failed: {fault.message}", EXIT_FAIL)


@contextlib.contextmanager
def named_storage(places: Sequence[Path], doing: str) -> Iterator[None]:
    """Run the block; an exception with a storage cause leaves as a :class:`CliError` naming it."""
    try:
        yield
    except Failure:  # already says what happened (a CliError, a StateUnavailable ...)
        raise
    except Exception as exc:
        refusal = storage_refusal(exc, places, doing)
        if refusal is None:
            raise
        raise refusal from None
