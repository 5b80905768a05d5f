"""The export's files: safe paths, rendering, atomic writes, listing, the staging swap."""

from __future__ import annotations

import ctypes
import errno
import os
import re
import secrets
import shutil
from pathlib import Path
from typing import Any

from exporters.base import SinkError
from indexer.core.types import Document

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
_TITLE_MAX = 200


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
        return f"# {title}\n\n{doc.text}".encode()
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

