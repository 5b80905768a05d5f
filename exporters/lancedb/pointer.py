"""``active.json``: which table is live for each persona, replaced atomically."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from exporters.base import SinkError

ACTIVE_FILE = "active.json"
ACTIVE_FORMAT = 1


def _empty_active() -> dict[str, Any]:
    return {"format": ACTIVE_FORMAT, "personas": {}, "retired": []}


def _read_active(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return _empty_active()
    except (OSError, ValueError) as e:
        raise SinkError(
            f"lancedb: cannot read the table pointer {path}: {e}. It is written atomically, so this means "
            f"outside damage: restore it, or delete it and run `ledger-indexer reindex` to rebuild every persona"
        ) from e
    if not isinstance(data, dict) or data.get("format") != ACTIVE_FORMAT:
        raise SinkError(f"lancedb: {path} has an unknown format; delete it and run `ledger-indexer reindex`")
    data.setdefault("personas", {})
    data.setdefault("retired", [])
    return data


def _write_active(path: Path, data: dict[str, Any]) -> None:
    raw = (json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass")
    fd, tmp = tempfile.mkstemp(prefix=".active.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


class _ActivePointer:
    """Reads ``active.json``, re-parsing only when the file changed (inode/mtime/size)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._key: tuple[int, int, int] | None = None
        self._data: dict[str, Any] = _empty_active()
        self._lock = threading.Lock()

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
            return (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            return None
        except OSError as e:  # the index folder itself is gone or replaced
            raise SinkError(f"lancedb: cannot read the table pointer {self.path}: {e}. Check that the index "
                            "folder exists and is a readable directory; nothing was written") from e

    def written(self, data: dict[str, Any]) -> None:
        """Record our own write, so the next :meth:`get` does not re-parse it."""
        with self._lock:
            self._data, self._key = data, self._stat()

    def get(self) -> dict[str, Any]:
        key = self._stat()
        with self._lock:
            if key is None:
                self._key, self._data = None, _empty_active()
            elif key != self._key:
                self._data = _read_active(self.path)
                self._key = key
            return self._data

