"""The ``qmd`` exporter: documents as markdown files for QMD (see the package docstring)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import structlog

from exporters.base import SinkError
from exporters.qmd.files import (
    _QMD_EXCLUDED_DIRS,
    _STAGING_PREFIX,
    _TMP_RE,
    _atomic_write,
    _fsync_dir,
    _is_safe_segment,
    _list_docs,
    _path_problem,
    _prune_empty_dirs,
    _render,
    _sink_error,
    _strip_header,
)
from exporters.qmd.rebuild import QmdRebuild
from exporters.qmd.staging import StagingFolders
from exporters.qmd.update import (
    UpdateResult,
    run_command,
)
from indexer.core.safe_names import safe_segment
from indexer.core.types import Document


class QmdExporter:
    """Writes documents as markdown files for QMD (see the module docstring)."""

    name = "qmd"
    # QMD has no scopes: whoever runs `qmd search` over the export sees all of it.
    enforces_scopes = False
    # Files are the document text as is: nothing else decides their form.
    fingerprint = "qmd"

    def __init__(
        self,
        export_dir: Path,
        *,
        update_command: Sequence[str] = (),
        update_timeout_s: float = 120,
        logger: Any = None,
    ) -> None:
        self.export_dir = Path(export_dir).absolute()
        self.update_command: tuple[str, ...] = tuple(str(a) for a in update_command)
        self.update_timeout_s = float(update_timeout_s)
        self.log = logger if logger is not None else structlog.get_logger(__name__)
        # True when files changed since the last successful update. Starts True so
        # the first after_batch() of a process catches up on anything missed.
        self._dirty = True
        self.last_update: UpdateResult | None = None
        self._warned_hidden: set[str] = set()
        self.swept_tmp_files = self._sweep_tmp_files()
        self.staging = StagingFolders(self.export_dir, self.log)
        self.swept_staging = self.staging.sweep(why="left by a killed rebuild")

    def _sweep_tmp_files(self) -> int:
        """Remove ``.<name>.<hex>.tmp`` files a killed write left behind.

        The sink has one writer (the index lock), so at open no temp file is
        in use. Staging folders of a crashed rebuild: :class:`StagingFolders`.
        """
        if not self.export_dir.is_dir():
            return 0
        swept = 0
        for dirpath, dirnames, filenames in os.walk(self.export_dir):
            dirnames[:] = [d for d in dirnames if not d.startswith(_STAGING_PREFIX)]
            for name in filenames:
                if _TMP_RE.fullmatch(name):
                    try:
                        os.unlink(os.path.join(dirpath, name))
                        swept += 1
                    except FileNotFoundError:
                        pass
                    except OSError as exc:
                        self.log.warning("qmd.tmp_sweep_failed", file=os.path.join(dirpath, name), error=str(exc))
        if swept:
            self.log.info("qmd.tmp_swept", files=swept, reason="left by a killed write")
        return swept

    # ------------------------------------------------------------------ paths

    def _root(self) -> Path:
        return Path(os.path.realpath(self.export_dir))

    def persona_dir(self, persona: str) -> Path:
        seg = safe_segment(persona)
        if not _is_safe_segment(seg):
            raise SinkError(
                f"qmd: persona {persona!r} maps to the unsafe folder name {seg!r}; "
                "this is a bug in indexer.safe_names.safe_segment"
            )
        return self.export_dir / seg

    def _target(self, base: Path, doc_path: str) -> Path:
        """Absolute file path of ``doc_path`` under ``base``; SinkError if unsafe."""
        problem = _path_problem(doc_path)
        if problem:
            raise SinkError(
                f"qmd: refusing document path {doc_path!r}: {problem}. Document paths must be "
                "relative, '/'-separated segments of [A-Za-z0-9._-] ending in .md"
            )
        target = base.joinpath(*doc_path.split("/"))
        self._check_inside(target.parent, doc_path)
        return target

    def _check_inside(self, directory: Path, what: str) -> None:
        # Lexically the validated segments cannot escape; this also catches
        # symlinks inside the export folder that point elsewhere.
        root = self._root()
        real = Path(os.path.realpath(directory))
        if real != root and root not in real.parents:
            raise SinkError(
                f"qmd: {what!r} would be written to {real}, outside the export folder {root} "
                "(a symlink in the export folder?). Remove the symlink or fix qmd.export_dir"
            )

    def _warn_if_hidden_from_qmd(self, persona_seg: str, doc_path: str) -> None:
        hidden = _QMD_EXCLUDED_DIRS.intersection([persona_seg, *doc_path.split("/")[:-1]])
        key = f"{persona_seg}/{doc_path}"
        if hidden and key not in self._warned_hidden:
            self._warned_hidden.add(key)
            self.log.warning(
                "qmd.path_hidden_from_qmd",
                path=key,
                folder=sorted(hidden)[0],
                hint="QMD never indexes folders named node_modules/vendor/dist/build",
            )

    # --------------------------------------------------------------- protocol

    def upsert(self, persona: str, docs: Sequence[Document]) -> None:
        base = self.persona_dir(persona)
        try:  # the persona's folder is its stored set, kept even when empty (``missing``)
            base.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _sink_error("create", base, exc) from exc
        if self._write_docs(persona, base, docs):
            self._dirty = True

    def _write_docs(self, persona: str, base: Path, docs: Sequence[Document]) -> int:
        written = 0
        dirs: set[Path] = set()
        persona_seg = self.persona_dir(persona).name  # base may be a rebuild's staging folder
        for doc in docs:
            if doc.persona != persona:
                raise SinkError(
                    f"qmd: document {doc.path!r} belongs to persona {doc.persona!r}, "
                    f"not {persona!r}; refusing to export it into another persona's folder"
                )
            target = self._target(base, doc.path)
            self._warn_if_hidden_from_qmd(persona_seg, doc.path)
            data = _render(doc)
            if _atomic_write(target, data, doc.path):
                written += 1
                dirs.add(target.parent)
        for d in dirs:
            _fsync_dir(d)
        return written

    def delete(self, persona: str, paths: Iterable[str]) -> None:
        base = self.persona_dir(persona)
        removed = False
        for p in paths:
            if _path_problem(p):
                self.log.warning("qmd.delete_invalid_path", persona=persona, path=p)
                continue
            target = base.joinpath(*p.split("/"))
            try:
                self._check_inside(target.parent, p)
                target.unlink()
                removed = True
            except FileNotFoundError:
                continue
            except NotADirectoryError:
                continue
            except OSError as exc:
                raise _sink_error("delete", target, exc) from exc
            _prune_empty_dirs(target.parent, stop=base)  # the persona's folder stays, even empty
        if removed:
            self._dirty = True

    def paths(self, persona: str) -> set[str]:
        base = self.persona_dir(persona)
        return _list_docs(base)

    def read(self, persona: str, path: str) -> str | None:
        if _path_problem(path):
            return None
        target = self.persona_dir(persona).joinpath(*path.split("/"))
        try:
            data = target.read_bytes()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as exc:
            raise _sink_error("read", target, exc) from exc
        return _strip_header(data.decode("utf-8", "replace"))

    def rebuild(self, persona: str) -> QmdRebuild:
        return QmdRebuild(self, persona)

    def needs_rebuild(self, persona: str) -> str | None:
        return None  # the export has one layout: the document text

    def missing(self, persona: str) -> str | None:
        try:
            base = self.persona_dir(persona)
        except SinkError as exc:
            return str(exc)
        # an empty folder is an empty set (every session private, say), not a lost one: it is never
        # pruned, so a rebuild of such a persona does not find it gone again on the next pass
        return None if base.is_dir() else f"qmd: the export folder {base} is gone"

    def maintain(self, *, force: bool = False) -> dict[str, Any]:
        """Temp files of killed writes and staging folders of killed rebuilds (both also swept at open)."""
        return {"tmp_removed": self._sweep_tmp_files(),
                "staging_removed": self.staging.sweep(why="left by a killed rebuild")}

    def stats(self, persona: str) -> dict[str, Any]:
        return {"documents": len(self.paths(persona)), "chunks": None}

    def after_batch(self) -> None:
        self.run_update()

    def close(self) -> None:
        return None

    # ----------------------------------------------------------------- update

    def run_update(self, *, force: bool = False) -> UpdateResult:
        """Run ``update_command`` if files changed since the last successful run.

        Never raises: failures are logged as ``qmd.update_failed`` and returned.
        """
        if not self.update_command:
            result = UpdateResult(ok=True, skipped=True, reason="no_command")
        elif not (self._dirty or force):
            result = UpdateResult(ok=True, skipped=True, reason="clean")
            self.log.debug("qmd.update_skipped", reason="nothing changed since the last update")
        else:
            result = run_command(self.update_command, self.export_dir, self.update_timeout_s, self.log)
            if result.ok:
                self._dirty = False
        self.last_update = result
        return result
