"""The table pointer: which table is live for each persona, replaced atomically.

Local folder: ``active.json`` (temp file + fsync + ``os.replace``), re-read when
its inode/mtime/size changes. Object storage: the one-row Lance table
``_active`` in the same database (the same JSON document in its ``data``
column); each change is one Lance commit (an overwrite: atomic, protected by the
store's conditional PUT), read by readers at most every ``refresh``."""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
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

    def save(self, data: dict[str, Any]) -> None:
        """Replace the pointer with ``data`` (atomically)."""
        _write_active(self.path, data)
        self.written(data)

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



POINTER_TABLE = "_active"


def _pointer_rows(data: dict[str, Any]):
    import pyarrow as pa

    raw = json.dumps(data, sort_keys=True, ensure_ascii=False)
    return pa.table({"format": pa.array([ACTIVE_FORMAT], pa.int32()), "data": pa.array([raw], pa.string())})


def _parse_pointer(rows: list[dict[str, Any]], where: str) -> dict[str, Any]:
    if not rows:
        return _empty_active()
    try:
        data = json.loads(rows[0]["data"])
    except (KeyError, TypeError, ValueError) as e:
        raise SinkError(f"lancedb: the table pointer {where} is unreadable: {e}; run `ledger-indexer reindex` "
                        "on the writer to rebuild every persona") from e
    if not isinstance(data, dict) or data.get("format") != ACTIVE_FORMAT:
        raise SinkError(f"lancedb: the table pointer {where} has an unknown format; run `ledger-indexer reindex` "
                        "on the writer")
    data.setdefault("personas", {})
    data.setdefault("retired", [])
    return data


class TablePointer:
    """The pointer as the one-row Lance table ``_active`` (object storage).

    The writer reads it once and then keeps its own copy (one writer per index,
    enforced by the lease); a reader re-reads it when ``refresh`` has passed.
    ``before_commit`` runs before every write (the writer's lease check)."""

    def __init__(self, db, *, reader: bool, refresh_s: float = 0.0, where: str = POINTER_TABLE,
                 before_commit=None) -> None:
        self._db = db
        self._reader = reader
        self._refresh_s = refresh_s
        self._where = where
        self._before_commit = before_commit
        self._tbl = None
        self._data: dict[str, Any] = _empty_active()
        self._read_at: float | None = None
        self._lock = threading.Lock()

    def _table(self):
        if self._tbl is None:
            try:
                self._tbl = self._db.open_table(POINTER_TABLE)
            except ValueError:  # not created yet: no persona has a table
                return None
            except Exception as e:
                if "not found" in str(e).lower() or "does not exist" in str(e).lower():
                    return None
                raise SinkError(f"lancedb: cannot open the table pointer {self._where}: {e}") from e
        return self._tbl

    def _read(self) -> dict[str, Any]:
        tbl = self._table()
        if tbl is None:
            return _empty_active()
        try:
            rows = tbl.to_arrow().to_pylist()
        except Exception as e:
            raise SinkError(f"lancedb: cannot read the table pointer {self._where}: {e}") from e
        return _parse_pointer(rows, self._where)

    def get(self) -> dict[str, Any]:
        with self._lock:
            now = time.monotonic()
            if self._read_at is None or (self._reader and now - self._read_at >= self._refresh_s):
                self._data = self._read()
                self._read_at = now
            return self._data

    def save(self, data: dict[str, Any]) -> None:
        if self._reader:
            raise SinkError("lancedb: a reader cannot write the table pointer")
        with self._lock:
            if self._before_commit is not None:
                self._before_commit()
            rows = _pointer_rows(data)
            tbl = self._table()
            if tbl is None:
                try:
                    self._tbl = self._db.create_table(POINTER_TABLE, rows, mode="create")
                except ValueError:  # created meanwhile (another writer would have to hold the lease)
                    self._table().add(rows, mode="overwrite")
            else:
                tbl.add(rows, mode="overwrite")
            self._data, self._read_at = data, time.monotonic()

    def written(self, data: dict[str, Any]) -> None:
        with self._lock:
            self._data, self._read_at = data, time.monotonic()

    def maintain(self) -> None:
        """Drop old versions (each save is one)."""
        from datetime import timedelta

        tbl = self._table()
        if tbl is not None:
            tbl.optimize(cleanup_older_than=timedelta(minutes=10))
