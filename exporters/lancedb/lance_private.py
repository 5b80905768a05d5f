"""The one place that reads LanceDB's private attributes (lancedb is pinned in pyproject.toml).

``LanceTable._table`` is the synchronous table's async handle (the same table, session and
caches), which :mod:`exporters.lancedb.direct` awaits on the calling thread's own loop: side by
side with lancedb's synchronous API on the 100k corpus, 16-18 % more queries a second at 4 threads
and 15-24 % less CPU a query (issue 37, ``bench/adapters_ab.py``). It is checked on first use;
where the installed lancedb keeps no ``AsyncTable`` there, the synchronous API answers instead and
one ``lancedb.private_api_missing`` event says so. ``tests/test_lance_private.py`` forces the
fallback and checks the answers are the same; :data:`USE_PRIVATE` is the tests' and the
benchmark's switch.

Draining a query's native stream (``_inner``) instead of ``await query.to_arrow()`` gained nothing
measurable side by side and is no longer done.
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


__all__ = ["USE_PRIVATE", "async_handle"]
