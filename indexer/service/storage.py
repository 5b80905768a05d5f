"""The folders the daemon writes to, and its backend calls' storage failures pinned to one of them.

The API door turns a :class:`StorageFailure` into 507/503 with its one-line
message; only the daemon knows which folders it writes (the index dir, a
local LanceDB folder, the QMD export), so it names the one that is full,
read-only or unwritable here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from indexer.runtime.config import Config
from indexer.runtime.storage_errors import StorageFailure, classify

F = TypeVar("F", bound=Callable[..., Any])


def storage_places(config: Config) -> list[Path]:
    """The local folders a writer writes to, the index dir first."""
    places = [config.index.dir]
    if "lancedb" in config.index.sinks and not config.index.object_store:
        places.append(config.lancedb_dir)
    if "qmd" in config.index.sinks:
        places.append(config.qmd_export_dir)
    return list(dict.fromkeys(places))


def names_storage_faults(method: F) -> F:
    """Decorate a method of an object with a ``config``: an exception with a storage cause leaves
    as :class:`StorageFailure` naming the folder (the original as its cause); others as they are."""

    @functools.wraps(method)
    def wrapper(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except StorageFailure:
            raise
        except Exception as exc:
            fault = classify(exc, storage_places(self.config))
            if fault is None:
                raise
            raise StorageFailure(fault) from exc

    return wrapper  # type: ignore[return-value]
