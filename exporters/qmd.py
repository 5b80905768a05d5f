"""QMD sink: export every document as a markdown file for QMD's BM25 search.

Layout (ARCHITECTURE.md, "Document contract")::

    <export_dir>/<safe_persona>/sessions/<safeLabel>/turns/<turnId>.md
    <export_dir>/<safe_persona>/sessions/<safeLabel>/compactions/<turnId>.md
    <export_dir>/<safe_persona>/memory/...

``<safe_persona>`` is :func:`indexer.safe_names.safe_segment` of the ledger's
persona id; the rest is ``Document.path``, which is already a safe index path and
is validated again here (no absolute paths, no ``..``, every segment of
``[A-Za-z0-9._-]`` and not starting with a dot).

Each file is ``# <title>``, a blank line, then ``Document.text``. QMD takes the
first ``#``/``##`` line as the title (weight 4.0 in its BM25), so the heading
keeps titles meaningful; :meth:`QmdExporter.read` strips it again so that every
sink returns the same text. QMD's line numbers are therefore
:data:`HEADER_LINES` higher than the document's own.

QMD ignores every path segment that starts with a dot, so temporary files
(``.<name>.<random>.tmp``) and rebuild staging folders (``.rebuild-*``) are
invisible to it, and :meth:`QmdExporter.paths` skips them too.

QMD only sees changes after ``qmd update``; configure ``update_command`` (for
example ``["qmd", "update"]``) and the daemon runs it from :meth:`after_batch`.
A failing update is logged, never raised: the files are the export, QMD's index
catches up on the next successful update.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from exporters.base import SinkError
from indexer.core.safe_names import safe_segment
from indexer.core.types import Document

__all__ = ["HEADER_LINES", "QmdExporter", "QmdRebuild", "UpdateResult"]

# Lines added before Document.text in every file: "# <title>" and a blank line.
HEADER_LINES = 2

_SEGMENT = re.compile(r"[A-Za-z0-9._-]{1,255}")
# QMD's scanner always skips folders with these names (store.js excludeDirs;
# the dot-prefixed ones are rejected anyway). Files below them are exported but
# never searchable in QMD, so we warn about them.
_QMD_EXCLUDED_DIRS = frozenset({"node_modules", "vendor", "dist", "build"})
_TMP_SUFFIX = ".tmp"
# ".<file name>.<12 hex>.tmp", as _atomic_write names its temp files.
_TMP_RE = re.compile(r"\..+\.[0-9a-f]{12}\.tmp")
_STAGING_PREFIX = ".rebuild-"
_STDERR_TAIL = 2000
_TERM_GRACE_S = 2.0
_TITLE_MAX = 200


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

    def _sweep_tmp_files(self) -> int:
        """Remove ``.<name>.<hex>.tmp`` files a killed write left behind.

        The sink has one writer (the index lock), so at open no temp file is
        in use. Staging folders of a crashed rebuild are the rebuild's to clean.
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
            _prune_empty_dirs(target.parent, stop=self.export_dir)
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

    def maintain(self, *, force: bool = False) -> dict[str, Any]:
        """Temp files of killed writes (also swept at open)."""
        return {"tmp_removed": self._sweep_tmp_files()}

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
            result = self._run_command()
            if result.ok:
                self._dirty = False
        self.last_update = result
        return result

    def _run_command(self) -> UpdateResult:
        cmd = list(self.update_command)
        started = time.monotonic()
        fields: dict[str, Any] = {"command": cmd, "cwd": str(self.export_dir)}
        try:
            self.export_dir.mkdir(parents=True, exist_ok=True)
            proc = subprocess.Popen(
                cmd,
                cwd=self.export_dir,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # so a timeout can kill the whole process group
            )
        except FileNotFoundError as exc:
            return self._update_failed(
                "not_found", started, fields, stderr=str(exc),
                hint="the update command's executable was not found; fix qmd.update_command",
            )
        except OSError as exc:
            return self._update_failed("os_error", started, fields, stderr=str(exc),
                                       hint="could not start the update command")
        try:
            _out, err = proc.communicate(timeout=self.update_timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            err = _drain(proc)
            return self._update_failed(
                "timeout", started, fields, stderr=_tail(err), returncode=proc.returncode,
                timeout_s=self.update_timeout_s,
                hint="the update command was killed; QMD's index is stale until the next update",
            )
        if proc.returncode != 0:
            return self._update_failed(
                "exit_code", started, fields, stderr=_tail(err), returncode=proc.returncode,
                hint="QMD's index is stale until the next successful update",
            )
        duration = time.monotonic() - started
        self.log.info("qmd.update_ok", duration_ms=round(duration * 1000), **fields)
        return UpdateResult(ok=True, returncode=0, duration_s=duration)

    def _update_failed(
        self,
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
        self.log.warning(
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


class QmdRebuild:
    """Builds a persona's new file set in a hidden staging folder, swapped in on commit.

    Documents go to ``<export_dir>/.rebuild-<safe_persona>-<random>/`` (QMD skips
    dot-folders, :meth:`QmdExporter.paths` does not look there), so they stay
    invisible until :meth:`commit`, which exchanges the staging folder with the
    live persona folder in one ``renameat2(RENAME_EXCHANGE)`` (where that is
    unavailable, renames leave the persona folder missing for microseconds) and
    then removes the old set. Readers and ``qmd update`` see the old set or the new set, never an empty or
    half-built one. :meth:`abort` (or an exception in a ``with`` block) removes
    the staging folder and leaves the live set untouched.

    The staging folder must hold the persona's *whole* new set (sessions and
    memory): whatever is not upserted here is gone after commit.
    """

    def __init__(self, exporter: QmdExporter, persona: str) -> None:
        self._exp = exporter
        self._persona = persona
        self._live = exporter.persona_dir(persona)
        self._clean_leftovers()
        self._staging = exporter.export_dir / f"{_STAGING_PREFIX}{self._live.name}-{secrets.token_hex(4)}"
        self._written: set[str] = set()
        self._state = "open"

    def _clean_leftovers(self) -> None:
        # Staging folders of this persona left by a crash (single writer: none is live).
        prefix = f"{_STAGING_PREFIX}{self._live.name}-"
        try:
            entries = list(self._exp.export_dir.iterdir())
        except FileNotFoundError:
            return
        except OSError as exc:
            raise _sink_error("list", self._exp.export_dir, exc) from exc
        for entry in entries:
            if entry.name.startswith(prefix) and len(entry.name) == len(prefix) + 8:
                _rmtree(entry)

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
                    old = exp.export_dir / f"{_STAGING_PREFIX}{self._live.name}-{secrets.token_hex(4)}"
                    os.rename(self._live, old)
                    try:
                        os.rename(self._staging, self._live)
                    except OSError:
                        os.rename(old, self._live)  # put the live set back
                        raise
                    os.rename(old, self._staging)
            else:
                os.rename(self._staging, self._live)
            _fsync_dir(exp.export_dir)
        except OSError as exc:
            self._state = "failed"
            raise _sink_error("swap in the rebuilt folder", self._live, exc) from exc
        self._state = "committed"
        exp._dirty = True
        _rmtree(self._staging)  # now holds the old set (if any)
        _prune_empty_dirs(self._live, stop=exp.export_dir)  # only if the new set is empty

    def abort(self) -> None:
        if self._state not in ("open", "failed"):
            return  # committed (or already aborted): nothing to undo
        self._state = "aborted"
        _rmtree(self._staging)

    def _require_open(self) -> None:
        if self._state != "open":
            raise SinkError(f"qmd: this rebuild of persona {self._persona!r} is already {self._state}")

    def __enter__(self) -> QmdRebuild:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None:
            self.abort()
        elif self._state == "open":
            self.commit()


# ---------------------------------------------------------------------- helpers


def _is_safe_segment(seg: str) -> bool:
    return _SEGMENT.fullmatch(seg) is not None and not seg.startswith(".")


def _path_problem(doc_path: str) -> str | None:
    if not isinstance(doc_path, str) or not doc_path:
        return "empty path"
    if doc_path.startswith("/"):
        return "absolute path"
    if not doc_path.endswith(".md"):
        return "not a .md file"
    for seg in doc_path.split("/"):
        if seg in ("", ".", ".."):
            return f"segment {seg!r} is not allowed"
        if seg.startswith("."):
            return f"segment {seg!r} starts with a dot (hidden from QMD)"
        if _SEGMENT.fullmatch(seg) is None:
            return f"segment {seg!r} has characters outside [A-Za-z0-9._-] or is too long"
    return None


def _render(doc: Document) -> bytes:
    title = " ".join(str(doc.title).split())[:_TITLE_MAX]
    if not title:
        title = doc.path.rsplit("/", 1)[-1][: -len(".md")]
    try:
        return f"# {title}\n\n{doc.text}".encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SinkError(
            f"qmd: document {doc.path!r} contains text that is not valid UTF-8 ({exc.reason}); "
            "documents must be valid text before they reach the sinks"
        ) from exc


def _strip_header(content: str) -> str:
    if not content.startswith("# "):
        return content  # not written by us; return as is
    _first, _sep, rest = content.partition("\n")
    return rest[1:] if rest.startswith("\n") else rest


def _atomic_write(target: Path, data: bytes, what: str) -> bool:
    """Write ``data`` to ``target`` atomically; False if it already held exactly that."""
    try:
        with open(target, "rb") as fh:
            if os.fstat(fh.fileno()).st_size == len(data) and fh.read() == data:
                return False
    except (FileNotFoundError, NotADirectoryError):
        pass
    except IsADirectoryError as exc:
        raise SinkError(f"qmd: cannot write {what!r}: {target} is a directory; remove it") from exc
    except OSError as exc:
        raise _sink_error("read", target, exc) from exc

    tmp = target.parent / f".{target.name}.{secrets.token_hex(6)}{_TMP_SUFFIX}"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)  # umask applies
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise _sink_error("write", target, exc) from exc
    return True


def _list_docs(base: Path) -> set[str]:
    found: set[str] = set()
    if not base.is_dir():
        return found

    def onerror(exc: OSError) -> None:
        raise _sink_error("list", Path(exc.filename or base), exc) from exc

    for dirpath, dirnames, filenames in os.walk(base, onerror=onerror):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        rel = Path(dirpath).relative_to(base).as_posix()
        for name in filenames:
            if name.endswith(".md") and not name.startswith("."):
                found.add(name if rel == "." else f"{rel}/{name}")
    return found


def _prune_empty_dirs(directory: Path, *, stop: Path) -> None:
    """Remove ``directory`` and its parents while empty, never ``stop`` or above."""
    stop = stop.absolute()
    d = directory.absolute()
    while d != stop and stop in d.parents:
        try:
            d.rmdir()
        except OSError:
            return  # not empty (or gone, or not ours to remove): stop here
        d = d.parent


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _rmtree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_renameat2: Any = None


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two directories (Linux renameat2). False if unsupported."""
    global _renameat2
    if _renameat2 is None:
        try:
            fn = ctypes.CDLL(None, use_errno=True).renameat2
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
            fn.restype = ctypes.c_int
            _renameat2 = fn
        except (AttributeError, OSError):
            _renameat2 = False
    if _renameat2 is False:
        return False
    rc = _renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


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


def _sink_error(action: str, path: Path, exc: OSError) -> SinkError:
    code = exc.errno
    if code in (errno.EACCES, errno.EPERM):
        advice = "permission denied: make the export folder writable by the daemon's user"
    elif code in (errno.ENOSPC, errno.EDQUOT):
        advice = "the disk (or quota) is full: free space, the batch is retried on the next sync"
    elif code == errno.EROFS:
        advice = "the file system is read-only: remount it read-write or change qmd.export_dir"
    elif code == errno.ENAMETOOLONG:
        advice = "the path is too long for the file system: use a shorter qmd.export_dir"
    else:
        advice = f"{exc.strerror or exc}; the batch is retried on the next sync"
    name = errno.errorcode.get(code, "") if code else ""
    return SinkError(f"qmd: could not {action} {path}: {advice} [{name or type(exc).__name__}]")
