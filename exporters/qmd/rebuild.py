"""A persona's new file set, staged in a hidden folder and swapped in on commit."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from exporters.base import RebuildScope, SinkError
from exporters.qmd.files import (
    _exchange,
    _fsync_dir,
    _rmtree,
    _sink_error,
)
from indexer.core.types import Document

if TYPE_CHECKING:
    from exporters.qmd.exporter import QmdExporter


class QmdRebuild(RebuildScope):
    """Builds a persona's new file set in a hidden staging folder, swapped in on commit.

    Documents go to ``<export_dir>/.rebuild-<safe_persona>-<random>/`` (QMD skips
    dot-folders, :meth:`QmdExporter.paths` does not look there), so they stay
    invisible until :meth:`commit`, which exchanges the staging folder with the
    live persona folder in one ``renameat2(RENAME_EXCHANGE)`` (where that is
    unavailable, renames leave the persona folder missing for microseconds) and
    then removes the old set. Readers and ``qmd update`` see the old set or the new set, never an empty or
    half-built one. :meth:`abort` (or an exception in a ``with`` block) removes
    the staging folder and leaves the live set untouched. A folder a killed
    rebuild left is swept by the exporter (:class:`exporters.qmd.staging.StagingFolders`).

    The staging folder must hold the persona's *whole* new set (sessions and
    memory): whatever is not upserted here is gone after commit.
    """

    def __init__(self, exporter: QmdExporter, persona: str) -> None:
        self._exp = exporter
        self._persona = persona
        self._live = exporter.persona_dir(persona)
        self._staging = exporter.staging.new(self._live.name)
        self._written: set[str] = set()
        self._state = "open"

    @property
    def written(self) -> frozenset[str]:
        return frozenset(self._written)

    def upsert(self, docs: Sequence[Document]) -> None:
        self._require_open()
        try:
            self._staging.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _sink_error("create", self._staging, exc) from exc
        self._exp._write_docs(self._persona, self._staging, docs)
        self._written.update(d.path for d in docs)

    def commit(self) -> None:
        self._require_open()
        exp = self._exp
        try:
            exp.export_dir.mkdir(parents=True, exist_ok=True)
            if not self._staging.exists():
                self._staging.mkdir()  # empty new set
            if self._live.exists():
                if not _exchange(self._staging, self._live):
                    old = exp.staging.new(self._live.name)
                    try:
                        os.rename(self._live, old)
                        try:
                            os.rename(self._staging, self._live)
                        except OSError:
                            os.rename(old, self._live)  # put the live set back
                            raise
                        os.rename(old, self._staging)
                    finally:
                        exp.staging.done(old)
            else:
                os.rename(self._staging, self._live)
            _fsync_dir(exp.export_dir)
        except OSError as exc:
            self._state = "failed"
            raise _sink_error("swap in the rebuilt folder", self._live, exc) from exc
        self._state = "committed"
        exp._dirty = True
        _rmtree(self._staging)  # now holds the old set (if any); the live folder stays, even empty
        exp.staging.done(self._staging)

    def abort(self) -> None:
        if self._state not in ("open", "failed"):
            return  # committed (or already aborted): nothing to undo
        self._state = "aborted"
        _rmtree(self._staging)
        self._exp.staging.done(self._staging)

    def _require_open(self) -> None:
        if self._state != "open":
            raise SinkError(f"qmd: this rebuild of persona {self._persona!r} is already {self._state}")


# ---------------------------------------------------------------------- helpers

