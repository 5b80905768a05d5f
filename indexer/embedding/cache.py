"""A persistent cache of document vectors in front of any :class:`Embedder`.

Keyed by (model fingerprint, sha256 of the text), so a body shared by forked
sessions, a re-sync or a forced reindex of unchanged text embeds nothing.
The file and what counts as damage: :mod:`indexer.embedding.cache_file`.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import structlog

from indexer.embedding.cache_file import CacheUnavailable, open_cache
from indexer.embedding.embedder import Embedder, EmbeddingError
from indexer.runtime.logs import RateLimitedLogger
from indexer.runtime.storage_errors import classify

log = structlog.get_logger("indexer.embedding")

#: Upper bound for SQLite IN lists (the default variable limit is 32766; keep statements small).
CACHE_LOOKUP_CHUNK = 500


def text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class CachedEmbedder:
    """An :class:`Embedder` with a persistent cache of document vectors.

    In its own SQLite file (WAL; vectors as raw float32 blobs). ``embed`` looks
    texts up in batches (IN lists of at most 500), embeds only the misses
    (deduplicated) with the inner embedder and stores them in one transaction.
    ``hits`` counts texts answered without the model (including duplicates
    inside one call), ``misses`` the distinct texts sent to it. Query
    embeddings are not cached.

    One connection guarded by a lock: safe for one writer thread plus query
    threads. The cache is disposable: a damaged file is moved aside and
    recreated, and a failing lookup degrades to a re-embed. A file that cannot
    be opened for another cause (a full disk, a read-only folder) is left in
    place: ``unavailable`` says why, texts are embedded uncached, and the open
    is tried again every :attr:`REOPEN_AFTER_S`.
    """

    #: While the cache cannot be opened, how often an ``embed`` tries again.
    REOPEN_AFTER_S = 30.0

    def __init__(self, inner: Embedder, cache_path: Path | str) -> None:
        self.inner = inner
        self.cache_path = Path(cache_path)
        self.name = inner.name
        self.dim = inner.dim
        self.fingerprint = inner.fingerprint
        self.cosine_floor = float(getattr(inner, "cosine_floor", 0.0))
        self.cosine_ceiling = float(getattr(inner, "cosine_ceiling", 1.0))
        self.max_tokens = inner.max_tokens
        self.hits = 0
        self.misses = 0
        #: why the cache cannot be opened now (None: open)
        self.unavailable: CacheUnavailable | None = None
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._reopen_at = 0.0
        self._errors = RateLimitedLogger(log, every_s=300)
        self._lock = threading.Lock()
        with self._lock:
            self._connection()

    def _connection(self) -> sqlite3.Connection | None:
        """The open connection, or None while the file cannot be opened. Call under ``_lock``."""
        if self._conn is not None or self._closed or time.monotonic() < self._reopen_at:
            return self._conn
        try:
            self._conn = open_cache(self.cache_path)
        except CacheUnavailable as exc:
            self.unavailable = exc
            self._reopen_at = time.monotonic() + self.REOPEN_AFTER_S
            fields = exc.fault.log_fields() if exc.fault is not None else {"cause": None}
            self._errors.failure("embedding_cache.open", "embedding_cache.unavailable", level="error",
                                 path=str(self.cache_path), error=str(exc), retry_in_s=self.REOPEN_AFTER_S,
                                 consequence="texts are embedded without the cache", **fields)
            return None
        self.unavailable = None
        self._errors.success("embedding_cache.open", "embedding_cache.reopened")
        return self._conn

    def _failed(self, action: str, exc: sqlite3.Error, consequence: str) -> None:
        fault = classify(exc, [self.cache_path.parent])
        fields = fault.log_fields() if fault is not None else {"cause": None}
        self._errors.failure(f"embedding_cache.{action}", f"embedding_cache.{action}_failed", path=str(self.cache_path),
                             error=fault.message if fault is not None else f"{type(exc).__name__}: {exc}",
                             consequence=consequence, **fields)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)

    def _lookup(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        found: dict[bytes, np.ndarray] = {}
        want = self.dim * 4
        try:
            with self._lock:
                conn = self._connection()
                if conn is None:
                    return found
                for s in range(0, len(keys), CACHE_LOOKUP_CHUNK):
                    part = keys[s : s + CACHE_LOOKUP_CHUNK]
                    marks = ",".join("?" * len(part))
                    rows = conn.execute(
                        f"SELECT text_sha, vec FROM vectors WHERE fingerprint = ? AND text_sha IN ({marks})",
                        [self.fingerprint, *part],
                    ).fetchall()
                    for k, blob in rows:
                        if len(blob) == want:
                            found[bytes(k)] = np.frombuffer(blob, dtype=np.float32)
            self._errors.success("embedding_cache.lookup")
        except sqlite3.Error as e:
            self._failed("lookup", e, "re-embedding")
        return found

    def _store(self, items: list[tuple[bytes, np.ndarray]]) -> None:
        now = int(time.time() * 1000)
        rows = [(self.fingerprint, k, self.dim, np.ascontiguousarray(v, dtype=np.float32).tobytes(), now) for k, v in items]
        try:
            with self._lock:
                conn = self._connection()
                if conn is None:
                    return
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.executemany(
                        "INSERT OR REPLACE INTO vectors (fingerprint, text_sha, dim, vec, created_ms) VALUES (?,?,?,?,?)",
                        rows,
                    )
                    conn.execute("COMMIT")
                except BaseException:
                    # SQLite may have rolled back already (a full disk): a second ROLLBACK would fail
                    # with "no transaction is active" in place of the real error
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            self._errors.success("embedding_cache.write")
        except sqlite3.Error as e:
            self._failed("write", e, "vectors not cached")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        n = len(texts)
        out = np.empty((n, self.dim), dtype=np.float32)
        if n == 0:
            return out
        keys = [text_key(t) for t in texts]
        unique = list(dict.fromkeys(keys))
        found = self._lookup(unique)
        missing = [k for k in unique if k not in found]
        if missing:
            first: dict[bytes, str] = {}
            for k, t in zip(keys, texts):
                first.setdefault(k, t)
            vecs = np.asarray(self.inner.embed([first[k] for k in missing]), dtype=np.float32)
            if vecs.shape != (len(missing), self.dim):
                raise EmbeddingError(
                    f"embedder {self.name} returned shape {vecs.shape}, expected {(len(missing), self.dim)}"
                )
            new = list(zip(missing, vecs))
            self._store(new)
            found.update(new)
        with self._lock:
            self.misses += len(missing)
            self.hits += n - len(missing)
        for i, k in enumerate(keys):
            out[i] = found[k]
        return out

    def entries(self, fingerprint: str | None = None) -> int:
        """Vectors in the cache (of one model); raises :class:`CacheUnavailable` while it cannot be opened."""
        with self._lock:
            conn = self._connection()
            if conn is None:
                raise self.unavailable or EmbeddingError(f"the embedding cache {self.cache_path} is not open")
            if fingerprint is None:
                return int(conn.execute("SELECT count(*) FROM vectors").fetchone()[0])
            return int(conn.execute("SELECT count(*) FROM vectors WHERE fingerprint = ?", (fingerprint,)).fetchone()[0])

    def prune_other_models(self) -> int:
        """Drop vectors of every other model fingerprint (after a model change); returns rows deleted
        (0 while the cache cannot be opened).

        Two ranges of the primary key (it starts with the fingerprint), not ``!=``: maintenance
        calls this on every run, and a cache with nothing to drop must cost no table scan."""
        with self._lock:
            conn = self._connection()
            if conn is None:
                return 0
            cur = conn.execute("DELETE FROM vectors WHERE fingerprint < ? OR fingerprint > ?",
                               (self.fingerprint, self.fingerprint))
            return cur.rowcount

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._conn is None:
                return
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
            self._conn = None
