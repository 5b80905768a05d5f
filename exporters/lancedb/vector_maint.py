"""The persona tables' vector index: when it is due, its build, its record in the pointer
(``LanceSink`` delegates here; readers take the partition count from the record)."""

from __future__ import annotations

import logging
import time
from typing import Any

from exporters.lancedb.schema import (
    RETRAIN_GROWTH,
    RETRAIN_SEGMENTS,
    VECTOR_INDEX,
    vector_index_config,
    vector_partitions,
)
from exporters.lancedb.store import _errors, _now_ms

log = logging.getLogger("exporters.lancedb")


def vector_index_of(tbl):
    """The table's vector index (lancedb ``IndexConfig``), or None."""
    for ix in tbl.list_indices():
        if ix.name == VECTOR_INDEX or list(ix.columns) == ["vector"]:
            return ix
    return None

def due(tbl, min_rows: int | None, recorded: dict[str, Any] | None) -> str | None:
    """Why the table's vector index must be (re)built now, or None.

    ``create``: none yet and the table has ``vector_index_rows`` rows; ``grown``: the
    table has ``RETRAIN_GROWTH`` times the rows the index was trained on (its
    partitions were fitted to far fewer rows); ``segments``: more than
    ``RETRAIN_SEGMENTS`` delta segments from folding new rows in; ``unrecorded``: an
    index whose training the pointer does not record (a crash between the build and
    the pointer write), so readers would not use it."""
    if min_rows is None:
        return None
    rows = int(tbl.count_rows())
    ix = vector_index_of(tbl)
    if ix is None:
        return "create" if rows >= max(1, min_rows) else None
    if not recorded:
        return "unrecorded"
    if rows >= RETRAIN_GROWTH * max(1, int(recorded.get("trained_rows") or 0)):
        return "grown"
    if int(getattr(ix, "num_segments", 1) or 1) > RETRAIN_SEGMENTS:
        return "segments"
    return None

def build(tbl, persona: str, reason: str) -> dict[str, Any]:
    """Train the IVF_SQ index on every row now (``replace``: a re-train swaps it in one
    commit; queries meanwhile use the old one). Returns its record for the pointer."""
    rows = int(tbl.count_rows())
    started = time.perf_counter()
    with _errors(f"building the vector index of {tbl.name}", persona,
                 "the table is intact and searched exactly meanwhile; maintenance retries later"):
        tbl.create_index("vector", config=vector_index_config(rows), replace=True, name=VECTOR_INDEX)
    seconds = time.perf_counter() - started
    log.info("lancedb: vector index of %s built (%s): %d rows, %d partitions, %.1f s",
             tbl.name, reason, rows, vector_partitions(rows), seconds)
    return {"type": "IVF_SQ", "partitions": vector_partitions(rows), "trained_rows": rows,
            "built_ms": _now_ms(), "build_seconds": round(seconds, 2), "reason": reason}

def maintain(sink, tbl, persona: str, entry: dict[str, Any]) -> dict[str, Any] | None:
    """Build or re-train the live table's vector index when due; record it in the pointer
    (readers take the partition count from there). Failures are logged: search stays exact."""
    try:
        reason = sink._vector_index_due(tbl, entry.get("vector_index"))
        if reason is None:
            return None
        info = sink._build_vector_index(tbl, persona, reason)
    except Exception as e:
        log.warning("lancedb: vector index of %s not built: %s", tbl.name, e)
        return None
    data = sink._edit_active()
    live = data["personas"].get(persona)
    if live is not None and live["table"] == tbl.name:
        live["vector_index"] = info
        sink._save_active(data)
    return info
