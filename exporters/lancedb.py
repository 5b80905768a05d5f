"""LanceDB sink: chunks + vectors + full-text index, one table per persona.

Layout of ``db_dir`` (``<index_dir>/lancedb``)::

    active.json                     persona -> live table (atomic pointer, see below)
    <table>.lance/                  one Lance dataset per persona and generation

Table names
-----------
Persona ids are arbitrary strings, so a table is named
:func:`table_name` ``(persona, generation)`` = ``mem_<slug>_<sha256(persona)[:12]>_g<generation>``
(``slug``: up to 24 of ``[a-z0-9-]`` for humans; the hash makes it unique and
safe). ``active.json`` maps each persona to its live table; it is replaced
atomically (temp file + fsync + ``os.replace``) and read by readers at query
time, which is how a forced reindex switches tables without downtime::

    {"format": 1,
     "personas": {"<persona id>": {"table": "mem_atlas_1a2b3c4d5e6f_g2", "generation": 2,
                                   "fingerprint": "<embedder fingerprint>", "dim": 384,
                                   "chunking": "lines-v1/200/40", "updated_ms": 1732170000000}},
     "retired":  [{"table": "mem_atlas_1a2b3c4d5e6f_g1", "persona": "<persona id>", "retired_ms": ...}]}

Retired tables are dropped by :meth:`LanceSink.maintain` once ``retire_grace``
(10 min) has passed, so a reader that read the old pointer just before a swap
finishes its query.

Row schema (one row per chunk; ``search.py`` queries this)
-----------------------------------------------------------
=============  ==========================  ==================================================
column         type                        meaning
=============  ==========================  ==================================================
id             string, not null            ``"<path>#<chunk_index>"`` (merge key, BTREE)
path           string, not null            document index path (BTREE)
chunk_index    int32, not null             0..n-1 within the document
source         string, not null            ``sessions`` | ``memory`` (BITMAP)
persona        string, not null            ledger ``persona_id``, raw (constant per table)
session        string, nullable            ledger session label, raw; null for memory (BITMAP)
turn_id        string, nullable            ledger turn id
kind           string, not null            ``turn`` | ``compaction`` | ``memory`` (BITMAP)
start_line     int32, not null             1-based first line of the chunk in the document text
end_line       int32, not null             1-based last line (inclusive)
text           string, not null            the chunk's text (FTS-indexed; snippet source)
doc_text       string, not null            full document text on chunk 0, ``""`` elsewhere
title          string, not null            document title on chunk 0, ``""`` elsewhere
timestamp_ms   int64, nullable             turn completion time (ms since epoch) (BTREE)
turn_seq       int32, nullable             the turn's position in its session's thread; null for memory
content_hash   string, not null            ``Document.content_hash`` (same on every chunk)
vector         fixed_size_list<float32>[dim]  L2-normalised embedding of ``text`` without role labels (``embedding_text``)
=============  ==========================  ==================================================

Indexes: FTS on ``text`` (``simple`` tokenizer, English stemming, stop words,
lower-case, ASCII folding, ``with_position=False``: phrase queries in quotes
are *not* supported, pass plain terms or ``MatchQuery``), BTREE on ``id`` and
``path`` and ``timestamp_ms`` (the date prefilter of search), BITMAP on ``session``, ``kind`` and ``source``. No vector index: a
flat scan is ~50 ms at 100k rows and prefiltered queries are a few ms
(research/lancedb.md §4). Vectors are unit length: use ``distance_type``
``cosine`` (or ``l2``/``dot``; they rank identically).

Chunks embed the document *body* only (``Document.body_start_line`` on), so
forks whose headers differ share embeddings through the cache; line numbers
refer to the whole ``Document.text``. The full text is stored once, in chunk
0's ``doc_text``: reassembling it from overlapping, edge-trimmed, possibly
split chunks would be fragile, and the header is in no chunk.

Writes
------
``upsert`` de-duplicates the batch by path (last wins), embeds the chunks and
applies them with one ``merge_insert("id")`` per 500 documents:
update matched, insert new, and ``when_not_matched_by_source_delete("path IN
(...)")`` removes the chunks a shrunken document no longer has, all in one
atomic commit. A process killed mid-write leaves the table at its previous
version (readable); replaying the batch converges. Partial ``data/.tmp*``
files such a kill leaves are swept at open (and by ``maintain`` when older
than 30 min). ``maintain()`` runs ``optimize(cleanup_older_than=10 min)``; it
also runs by itself every ``optimize_every`` commits or when a table has more
than ``small_fragment_limit`` small fragments.

Readers in other processes use :func:`open_reader` (``read_consistency_interval=0``).
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import FTS, Bitmap, BTree

from exporters.base import SinkError
from indexer.chunking import (
    CHUNKING_VERSION, DEFAULT_MAX_TOKENS, DEFAULT_OVERLAP_TOKENS, chunk_document, embedding_text,
)
from indexer.embeddings import Embedder
from indexer.types import Chunk, Document

log = logging.getLogger(__name__)

ACTIVE_FILE = "active.json"
#: Version of the table's columns (2: ``turn_seq``); a table of another version is rebuilt.
SCHEMA_VERSION = 2
ACTIVE_FORMAT = 1
TABLE_PREFIX = "mem_"
#: Documents per merge_insert commit (bounds the ``path IN (...)`` list).
MERGE_BATCH_DOCS = 500
#: Paths per ``delete`` / lookup statement.
SQL_IN_CHUNK = 500
TMP_SWEEP_AGE_AT_OPEN = timedelta(minutes=3)
TMP_SWEEP_AGE_RUNNING = timedelta(minutes=30)

FTS_CONFIG = dict(
    with_position=False,
    base_tokenizer="simple",
    language="English",
    lower_case=True,
    stem=True,
    remove_stop_words=True,
    ascii_folding=True,
)
#: column -> index config factory; index names are lancedb's default ``<column>_idx``.
INDEXES: dict[str, Any] = {
    "text": lambda: FTS(**FTS_CONFIG),
    "id": BTree,
    "path": BTree,
    "timestamp_ms": BTree,
    "session": Bitmap,
    "kind": Bitmap,
    "source": Bitmap,
}

_SURROGATES = re.compile("[\ud800-\udfff]")


def _clean(s: str) -> str:
    """Valid UTF-8 for Arrow and the SQL parser: lone surrogates become U+FFFD."""
    return _SURROGATES.sub("\ufffd", s) if _SURROGATES.search(s) else s


def sql_str(s: str) -> str:
    """A SQL string literal for LanceDB filters: ``'`` doubled, nothing else special.

    LanceDB (DataFusion) string literals have no backslash escapes, so only
    the quote needs escaping; NUL, newlines, backslashes, ``%``/``_`` and
    unicode pass through verbatim (verified against lancedb 0.40).
    """
    if not isinstance(s, str):
        raise TypeError(f"sql_str expects str, got {type(s).__name__}")
    return "'" + _clean(s).replace("'", "''") + "'"


def sql_in(column: str, values: Iterable[str]) -> str:
    """``column IN ('a','b',...)`` with escaped literals (caller keeps lists <= 500)."""
    vals = list(values)
    if not vals:
        return "false"
    return f"{column} IN ({', '.join(sql_str(v) for v in vals)})"


def _persona_hash(persona: str) -> str:
    return hashlib.sha256(persona.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def table_prefix(persona: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", persona.lower()).strip("-")[:24].strip("-") or "p"
    return f"{TABLE_PREFIX}{slug}_{_persona_hash(persona)}_g"


def table_name(persona: str, generation: int) -> str:
    """Deterministic, safe LanceDB table name of a persona's ``generation``."""
    if generation < 1:
        raise ValueError("generation starts at 1")
    return f"{table_prefix(persona)}{generation}"


def _generation_of(name: str, persona: str) -> int | None:
    prefix = table_prefix(persona)
    if name.startswith(prefix) and name[len(prefix) :].isdigit():
        return int(name[len(prefix) :])
    return None


def make_schema(dim: int, meta: dict[str, str] | None = None) -> pa.Schema:
    fields = [
        pa.field("id", pa.string(), nullable=False),
        pa.field("path", pa.string(), nullable=False),
        pa.field("chunk_index", pa.int32(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("persona", pa.string(), nullable=False),
        pa.field("session", pa.string(), nullable=True),
        pa.field("turn_id", pa.string(), nullable=True),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("start_line", pa.int32(), nullable=False),
        pa.field("end_line", pa.int32(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("doc_text", pa.string(), nullable=False),
        pa.field("title", pa.string(), nullable=False),
        pa.field("timestamp_ms", pa.int64(), nullable=True),
        pa.field("turn_seq", pa.int32(), nullable=True),
        pa.field("content_hash", pa.string(), nullable=False),
        pa.field("vector", pa.list_(pa.float32(), dim), nullable=False),
    ]
    md = {b"ledger_indexer": json.dumps(meta or {}, sort_keys=True).encode()} if meta else None
    return pa.schema(fields, metadata=md)


#: Columns worth selecting in search results (never ``vector``/``doc_text``).
RESULT_COLUMNS = [
    "id", "path", "chunk_index", "source", "persona", "session", "turn_id", "kind",
    "start_line", "end_line", "text", "timestamp_ms", "turn_seq",
]


# --------------------------------------------------------------------------- pointer file


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


# --------------------------------------------------------------------------- stats


@dataclass(frozen=True, slots=True)
class SinkStats:
    persona: str
    table: str | None
    generation: int | None
    chunks: int
    documents: int
    fragments: int
    small_fragments: int
    version: int | None
    unindexed_rows: int
    total_bytes: int
    fingerprint: str | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------- reader


def _connect(db_dir: Path, *, reader: bool) -> lancedb.DBConnection:
    kwargs: dict[str, Any] = {}
    if reader:
        kwargs["read_consistency_interval"] = timedelta(0)
    try:
        kwargs["session"] = lancedb.Session(
            index_cache_size_bytes=256 << 20, metadata_cache_size_bytes=64 << 20
        )
    except Exception:  # pragma: no cover - older/newer Session signature
        pass
    return lancedb.connect(str(db_dir), **kwargs)


class LanceReader:
    """Read-only access for search, from any process.

    Re-reads ``active.json`` at every :meth:`active_table` call (a stat when
    unchanged) and opens tables with ``read_consistency_interval=0``, so every
    query sees the latest commit and a rebuild's swap at once.
    """

    def __init__(self, db_dir: Path | str) -> None:
        self.db_dir = Path(db_dir)
        self._db = _connect(self.db_dir, reader=True)
        self._pointer = _ActivePointer(self.db_dir / ACTIVE_FILE)
        self._tables: dict[str, Any] = {}
        self._lock = threading.Lock()

    def personas(self) -> list[str]:
        return sorted(self._pointer.get()["personas"])

    def meta(self, persona: str) -> dict[str, Any] | None:
        entry = self._pointer.get()["personas"].get(persona)
        return dict(entry) if entry else None

    def active_table(self, persona: str):
        """The persona's live ``lancedb.table.Table``, or None when it has no index yet."""
        entry = self._pointer.get()["personas"].get(persona)
        if not entry:
            return None
        name = entry["table"]
        with self._lock:
            tbl = self._tables.get(name)
            if tbl is None:
                try:
                    tbl = self._db.open_table(name)
                except Exception as e:
                    raise SinkError(
                        f"lancedb: the live table {name} of persona {persona!r} cannot be opened: {e}. "
                        f"Run `ledger-indexer reindex --persona {persona}`"
                    ) from e
                live = {e["table"] for e in self._pointer.get()["personas"].values()}
                for old in [n for n in self._tables if n not in live]:
                    del self._tables[old]
                self._tables[name] = tbl
            return tbl

    def close(self) -> None:
        with self._lock:
            self._tables.clear()


def open_reader(db_dir: Path | str) -> LanceReader:
    return LanceReader(db_dir)


# --------------------------------------------------------------------------- sink


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


class LanceSink:
    """The ``lancedb`` exporter. Construct it only in the process holding the writer lock."""

    name = "lancedb"
    enforces_scopes = True  # every read goes through indexer.search's scope filter

    def __init__(
        self,
        db_dir: Path | str,
        embedder: Embedder,
        *,
        chunk_max_tokens: int | None = None,
        chunk_overlap: int = DEFAULT_OVERLAP_TOKENS,
        optimize_every: int = 50,
        small_fragment_limit: int = 50,
        cleanup_older_than: timedelta = timedelta(minutes=10),
        retire_grace: timedelta = timedelta(minutes=10),
    ) -> None:
        self.db_dir = Path(db_dir)
        self.embedder = embedder
        window = int(embedder.max_tokens) - 2  # [CLS] + [SEP]
        self.chunk_max_tokens = max(8, min(chunk_max_tokens or DEFAULT_MAX_TOKENS, window))
        self.chunk_overlap = max(0, min(chunk_overlap, self.chunk_max_tokens // 2))
        self.chunking = f"{CHUNKING_VERSION}/{self.chunk_max_tokens}/{self.chunk_overlap}"
        #: What this sink's index depends on (part of the state DB's index metadata):
        #: a change of model, dimension or chunking means a rebuild.
        self.fingerprint = f"lancedb:{embedder.fingerprint}:d{int(embedder.dim)}:{self.chunking}:s{SCHEMA_VERSION}"
        self.optimize_every = optimize_every
        self.small_fragment_limit = small_fragment_limit
        self.cleanup_older_than = cleanup_older_than
        self.retire_grace = retire_grace
        self.commits = 0
        self.optimizations = 0
        self._lock = threading.RLock()
        self._tables: dict[str, Any] = {}
        self._since_optimize: dict[str, int] = {}
        self._building: set[str] = set()
        with _errors("opening the database", hint=f"check that {self.db_dir} is a writable directory"):
            self.db_dir.mkdir(parents=True, exist_ok=True)
            swept = sweep_tmp_files(self.db_dir, TMP_SWEEP_AGE_AT_OPEN)
            if swept:
                log.warning("lancedb: removed %d stale temp files left by a killed writer", swept)
            self._db = _connect(self.db_dir, reader=False)
        self._active_path = self.db_dir / ACTIVE_FILE
        self._pointer = _ActivePointer(self._active_path)
        self._pointer.get()  # fail early on a damaged pointer file
        orphans = self._drop_orphans(0)
        if orphans:
            log.warning("lancedb: dropped %d table(s) of a build killed before its switch: %s",
                        len(orphans), ", ".join(orphans))

    # ------------------------------------------------------------------ tables

    def _meta(self) -> dict[str, Any]:
        return {
            "fingerprint": self.embedder.fingerprint,
            "dim": int(self.embedder.dim),
            "chunking": self.chunking,
            "schema": SCHEMA_VERSION,
        }

    def _open(self, name: str):
        tbl = self._tables.get(name)
        if tbl is None:
            tbl = self._db.open_table(name)
            self._tables[name] = tbl
        return tbl

    def _create(self, name: str):
        meta = self._meta()
        tbl = self._db.create_table(name, schema=make_schema(int(self.embedder.dim), {k: str(v) for k, v in meta.items()}), mode="overwrite")
        self._ensure_indexes(tbl)
        self._tables[name] = tbl
        return tbl

    @staticmethod
    def _ensure_indexes(tbl) -> None:
        have = {tuple(ix.columns) for ix in tbl.list_indices()}
        for col, cfg in INDEXES.items():
            if (col,) not in have:
                tbl.create_index(col, config=cfg(), replace=True)

    def _table_names(self) -> list[str]:
        out: list[str] = []
        page = None
        while True:
            resp = self._db.list_tables(page_token=page)
            out.extend(resp.tables)
            page = resp.page_token
            if not page:
                return out

    @property
    def _active(self) -> dict[str, Any]:
        """The pointer file's content; re-read only when another process replaced it."""
        return self._pointer.get()

    def _save_active(self, data: dict[str, Any]) -> None:
        """Write a new pointer file (a modified deep copy of :attr:`_active`)."""
        with _errors("writing the table pointer", hint=f"check that {self.db_dir} is writable; the old pointer is intact"):
            _write_active(self._active_path, data)
        self._pointer.written(data)

    def _edit_active(self) -> dict[str, Any]:
        return copy.deepcopy(self._active)

    def _check_meta(self, persona: str, entry: dict[str, Any]) -> None:
        want = self._meta()
        if int(entry.get("schema", 1)) != want["schema"]:
            raise SinkError(
                f"lancedb: the index of persona {persona!r} has table schema {entry.get('schema', 1)}, this version "
                f"writes schema {want['schema']}; the next sync rebuilds it (or run `ledger-indexer reindex --persona {persona}`)"
            )
        if int(entry.get("dim", -1)) != want["dim"] or entry.get("fingerprint") != want["fingerprint"] or entry.get("chunking") != want["chunking"]:
            raise SinkError(
                f"lancedb: the index of persona {persona!r} was built with model {entry.get('fingerprint')} "
                f"(dim {entry.get('dim')}, chunking {entry.get('chunking')}) but the embedder is "
                f"{want['fingerprint']} (dim {want['dim']}, chunking {want['chunking']}); vectors cannot be mixed. "
                f"Run `ledger-indexer reindex --persona {persona}` (a rebuild) to re-embed it"
            )

    def _live(self, persona: str, *, create: bool):
        entry = self._active["personas"].get(persona)
        if entry is None:
            if not create:
                return None
            name = table_name(persona, self._next_generation(persona))
            with _errors("creating the table", persona):
                tbl = self._create(name)
            data = self._edit_active()
            data["personas"][persona] = {**self._meta(), "table": name, "generation": _generation_of(name, persona), "updated_ms": _now_ms()}
            self._save_active(data)
            return tbl
        with _errors(f"opening table {entry['table']}", persona, f"run `ledger-indexer reindex --persona {persona}`"):
            return self._open(entry["table"])

    def _next_generation(self, persona: str) -> int:
        gens = [0]
        entry = self._active["personas"].get(persona)
        if entry:
            gens.append(int(entry.get("generation", 0)))
        for r in self._active["retired"]:
            g = _generation_of(r["table"], persona)
            if g:
                gens.append(g)
        with _errors("listing tables", persona):
            for n in self._table_names():
                g = _generation_of(n, persona)
                if g:
                    gens.append(g)
        return max(gens) + 1

    def active_table(self, persona: str):
        """The writer's handle on the persona's live table (sees its own writes), or None."""
        with self._lock:
            return self._live(persona, create=False)

    def index_meta(self, persona: str) -> dict[str, Any] | None:
        """What the live table was built with (fingerprint, dim, chunking), or None."""
        entry = self._active["personas"].get(persona)
        return dict(entry) if entry else None

    def needs_rebuild(self, persona: str) -> str | None:
        """Why the live table cannot take upserts from this embedder/chunking, or None."""
        entry = self._active["personas"].get(persona)
        if entry is None:
            return None
        try:
            self._check_meta(persona, entry)
        except SinkError as e:
            return str(e)
        return None

    # ------------------------------------------------------------------ rows

    def _chunks(self, doc: Document) -> list[Chunk]:
        lines = doc.text.split("\n")
        bsl = getattr(doc, "body_start_line", 1) or 1
        bsl = min(max(1, int(bsl)), len(lines))
        kw = dict(count_tokens=self.embedder.count_tokens, max_tokens=self.chunk_max_tokens, overlap_tokens=self.chunk_overlap)
        chunks = chunk_document("\n".join(lines[bsl - 1 :]), first_line=bsl, **kw)
        if not chunks and bsl > 1:  # empty body: index the header so the document still exists
            chunks = chunk_document(doc.text, **kw)
        if not chunks:
            chunks = [Chunk(index=0, start_line=1, end_line=max(1, len(lines)), text="")]
        return chunks

    def _rows(self, persona: str, docs: Sequence[Document]) -> tuple[pa.Table, list[str]]:
        latest: dict[str, Document] = {}
        for d in docs:
            if d.persona != persona:
                raise SinkError(
                    f"lancedb: document {d.path!r} belongs to persona {d.persona!r}, not {persona!r}; "
                    f"refusing to write it into another persona's table"
                )
            if not d.path:
                raise SinkError("lancedb: a document has an empty path")
            latest[d.path] = d  # last wins
        per_doc = [(d, self._chunks(d)) for d in latest.values()]
        texts = [_clean(embedding_text(c.text)) for _, cs in per_doc for c in cs]
        try:
            vecs = np.asarray(self.embedder.embed(texts), dtype=np.float32)
        except Exception as e:
            raise SinkError(f"lancedb: embedding {len(texts)} chunks for persona {persona!r} failed: {e}") from e
        dim = int(self.embedder.dim)
        if vecs.shape != (len(texts), dim) or not np.isfinite(vecs).all():
            raise SinkError(
                f"lancedb: embedder {self.embedder.name} returned {vecs.shape} (finite: {bool(np.isfinite(vecs).all())}), "
                f"expected {(len(texts), dim)}"
            )
        cols: dict[str, list[Any]] = {k: [] for k in (
            "id", "path", "chunk_index", "source", "persona", "session", "turn_id", "kind",
            "start_line", "end_line", "text", "doc_text", "title", "timestamp_ms", "turn_seq", "content_hash")}
        for d, cs in per_doc:
            path = _clean(d.path)
            for c in cs:
                cols["id"].append(f"{path}#{c.index}")
                cols["path"].append(path)
                cols["chunk_index"].append(c.index)
                cols["source"].append(_enum_value(d.source))
                cols["persona"].append(_clean(d.persona))
                cols["session"].append(None if d.session is None else _clean(d.session))
                cols["turn_id"].append(None if d.turn_id is None else _clean(str(d.turn_id)))
                cols["kind"].append(_enum_value(d.kind))
                cols["start_line"].append(c.start_line)
                cols["end_line"].append(c.end_line)
                cols["text"].append(_clean(c.text))
                cols["doc_text"].append(_clean(d.text) if c.index == 0 else "")
                cols["title"].append(_clean(d.title or "") if c.index == 0 else "")
                cols["timestamp_ms"].append(None if d.timestamp_ms is None else int(d.timestamp_ms))
                cols["turn_seq"].append(None if d.turn_seq is None else int(d.turn_seq))
                cols["content_hash"].append(d.content_hash)
        schema = make_schema(dim)
        arrays = [pa.array(cols[f.name], type=f.type) for f in schema if f.name != "vector"]
        flat = pa.array(vecs.reshape(-1), type=pa.float32())
        arrays.append(pa.FixedSizeListArray.from_arrays(flat, dim))
        return pa.Table.from_arrays(arrays, schema=schema), list(latest)

    def _merge(self, tbl, rows: pa.Table, paths: list[str], persona: str) -> None:
        if not paths:
            return
        path_col = rows.column("path").to_pylist()
        for s in range(0, len(paths), MERGE_BATCH_DOCS):
            part = paths[s : s + MERGE_BATCH_DOCS]
            if len(paths) <= MERGE_BATCH_DOCS:
                sub = rows
            else:
                keep = set(part)
                sub = rows.filter(pa.array([p in keep for p in path_col]))
            with _errors(f"upserting {len(part)} documents", persona):
                (
                    tbl.merge_insert("id")
                    .when_matched_update_all()
                    .when_not_matched_insert_all()
                    .when_not_matched_by_source_delete(sql_in("path", [_clean(p) for p in part]))
                    .execute(sub)
                )
            self._after_commit(tbl)

    def _after_commit(self, tbl) -> None:
        self.commits += 1
        n = self._since_optimize.get(tbl.name, 0) + 1
        self._since_optimize[tbl.name] = n
        try:
            small = int(tbl.stats()["fragment_stats"]["num_small_fragments"])
        except Exception:
            small = 0
        if n >= self.optimize_every or small > self.small_fragment_limit:
            self._optimize(tbl)

    def _optimize(self, tbl) -> None:
        with _errors(f"optimizing table {tbl.name}", hint="the data is intact; maintenance retries later"):
            self._ensure_indexes(tbl)
            tbl.optimize(cleanup_older_than=self.cleanup_older_than)
        self._since_optimize[tbl.name] = 0
        self.optimizations += 1

    def _delete(self, tbl, paths: list[str], persona: str) -> None:
        for s in range(0, len(paths), SQL_IN_CHUNK):
            part = paths[s : s + SQL_IN_CHUNK]
            with _errors(f"deleting {len(part)} documents", persona):
                tbl.delete(sql_in("path", [_clean(p) for p in part]))
            self._after_commit(tbl)

    # ------------------------------------------------------------------ Exporter protocol

    def upsert(self, persona: str, docs: Sequence[Document]) -> None:
        if not docs:
            return
        entry = self._active["personas"].get(persona)
        if entry is not None:
            self._check_meta(persona, entry)
        rows, paths = self._rows(persona, docs)  # chunk + embed outside the lock: readers stay responsive
        with self._lock:
            tbl = self._live(persona, create=True)
            self._merge(tbl, rows, paths, persona)

    def delete(self, persona: str, paths: Iterable[str]) -> None:
        ps = list(dict.fromkeys(p for p in paths if p))
        if not ps:
            return
        with self._lock:
            tbl = self._live(persona, create=False)
            if tbl is None:
                return
            self._delete(tbl, ps, persona)

    def paths(self, persona: str) -> set[str]:
        with self._lock:
            tbl = self._live(persona, create=False)
            if tbl is None:
                return set()
            with _errors("listing documents", persona, "retry; the table is unchanged"):
                return _paths_of(tbl)

    def read(self, persona: str, path: str) -> str | None:
        with self._lock:
            tbl = self._live(persona, create=False)
            if tbl is None:
                return None
            with _errors(f"reading {path!r}", persona, "retry; the table is unchanged"):
                return _read_doc(tbl, path)

    def rebuild(self, persona: str) -> LanceRebuild:
        return LanceRebuild(self, persona)

    def after_batch(self) -> None:
        return None

    def close(self) -> None:
        with self._lock:
            self._tables.clear()

    # ------------------------------------------------------------------ maintenance & status

    def personas(self) -> list[str]:
        return sorted(self._active["personas"])

    def maintain(self, *, force: bool = False) -> dict[str, Any]:
        """Scheduled maintenance: optimize live tables, drop retired and orphaned tables, sweep temp files.

        A table is optimized (compaction, index update, versions older than
        ``cleanup_older_than`` removed) when it changed since its last
        optimize, has unindexed rows or too many small fragments; ``force``
        optimizes every table. Returns what was done.
        """
        done: dict[str, Any] = {"optimized": [], "dropped": [], "tmp_removed": 0}
        with self._lock:
            for persona, entry in list(self._active["personas"].items()):
                try:
                    tbl = self._open(entry["table"])
                except Exception as e:
                    log.warning("lancedb: cannot open %s for maintenance: %s", entry["table"], e)
                    continue
                due = force or self._since_optimize.get(tbl.name, 0) > 0
                if not due:
                    try:
                        due = int(tbl.stats()["fragment_stats"]["num_small_fragments"]) > self.small_fragment_limit or any(
                            int(getattr(ix, "num_unindexed_rows", 0) or 0) > 0 for ix in tbl.list_indices()
                        )
                    except Exception:
                        due = True
                if due:
                    self._optimize(tbl)
                    done["optimized"].append(tbl.name)
            done["dropped"] = self._drop_retired_and_orphans()
            done["tmp_removed"] = sweep_tmp_files(self.db_dir, TMP_SWEEP_AGE_RUNNING)
        return done

    def _drop_retired_and_orphans(self) -> list[str]:
        now = _now_ms()
        grace_ms = self.retire_grace.total_seconds() * 1000
        dropped: list[str] = []
        keep_retired = []
        for r in self._active["retired"]:
            if now - int(r.get("retired_ms", 0)) >= grace_ms:
                if self._drop_table(r["table"]):
                    dropped.append(r["table"])
                    continue
            keep_retired.append(r)
        if len(keep_retired) != len(self._active["retired"]):
            data = self._edit_active()
            data["retired"] = keep_retired
            self._save_active(data)
        return dropped + self._drop_orphans(grace_ms)

    def _drop_orphans(self, grace_ms: float) -> list[str]:
        """Drop tables no pointer names (a build killed before its switch).

        Maintenance waits ``grace_ms`` after a table's last write; at open, with
        the writer lock held by this process, no build can be in progress, and an
        orphan was never live (no reader has it open), so it goes at once.
        """
        now = _now_ms()
        dropped: list[str] = []
        known = ({e["table"] for e in self._active["personas"].values()}
                 | {r["table"] for r in self._active["retired"]} | self._building)
        try:
            names = self._table_names()
        except Exception as e:
            log.warning("lancedb: cannot list tables: %s", e)
            return dropped
        for n in names:
            if n.startswith(TABLE_PREFIX) and n not in known:
                base = self.db_dir / f"{n}.lance"
                try:
                    mtime = max(p.stat().st_mtime for p in (base, base / "_versions") if p.exists())
                    age_ms = now - mtime * 1000
                except (OSError, ValueError):
                    age_ms = grace_ms
                if age_ms >= grace_ms and self._drop_table(n):  # a crashed rebuild's leftover
                    dropped.append(n)
        return dropped

    def _drop_table(self, name: str) -> bool:
        self._tables.pop(name, None)
        self._since_optimize.pop(name, None)
        try:
            self._db.drop_table(name)
            return True
        except Exception as e:
            if "not found" in str(e).lower() or "does not exist" in str(e).lower():
                return True
            log.warning("lancedb: cannot drop table %s: %s", name, e)
            return False

    def stats(self, persona: str) -> dict[str, Any]:
        return self.table_stats(persona).as_dict()

    def table_stats(self, persona: str) -> SinkStats:
        with self._lock:
            entry = self._active["personas"].get(persona)
            tbl = self._live(persona, create=False)
            if tbl is None or entry is None:
                return SinkStats(persona, None, None, 0, 0, 0, 0, None, 0, 0, None)
            with _errors("reading table statistics", persona, "retry"):
                st = tbl.stats()
                unindexed = 0
                for ix in tbl.list_indices():
                    unindexed = max(unindexed, int(getattr(ix, "num_unindexed_rows", 0) or 0))
                return SinkStats(
                    persona=persona,
                    table=entry["table"],
                    generation=int(entry.get("generation", 0)),
                    chunks=int(st["num_rows"]),
                    documents=int(tbl.count_rows("chunk_index = 0")),
                    fragments=int(st["fragment_stats"]["num_fragments"]),
                    small_fragments=int(st["fragment_stats"]["num_small_fragments"]),
                    version=int(tbl.version),
                    unindexed_rows=unindexed,
                    total_bytes=int(st.get("total_bytes", 0)),
                    fingerprint=entry.get("fingerprint"),
                )

    # ------------------------------------------------------------------ rebuild support

    def _swap(self, persona: str, name: str) -> None:
        data = self._edit_active()
        old = data["personas"].get(persona)
        data["personas"][persona] = {**self._meta(), "table": name, "generation": _generation_of(name, persona), "updated_ms": _now_ms()}
        if old and old["table"] != name:
            data["retired"].append({"table": old["table"], "persona": persona, "retired_ms": _now_ms()})
        self._save_active(data)


class LanceRebuild:
    """A forced reindex of one persona, built beside the live table.

    Writes go to a new table (next generation), invisible to readers. On
    :meth:`commit` its indexes are brought up to date and ``active.json`` is
    switched atomically; the old table is retired and dropped by
    :meth:`LanceSink.maintain` after the grace period. :meth:`abort` (or an
    exception inside ``with``) drops the new table and leaves the live one as
    it was. Like the QMD sink, the new table must receive the persona's
    *whole* document set: what is not upserted here is gone after commit
    (upserts to the live table during a rebuild are not copied over).
    """

    def __init__(self, sink: LanceSink, persona: str) -> None:
        self._sink = sink
        self.persona = persona
        self._state = "open"
        self._written: set[str] = set()
        with sink._lock:
            self.generation = sink._next_generation(persona)
            self.table_name = table_name(persona, self.generation)
            sink._building.add(self.table_name)
            try:
                with _errors("creating the rebuild table", persona):
                    self._table = sink._create(self.table_name)
            except BaseException:
                sink._building.discard(self.table_name)
                raise

    @property
    def written(self) -> frozenset[str]:
        return frozenset(self._written)

    def _require_open(self) -> None:
        if self._state != "open":
            raise SinkError(f"lancedb: this rebuild of persona {self.persona!r} is already {self._state}")

    def upsert(self, docs: Sequence[Document]) -> None:
        self._require_open()
        if not docs:
            return
        s = self._sink
        rows, paths = s._rows(self.persona, docs)
        with s._lock:
            self._require_open()
            s._merge(self._table, rows, paths, self.persona)
            self._written.update(paths)

    def commit(self) -> None:
        self._require_open()
        s = self._sink
        with s._lock:
            try:
                s._optimize(self._table)  # fold every row into FTS/scalar indexes before going live
                with _errors("switching the live table", self.persona, "the old table is still live; retry the reindex"):
                    s._swap(self.persona, self.table_name)
            except BaseException:
                self._state = "failed"
                s._building.discard(self.table_name)
                s._drop_table(self.table_name)
                raise
            self._state = "committed"
            s._building.discard(self.table_name)
            s._drop_retired_and_orphans()

    def abort(self) -> None:
        if self._state != "open":
            return
        s = self._sink
        with s._lock:
            self._state = "aborted"
            s._building.discard(self.table_name)
            s._drop_table(self.table_name)

    def __enter__(self) -> LanceRebuild:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None:
            self.abort()
        elif self._state == "open":
            self.commit()


# --------------------------------------------------------------------------- helpers


def _now_ms() -> int:
    return int(time.time() * 1000)


def _enum_value(v: Any) -> str:
    return str(getattr(v, "value", v))


def _paths_of(tbl) -> set[str]:
    t = tbl.search().where("chunk_index = 0").select(["path"]).limit(None).to_arrow()
    return set(t.column("path").to_pylist())


def _read_doc(tbl, path: str) -> str | None:
    rows = tbl.search().where(f"id = {sql_str(path + '#0')}").select(["doc_text"]).limit(1).to_list()
    return rows[0]["doc_text"] if rows else None


def reader_paths(table) -> set[str]:
    """Document paths of a table obtained from :meth:`LanceReader.active_table`."""
    return _paths_of(table)


def reader_read(table, path: str) -> str | None:
    """Full text of one document from a reader's table (``get PATH``)."""
    return _read_doc(table, path)
