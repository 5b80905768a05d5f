"""The hidden folders a rebuild stages a persona's new file set in, and their sweep.

A rebuild killed mid-way (kill -9, power loss) leaves its ``.rebuild-<persona>-<hex>/``
folder behind: text of sessions that may since have been deleted or made private,
kept on disk where no sync pass looks. They are swept when the exporter opens and
at each maintenance, never while a rebuild of this process still writes into one
(the daemon's maintenance runs beside its reindex job).
"""

from __future__ import annotations

import os
import re
import secrets
import threading
from pathlib import Path
from typing import Any

from exporters.qmd.files import _STAGING_PREFIX, _rmtree

#: ``.rebuild-<safe persona>-<8 hex>``, as :meth:`StagingFolders.new` names them.
_STAGING_RE = re.compile(re.escape(_STAGING_PREFIX) + r".+-[0-9a-f]{8}")


class StagingFolders:
    """Names the staging folders of one export folder, knows which are in use, sweeps the rest."""

    def __init__(self, export_dir: Path, log: Any) -> None:
        self.export_dir = export_dir
        self.log = log
        self._lock = threading.Lock()
        self._in_use: set[str] = set()

    def new(self, live_name: str) -> Path:
        """A fresh staging folder name for the persona folder ``live_name``, in use until :meth:`done`."""
        with self._lock:
            name = f"{_STAGING_PREFIX}{live_name}-{secrets.token_hex(4)}"
            self._in_use.add(name)
        return self.export_dir / name

    def done(self, folder: Path) -> None:
        with self._lock:
            self._in_use.discard(folder.name)

    def sweep(self, *, why: str) -> int:
        """Remove the staging folders no rebuild of this process uses (one writer: the index lock,
        so no other process stages here). Returns how many were removed; never raises (logged)."""
        try:
            entries = list(os.scandir(self.export_dir))
        except FileNotFoundError:
            return 0
        except OSError as exc:
            self.log.warning("qmd.staging_sweep_failed", folder=str(self.export_dir), error=str(exc))
            return 0
        removed = files = 0
        with self._lock:  # a rebuild starting meanwhile waits for its name: never swept half-made
            for entry in entries:
                if not _STAGING_RE.fullmatch(entry.name) or entry.name in self._in_use:
                    continue
                if not entry.is_dir(follow_symlinks=False):
                    continue
                files += sum(len(names) for _d, _s, names in os.walk(entry.path))
                _rmtree(Path(entry.path))
                if os.path.lexists(entry.path):
                    self.log.warning("qmd.staging_sweep_failed", folder=entry.path,
                                     error="could not remove it: check the export folder's permissions")
                else:
                    removed += 1
        if removed:
            self.log.info("qmd.staging_swept", folders=removed, files=files, reason=why)
        return removed
