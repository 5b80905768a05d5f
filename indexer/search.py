"""``memory_search``: hybrid (vector + full text), vector or keyword search over
a persona's LanceDB table, within the caller's scope.

Scores are in 0..1, higher is better, and mean the same across queries so that
``min_score`` is a real threshold:

- vector: cosine similarity of unit vectors, clipped to 0..1;
- keyword: BM25 mapped through ``s / (s + K)`` (a saturating curve, like
  QMD's ``|bm25| / (1 + |bm25|)`` but with ``K`` set for our chunk lengths);
- hybrid: ``VECTOR_WEIGHT * vector + (1 - VECTOR_WEIGHT) * keyword`` (0.3/0.7) over the
  union of both candidate lists (a chunk missing from one list scores 0 there).
  ``fusion="rrf"`` ranks by reciprocal-rank fusion instead (kept for the
  benchmark that compares the two; see bench/RESULTS.md).

Results are one per document (its best chunk), filtered by the scope twice:
in the LanceDB prefilter and again per row in Python.
"""

from __future__ import annotations

import enum
import re
import time
from dataclasses import asdict, dataclass
from typing import Literal

import structlog
from pydantic import BaseModel, ConfigDict, Field, field_validator

from indexer.config import Config
from indexer.scopes import Scope, ScopeError, ScopeFilter, resolve
from indexer.state import StateDB

log = structlog.get_logger("indexer.search")

VECTOR_WEIGHT = 0.3  # tuned on LoCoMo (bench/RESULTS.md): the MiniLM side is the weaker one
BM25_K = 4.0
RRF_K = 60
MAX_QUERY_CHARS = 2000
SNIPPET_MAX_CHARS = 700
SNIPPET_MAX_LINES = 6
RESULT_COLUMNS = ["id", "path", "source", "persona", "session", "turn_id", "kind", "start_line", "end_line", "text",
                  "timestamp_ms"]
_WORD = re.compile(r"[\w']+", re.UNICODE)
_STOP = frozenset("a an and are as at be by did do for from has have how i in is it me my of on or our so that the "
                  "this to was we what when where which who why will with you your".split())


class Mode(str, enum.Enum):
    HYBRID = "hybrid"
    VECTOR = "vector"
    KEYWORD = "keyword"


class SearchError(Exception):
    """A search that cannot be answered; ``code`` is the CLI exit code (1 operational, 2 usage)."""

    def __init__(self, message: str, code: int = 1, http_status: int = 503):
        super().__init__(message)
        self.code = code
        self.http_status = http_status


class SearchRequest(BaseModel):
    """The request of ARCHITECTURE.md; also the HTTP API's validated body."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    persona: str = Field(min_length=1, max_length=256)
    session: str | None = Field(None, max_length=1024)
    scope: Scope = Scope.PERSONA
    sources: list[Literal["sessions", "memory"]] = Field(default_factory=lambda: ["sessions", "memory"],
                                                         min_length=1, max_length=2)
    max_results: int = Field(6, ge=1, le=100)
    min_score: float = Field(0.0, ge=0.0, le=1.0)
    mode: Mode = Mode.HYBRID

    @field_validator("query")
    @classmethod
    def _has_words(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query is blank")
        if "\x00" in value:
            raise ValueError("query contains a NUL character")
        return value


@dataclass(frozen=True, slots=True)
class SearchResult:
    path: str
    source: str
    persona: str
    session: str | None
    turn_id: str | None
    kind: str
    start_line: int
    end_line: int
    score: float
    snippet: str
    timestamp: str | None


@dataclass(frozen=True, slots=True)
class SearchResponse:
    results: list[SearchResult]
    mode: str
    model: str
    took_ms: float

    def as_dict(self) -> dict:
        return {"results": [asdict(r) for r in self.results], "mode": self.mode, "model": self.model,
                "took_ms": round(self.took_ms, 2)}


# -- scoring (pure) -------------------------------------------------------------------------


def vector_score(distance: float) -> float:
    """Cosine distance (1 - cos) → similarity in 0..1."""
    return max(0.0, min(1.0, 1.0 - float(distance)))


def keyword_score(bm25: float) -> float:
    bm25 = max(0.0, float(bm25))
    return bm25 / (bm25 + BM25_K)


def fuse_linear(vec: dict[str, float], kw: dict[str, float], weight: float | None = None) -> dict[str, float]:
    weight = VECTOR_WEIGHT if weight is None else weight
    return {key: weight * vec.get(key, 0.0) + (1 - weight) * kw.get(key, 0.0) for key in vec.keys() | kw.keys()}


def fuse_rrf(vec_ranked: list[str], kw_ranked: list[str], k: int | None = None) -> dict[str, float]:
    """RRF, normalised so that first place in both lists is 1.0."""
    k = RRF_K if k is None else k
    scores: dict[str, float] = {}
    for ranked in (vec_ranked, kw_ranked):
        for rank, key in enumerate(ranked):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank + 1)
    top = 2.0 / (k + 1)
    return {key: value / top for key, value in scores.items()}


def query_terms(query: str) -> list[str]:
    words = [w.lower() for w in _WORD.findall(query)]
    return [w for w in words if w not in _STOP and len(w) > 1] or words


def snippet_for(text: str, start_line: int, terms: list[str]) -> tuple[str, int, int]:
    """The lines of a chunk that match the query (a window around the best
    matching line), or its first lines when nothing matches literally."""
    lines = text.split("\n")
    stems = [t[:5] if len(t) > 5 else t for t in terms]

    def hits(line: str) -> int:
        low = line.lower()
        return sum(1 for s in stems if s in low)

    counts = [hits(line) for line in lines]
    if any(counts):
        best = max(range(len(lines)), key=lambda i: (counts[i], -i))
        lo = max(0, best - 1)
        hi = min(len(lines), lo + SNIPPET_MAX_LINES)
    else:
        lo, hi = 0, min(len(lines), SNIPPET_MAX_LINES)
    while lo < hi - 1 and not lines[lo].strip():
        lo += 1
    window = lines[lo:hi]
    while window and not window[-1].strip():
        window.pop()
    snippet = "\n".join(window)
    if len(snippet) > SNIPPET_MAX_CHARS:
        snippet = snippet[: SNIPPET_MAX_CHARS - 1].rstrip() + "…"
    return snippet, start_line + lo, start_line + lo + max(0, len(window) - 1)


def _iso(ms) -> str | None:
    from indexer.documents import iso_time

    return iso_time(int(ms)) if ms else None


# -- the searcher (I/O edge) -------------------------------------------------------------------------


class Searcher:
    """Holds the LanceDB reader, the state DB and the query embedder; thread-safe for queries."""

    def __init__(self, config: Config, *, embedder=None, state: StateDB | None = None, fusion: str = "linear"):
        from exporters.lancedb import open_reader, sql_in, sql_str

        if "lancedb" not in config.index.sinks:
            raise SearchError("memory_search needs the lancedb sink: add \"lancedb\" to [index] sinks, then sync",
                              code=1)
        self.config = config
        self.fusion = fusion
        self._sql_str, self._sql_in = sql_str, sql_in
        self.state = state or StateDB(config.state_db_path)
        self.reader = open_reader(config.lancedb_dir)
        self._embedder = embedder

    @classmethod
    def open(cls, config: Config, **kwargs) -> "Searcher":
        if not config.state_db_path.exists():
            raise SearchError(f"no index at {config.index.dir}: run `ledger-indexer sync` or start the daemon")
        return cls(config, **kwargs)

    @property
    def embedder(self):
        if self._embedder is None:
            from indexer.context import make_embedder

            self._embedder = make_embedder(self.config)
        return self._embedder

    @property
    def model_name(self) -> str:
        return self.config.embedding.model

    def close(self) -> None:
        self.reader.close()

    def scope_filter(self, request: SearchRequest) -> ScopeFilter:
        facts = self.state.scope_facts(request.persona, request.session)
        try:
            return resolve(request.persona, request.scope, request.session, frozenset(request.sources), facts)
        except ScopeError as exc:
            raise SearchError(str(exc), code=2, http_status=422) from None

    def warm_up(self) -> None:
        """Load the query model now, so no request's ``took_ms`` pays for it."""
        self.embedder.embed_query("warm up")

    def search(self, request: SearchRequest) -> SearchResponse:
        if request.mode is not Mode.KEYWORD:
            self.embedder  # load outside the timer (first query only)
        started = time.perf_counter()
        scope = self.scope_filter(request)
        table = self.reader.active_table(request.persona)
        results: list[SearchResult] = []
        if table is not None and not scope.allows_nothing():
            results = self._query(table, request, scope)
        took = (time.perf_counter() - started) * 1000
        return SearchResponse(results=results, mode=request.mode.value, model=self.model_name, took_ms=took)

    def _query(self, table, request: SearchRequest, scope: ScopeFilter) -> list[SearchResult]:
        where = scope.where(self._sql_str, self._sql_in)
        candidates = max(50, request.max_results * 8)
        rows: dict[str, dict] = {}
        vec: dict[str, float] = {}
        kw: dict[str, float] = {}
        vec_ranked: list[str] = []
        kw_ranked: list[str] = []
        if request.mode in (Mode.HYBRID, Mode.VECTOR):
            qv = self.embedder.embed_query(request.query)
            hits = (table.search(qv, vector_column_name="vector").distance_type("cosine")
                    .where(where, prefilter=True).select([*RESULT_COLUMNS, "_distance"]).limit(candidates).to_list())
            for row in hits:
                vec[row["id"]] = vector_score(row["_distance"])
                vec_ranked.append(row["id"])
                rows[row["id"]] = row
        if request.mode in (Mode.HYBRID, Mode.KEYWORD):
            hits = self._fts(table, request.query, where, candidates)
            for row in hits:
                kw[row["id"]] = keyword_score(row["_score"])
                kw_ranked.append(row["id"])
                rows.setdefault(row["id"], row)
        if request.mode is Mode.VECTOR:
            scores = vec
        elif request.mode is Mode.KEYWORD:
            scores = kw
        elif self.fusion == "rrf":
            scores = fuse_rrf(vec_ranked, kw_ranked)
        else:
            scores = fuse_linear(vec, kw)
        terms = query_terms(request.query)
        best: dict[str, tuple[float, dict]] = {}
        for key, score in scores.items():
            row = rows[key]
            if not scope.allows(row):  # defence in depth: never trust the prefilter alone
                log.error("search.scope_leak_blocked", persona=request.persona, path=row.get("path"))
                continue
            if score < request.min_score:
                continue
            current = best.get(row["path"])
            if current is None or score > current[0]:
                best[row["path"]] = (score, row)
        ranked = sorted(best.values(), key=lambda item: (-item[0], item[1]["path"]))[: request.max_results]
        out = []
        for score, row in ranked:
            snippet, _, _ = snippet_for(row["text"], int(row["start_line"]), terms)
            out.append(SearchResult(
                path=row["path"], source=row["source"], persona=row["persona"], session=row.get("session"),
                turn_id=row.get("turn_id"), kind=row["kind"], start_line=int(row["start_line"]),
                end_line=int(row["end_line"]), score=round(float(score), 4), snippet=snippet,
                timestamp=_iso(row.get("timestamp_ms")),
            ))
        return out

    def _fts(self, table, query: str, where: str, limit: int) -> list[dict]:
        from lancedb.query import MatchQuery

        text = " ".join(_WORD.findall(query))
        if not text:
            return []
        try:
            return (table.search(MatchQuery(text, "text"), query_type="fts")
                    .where(where, prefilter=True).select([*RESULT_COLUMNS, "_score"]).limit(limit).to_list())
        except Exception as exc:  # e.g. no FTS index yet on a brand-new table
            log.warning("search.fts_failed", error=str(exc))
            return []


__all__ = ["SearchRequest", "SearchResponse", "SearchResult", "Searcher", "SearchError", "Mode"]
