"""Connecting to the LanceDB folder, error translation, temp-file sweeps, row lookups."""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import lancedb

from exporters.base import SinkError
from exporters.lancedb.location import IndexLocation
from exporters.lancedb.schema import sql_str

log = logging.getLogger("exporters.lancedb")
TMP_SWEEP_AGE_AT_OPEN = timedelta(minutes=3)
TMP_SWEEP_AGE_RUNNING = timedelta(minutes=30)
#: Index cache of a reader's connection: it must hold the indexes of the tables searched, or
#: every query reloads them from disk (a 1M-row table: ~390 MB of IVF_SQ vectors, ~90 MB of
#: FTS and scalar indexes; with 256 MB an indexed persona query at 1M took 215 ms instead
#: of ~35). Memory is taken only as indexes are used. The writer's stays small.
READER_INDEX_CACHE_BYTES = 1 << 30
WRITER_INDEX_CACHE_BYTES = 256 << 20
METADATA_CACHE_BYTES = 64 << 20


def new_session(*, reader: bool, index_cache_bytes: int | None = None):
    """A LanceDB session (its index and metadata caches); None where this lancedb has no such API."""
    try:
        return lancedb.Session(
            index_cache_size_bytes=(index_cache_bytes or READER_INDEX_CACHE_BYTES) if reader else WRITER_INDEX_CACHE_BYTES,
            metadata_cache_size_bytes=METADATA_CACHE_BYTES,
        )
    except Exception:  # pragma: no cover - older/newer Session signature
        return None


def _connect(where: IndexLocation | Path | str, *, reader: bool, session=None) -> lancedb.DBConnection:
    """A connection with its own session, or ``session`` (a reader shares one between the store
    and its local copies: one memory budget)."""
    location = IndexLocation.of(where)
    if session is None:
        session = new_session(reader=reader, index_cache_bytes=location.cache_memory_bytes)
    return location.connect(reader=reader, session=session)


@contextmanager
def _errors(action: str, persona: str | None = None, hint: str = "") -> Iterator[None]:
    try:
        yield
    except SinkError:
        raise
    except Exception as e:
        who = f" for persona {persona!r}" if persona is not None else ""
        msg = f"lancedb: {action}{who} failed: {type(e).__name__}: {e}"
        raise SinkError(msg + (f". {hint}" if hint else ". Nothing was committed by this call; the next sync replays it")) from e


def sweep_tmp_files(db_dir: Path, older_than: timedelta) -> int:
    """Delete ``<table>.lance/data/.tmp*`` left by a killed writer; returns files removed."""
    cutoff = time.time() - older_than.total_seconds()
    removed = 0
    for tmp in Path(db_dir).glob("*.lance/data/.tmp*"):
        try:
            if tmp.lstat().st_mtime < cutoff:
                if tmp.is_dir() and not tmp.is_symlink():
                    shutil.rmtree(tmp, ignore_errors=True)
                else:
                    tmp.unlink()
                removed += 1
        except FileNotFoundError:
            continue
        except OSError as e:
            log.warning("lancedb: cannot remove stale temp file %s: %s", tmp, e)
    return removed


def _now_ms() -> int:
    return int(time.time() * 1000)


def _paths_of(tbl) -> set[str]:
    t = tbl.search().where("chunk_index = 0").select(["path"]).limit(None).to_arrow()
    return set(t.column("path").to_pylist())


def _read_doc_row(tbl, path: str) -> dict | None:
    """Chunk 0 of a document: its text and whose it is (``source``, ``session``, ``persona``, ``turn_id``)."""
    rows = (tbl.search().where(f"id = {sql_str(path + '#0')}")
            .select(["doc_text", "source", "session", "persona", "turn_id"]).limit(1).to_list())
    return rows[0] if rows else None


def _read_doc(tbl, path: str) -> str | None:
    rows = tbl.search().where(f"id = {sql_str(path + '#0')}").select(["doc_text"]).limit(1).to_list()
    return rows[0]["doc_text"] if rows else None
