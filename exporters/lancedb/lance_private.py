"""The one place that reads LanceDB's private attributes (lancedb is pinned in pyproject.toml).

- ``LanceTable._table``: the synchronous table's async handle (the same table, session and
  caches), which :mod:`exporters.lancedb.direct` awaits on the calling thread's own loop.
- ``AsyncQueryBase._inner`` / ``._reranker``: a query's native stream, drained without
  ``to_arrow()``'s extra schema read (:func:`collect`).

Each is checked on first use; where the installed lancedb lays its objects out otherwise, the
public path answers instead (the synchronous API; ``await query.to_arrow()``) and one
``lancedb.private_api_missing`` event says which. ``tests/test_lance_private.py`` forces each
fallback and checks the answers are the same. :data:`USE_PRIVATE` turns both off at once (the
tests' and the side-by-side benchmark's switch).
"""

from __future__ import annotations

import threading
from typing import Any

import structlog

log = structlog.get_logger("indexer.lancedb")

#: False: never touch the private attributes (the tests' and benchmark's switch).
USE_PRIVATE = True

_missing: set[str] = set()
_lock = threading.Lock()


def _fell_back(what: str, why: str) -> None:
    with _lock:
        if what in _missing:
            return
        _missing.add(what)
    log.warning("lancedb.private_api_missing", attribute=what, reason=why,
                action="the public lancedb API answers instead (slower, same answers)")


def async_handle(table: Any) -> Any | None:
    """``table``'s async handle (``lancedb.table.AsyncTable``), or None where this lancedb keeps
    none in ``_table`` (then the caller uses the synchronous API)."""
    if not USE_PRIVATE:
        return None
    from lancedb.table import AsyncTable

    inner = getattr(table, "_table", None)
    if isinstance(inner, AsyncTable):
        return inner
    _fell_back("LanceTable._table", f"{type(table).__name__} keeps no AsyncTable in `_table`")
    return None


def _native(query: Any) -> Any | None:
    """The query's native builder when it can be executed directly (no reranker), else None."""
    if not USE_PRIVATE:
        return None
    if getattr(query, "_reranker", None) is not None:  # only standard queries have one
        return None
    native = getattr(query, "_inner", None)
    if not hasattr(native, "execute"):
        _fell_back("AsyncQueryBase._inner", f"{type(query).__name__} has no `_inner.execute`")
        return None
    return native


async def collect(query: Any):
    """``query``'s rows as one Arrow table.

    lancedb's ``to_arrow()`` first awaits the table's schema (to add a row id for blob columns;
    these tables have none) and wraps the batches twice in Python: the native stream, drained
    here, skips both. A reranked query, or a lancedb without ``_inner``, goes the library's way."""
    native = _native(query)
    if native is None:
        return await query.to_arrow()
    import pyarrow as pa

    stream = await native.execute(max_batch_length=None, timeout=None)
    batches = [batch async for batch in stream]
    return pa.Table.from_batches(batches, schema=stream.schema)


__all__ = ["USE_PRIVATE", "async_handle", "collect"]
