"""LanceDB sink: chunks + vectors + full-text index, one table per persona.

Layout of ``db_dir`` (``<index_dir>/lancedb``)::

    active.json                     persona -> live table (atomic pointer, see below)
    <table>.lance/                  one Lance dataset per persona and generation

On object storage (``index.uri = s3://bucket/prefix``, ``gs://…``, ``az://…``;
:class:`~exporters.lancedb.location.IndexLocation`) the same database also holds
three kinds of small Lance tables instead of ``active.json``::

    _active.lance/                  the pointer: one row, ``data`` = the JSON document above
    _scopes.lance/                  the scope state readers need (exporters.lancedb.published)
    _lease_e<epoch>.lance/          the writer lease, one table per holder (exporters.lancedb.lease)

Each change of any of them is one Lance commit (a conditional PUT of the
manifest), so readers on other machines see the old or the new content, never
a mix; they re-read at most every ``index.refresh_seconds``. The writer checks
its lease before every commit (``LanceSink._fence``). Temp-file sweeps are a
local-disk matter; on object storage a killed upload leaves an unfinished
multipart upload, which a bucket lifecycle rule removes.

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
                                   "chunking": "lines-v1/200/40", "updated_ms": 1732170000000,
                                   "vector_index": {"type": "IVF_SQ", "partitions": 12, "trained_rows": 100000,
                                                    "built_ms": ..., "build_seconds": 4.2, "reason": "create"}}},
     "retired":  [{"table": "mem_atlas_1a2b3c4d5e6f_g1", "persona": "<persona id>", "retired_ms": ...}]}

Retired tables are dropped by :meth:`LanceSink.maintain` once ``retire_grace``
(10 min) has passed, so a reader that read the old pointer just before a swap
finishes its query.

Row schema (one row per chunk; the retriever queries this)
----------------------------------------------------------
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
``path`` and ``timestamp_ms`` (the date prefilter of search), BITMAP on ``session``, ``kind`` and ``source``.
Vectors are unit length; every query uses ``distance_type`` ``cosine``.

Vector index (``vector_idx``, IVF_SQ, cosine): built by :meth:`LanceSink.maintain`
(and by a rebuild's commit) once a table has ``VECTOR_INDEX_MIN_ROWS`` rows, never
by a write; re-trained when the table has doubled since or the index has more
than ``RETRAIN_SEGMENTS`` segments; its partition count and trained rows are
recorded in the table's pointer entry (``"vector_index"``), where readers take
the probe count from. Rows written after the build are searched exactly beside
the index until maintenance (``optimize``) folds them in. The retriever routes
each vector query by its filter: the persona scope (a broad filter) through the
index, probing half the partitions or at least ``MIN_NPROBES`` and re-scoring
the candidates on the stored vectors (exact cosine distances); a filter matching
at most ``FLAT_MAX_ROWS`` rows (a session, a project, a date window) exactly.
Measurements and the choice of parameters: ``bench/ann.py``, bench/RESULTS.md.

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
than 30 min). ``maintain()`` optimizes (``compaction.py``: a size-tiered compaction,
new rows into index segments, versions older than 10 min removed) and
builds or re-trains the vector index when due; the optimize alone (which folds
new rows into every index, the vector index included) also runs after a write
every ``optimize_every`` commits or when a table has more than
``small_fragment_limit`` small fragments.

Readers in other processes use :class:`Retriever` (:func:`open_retriever`, ``read_consistency_interval=0``
locally, ``index.refresh_seconds`` on object storage, where it also exposes the published scope state).
"""

from indexer.runtime.deferred_import import defer_package_init

# Before lancedb is first imported (every import of it is under this package): its REST
# client's API classes (12 MB resident) load only if something reads them.
defer_package_init("lance_namespace_urllib3_client")

from exporters.lancedb.pointer import ACTIVE_FILE  # noqa: E402
from exporters.lancedb.rebuild import LanceRebuild  # noqa: E402
from exporters.lancedb.retriever import FtsUnavailable, Retriever, Where, open_retriever  # noqa: E402
from exporters.lancedb.schema import (  # noqa: E402
    DETAIL_COLUMNS,
    RESULT_COLUMNS,
    SCHEMA_VERSION,
    TableBuild,
    make_schema,
    sql_in,
    sql_str,
    table_name,
)
from exporters.lancedb.sink import LanceSink  # noqa: E402
from exporters.lancedb.stats import SinkStats  # noqa: E402
from exporters.lancedb.store import sweep_tmp_files  # noqa: E402

__all__ = [
    "ACTIVE_FILE", "DETAIL_COLUMNS", "FtsUnavailable", "LanceRebuild", "LanceSink", "RESULT_COLUMNS", "Retriever",
    "SCHEMA_VERSION", "SinkStats", "TableBuild", "Where", "make_schema", "open_retriever", "sql_in", "sql_str",
    "sweep_tmp_files", "table_name",
]
