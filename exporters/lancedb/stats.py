"""What the status shows of one persona's table (``LanceSink.table_stats``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


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
    #: The vector index (``IVF_SQ``) or None (every query is an exact scan); its IVF
    #: partitions and the rows it was trained on; rows in it, rows not yet folded in
    #: (searched exactly until maintenance folds them in) and its segments (one per fold).
    vector_index: str | None = None
    vector_partitions: int | None = None
    vector_trained_rows: int | None = None
    vector_indexed_rows: int = 0
    vector_unindexed_rows: int = 0
    vector_index_segments: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------- reader


def read_table_stats(persona: str, entry: dict[str, Any], tbl) -> SinkStats:
    """The statistics of ``persona``'s live table ``tbl`` (``entry``: its pointer entry)."""
    from exporters.lancedb.schema import VECTOR_INDEX

    st = tbl.stats()
    unindexed = 0
    vix = None
    for ix in tbl.list_indices():
        unindexed = max(unindexed, int(getattr(ix, "num_unindexed_rows", 0) or 0))
        if ix.name == VECTOR_INDEX or list(ix.columns) == ["vector"]:
            vix = ix
    recorded = entry.get("vector_index") or {}
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
        vector_index=None if vix is None else str(recorded.get("type") or vix.index_type),
        vector_partitions=None if vix is None else recorded.get("partitions"),
        vector_trained_rows=None if vix is None else recorded.get("trained_rows"),
        vector_indexed_rows=0 if vix is None else int(vix.num_indexed_rows or 0),
        vector_unindexed_rows=0 if vix is None else int(vix.num_unindexed_rows or 0),
        vector_index_segments=0 if vix is None else int(getattr(vix, "num_segments", 1) or 1),
    )
