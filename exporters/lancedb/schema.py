"""The table's columns, indexes and names, and SQL literals for its filters (see the package docstring)."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from lancedb.index import FTS, Bitmap, BTree, IvfSq

#: Version of the table's columns (2: ``turn_seq``); a table of another version is rebuilt.
SCHEMA_VERSION = 2
TABLE_PREFIX = "mem_"

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

# --------------------------------------------------------------------------- vector index
#
# Measured by ``bench/ann.py`` (bench/RESULTS.md "ANN vector index") on the latency corpus
# (real MiniLM vectors of LoCoMo lines, LoCoMo questions), lancedb 0.40, 2 shared cores.

#: The vector index's name (one per table, on ``vector``): IVF_SQ, cosine. SQ (8-bit scalar
#: quantisation) keeps recall on filtered queries where PQ/RQ lose it; an IVF_HNSW_SQ builds
#: ~20x longer for a few ms. Every indexed query refines (re-scores the candidates on the
#: stored float vectors), so ``_distance`` is the exact cosine distance.
VECTOR_INDEX = "vector_idx"
#: Tables with at least this many rows get the index (built by maintenance, never by a write).
#: The measured crossover (bench/ann.py, vector stage of the persona scope, 200 candidates): at
#: 1,000 rows exact and indexed are equal (7.4 / 7.3 ms), from 2,500 rows the index is faster
#: (10.4 / 7.5; 10,000 rows: 31.4 / 10.1; 50,000: 106.9 / 12.8); recall@10 of the index route
#: 1.000 at 10,000 rows in the same run (0.992 at 1M).
VECTOR_INDEX_MIN_ROWS = 2_500
#: Rows per IVF partition at training time (lancedb's own default target is 8,192).
ROWS_PER_PARTITION = 8192
#: Re-train when the table has grown this much since the index was trained (new rows are
#: folded into the old partitions, which fit them worse), or the index has more segments
#: than this: every optimize that folds new rows in adds a delta segment, and a query
#: searches each (at 100k rows, 25 segments cost ~10 % more per query than 1).
RETRAIN_GROWTH = 2.0
RETRAIN_SEGMENTS = 16
#: Partitions probed per query: at least half of them, and at least ``MIN_NPROBES`` (all of
#: them up to ~330k rows: the whole quantised index is scanned, which is still several times
#: faster than the exact scan; MiniLM vectors of chat turns have little cluster structure, so
#: probing a third of the partitions misses neighbours: recall@10 0.73 at 100k).
MIN_NPROBES = 40
#: Candidates re-scored exactly: ``REFINE_FACTOR`` per result row, at least ``MIN_REFINE_ROWS``.
#: A factor of 1 re-scores the rows the quantised scan ranked first (200 for the searcher), so
#: distances and their order are exact; the set is the quantised scan's (100k rows: recall@10
#: 1.000 and recall@200 0.991 against exact search, 11 ms; a factor of 2: recall@200 1.000, 15 ms —
#: the other 200 rows are a random read each).
REFINE_FACTOR = 1
MIN_REFINE_ROWS = 200
#: A filter matching at most this many rows is searched exactly (``bypass_vector_index``) when a
#: query probes fewer than all partitions: an IVF probe of a selective filter can miss rows (the
#: probed partitions hold fewer than ``limit`` of them). With every partition probed the index
#: route sees every row and reads fewer vectors (100k rows, a 5,000-row project: 8.6 vs 15.4 ms).
FLAT_MAX_ROWS = 20_000


def vector_partitions(rows: int) -> int:
    """IVF partitions for an index trained on ``rows`` rows."""
    return max(1, round(rows / ROWS_PER_PARTITION))


def vector_index_config(rows: int) -> IvfSq:
    return IvfSq(distance_type="cosine", num_partitions=vector_partitions(rows))


def vector_nprobes(partitions: int) -> int:
    """Partitions to probe per query on an index of ``partitions`` partitions."""
    partitions = max(1, partitions)
    return min(partitions, max(MIN_NPROBES, math.ceil(partitions / 2)))


def refine_factor(limit: int) -> int:
    """The refine factor of an indexed query for ``limit`` results."""
    return max(REFINE_FACTOR, math.ceil(MIN_REFINE_ROWS / max(1, limit)))


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


def chunk_id(path: str, index: int) -> str:
    """The ``id`` of a document's chunk ``index`` (the row key; one definition for writes and reads)."""
    return f"{path}#{index}"


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
#: The result columns only the answer shows (snippet, lines): ranking, the scope check and the
#: fork grouping read the others. Fetched for the few results, not the hundreds of candidates
#: (``Retriever.rank_columns`` / ``Retriever.details``): each selected column is a random read
#: per candidate row (1M rows: 200 candidates with every column 72 ms, without these 50 ms;
#: 100k, persona scope: the text alone is ~10 ms of a 27 ms vector query).
DETAIL_COLUMNS = ["text", "start_line", "end_line"]


# --------------------------------------------------------------------------- pointer file


@dataclass(frozen=True, slots=True)
class TableBuild:
    """What a table's vectors were made with: one record, written into the table's
    schema metadata and the pointer entry, and compared before every upsert."""

    fingerprint: str  # the embedder's (model files, name, max tokens)
    dim: int
    chunking: str  # CHUNKING_VERSION/max_tokens/overlap
    schema: int = SCHEMA_VERSION

    def as_dict(self) -> dict[str, Any]:
        return {"fingerprint": self.fingerprint, "dim": self.dim, "chunking": self.chunking, "schema": self.schema}

    @property
    def key(self) -> str:
        """The sink's part of the index build identity (the state DB's record)."""
        return f"lancedb:{self.fingerprint}:d{self.dim}:{self.chunking}:s{self.schema}"

    @classmethod
    def of_entry(cls, entry: dict[str, Any]) -> TableBuild:
        """From a pointer entry; a table written before the schema was recorded is schema 1."""
        return cls(str(entry.get("fingerprint")), int(entry.get("dim", -1)), str(entry.get("chunking")),
                   int(entry.get("schema", 1)))
