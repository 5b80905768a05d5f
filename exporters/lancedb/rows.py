"""Documents to Arrow rows: chunks, their vectors, one row per chunk."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from exporters.base import SinkError
from exporters.lancedb.schema import _clean, chunk_id, make_schema
from indexer.core.chunking import chunk_document, embedding_text
from indexer.core.types import Chunk, Document
from indexer.embedding.embedder import Embedder


@dataclass(frozen=True, slots=True)
class ChunkSettings:
    """How documents are cut: the embedder's token counter and window, the overlap."""

    max_tokens: int
    overlap: int


def document_chunks(doc: Document, embedder: Embedder, settings: ChunkSettings) -> list[Chunk]:
    """The chunks of a document's body (its header is in none: forks share embeddings)."""
    lines = doc.text.split("\n")
    bsl = getattr(doc, "body_start_line", 1) or 1
    bsl = min(max(1, int(bsl)), len(lines))
    kw = dict(count_tokens=embedder.count_tokens, max_tokens=settings.max_tokens, overlap_tokens=settings.overlap)
    chunks = chunk_document("\n".join(lines[bsl - 1 :]), first_line=bsl, **kw)
    if not chunks and bsl > 1:  # empty body: index the header so the document still exists
        chunks = chunk_document(doc.text, **kw)
    if not chunks:
        chunks = [Chunk(index=0, start_line=1, end_line=max(1, len(lines)), text="")]
    return chunks


def document_rows(persona: str, docs: Sequence[Document], embedder: Embedder,
                  settings: ChunkSettings) -> tuple[pa.Table, list[str]]:
    """One Arrow row per chunk of ``docs`` (de-duplicated by path, last wins), embedded;
    and the paths written. Raises :class:`SinkError` for a document of another persona,
    an empty path, or an embedder failure or wrong output shape."""
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
    per_doc = [(d, document_chunks(d, embedder, settings)) for d in latest.values()]
    texts = [_clean(embedding_text(c.text)) for _, cs in per_doc for c in cs]
    try:
        vecs = np.asarray(embedder.embed(texts), dtype=np.float32)
    except Exception as e:
        raise SinkError(f"lancedb: embedding {len(texts)} chunks for persona {persona!r} failed: {e}") from e
    dim = int(embedder.dim)
    if vecs.shape != (len(texts), dim) or not np.isfinite(vecs).all():
        raise SinkError(
            f"lancedb: embedder {embedder.name} returned {vecs.shape} (finite: {bool(np.isfinite(vecs).all())}), "
            f"expected {(len(texts), dim)}"
        )
    cols: dict[str, list[Any]] = {k: [] for k in (
        "id", "path", "chunk_index", "source", "persona", "session", "turn_id", "kind",
        "start_line", "end_line", "text", "doc_text", "title", "timestamp_ms", "turn_seq", "content_hash")}
    for d, cs in per_doc:
        path = _clean(d.path)
        for c in cs:
            cols["id"].append(chunk_id(path, c.index))
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


def _enum_value(v: Any) -> str:
    return str(getattr(v, "value", v))
