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
