"""``memory_search``: hybrid (vector + full text), vector or keyword search over
a persona's LanceDB table, within the caller's scope.

This module is the I/O edge: it resolves the scope, asks LanceDB for
candidates (vector and BM25 lists, prefiltered by the scope; when the query
names a date, also the best candidates inside that time window) and shapes the
results. How candidates are scored — fusion, conversational context, dates — is
:mod:`indexer.core.ranking` (pure); the score a caller sees is that ranking score
through the fixed monotone map of :mod:`indexer.core.calibration`: 0..1, higher
is better, ≥ 0.9 for the query's own words and meaning and near 0 for unrelated
text, the same for every query so that ``min_score`` is a real threshold.

Keyword candidates get their exact vector score too (their vectors come with
the BM25 hits), so a chunk is never scored 0 on one side merely for ranking
just below a list's cut-off.

Results are one per document (its best chunk) and one per turn shared by
forked sessions (the best copy, with ``sessions`` listing every session in the
caller's scope that holds it: :mod:`indexer.core.results`), filtered by the
scope twice: in the LanceDB prefilter (not sent when the scope admits every row
of the persona's table) and again per row in Python, before any ranking — so
nothing outside the scope is ever ranked, merged or listed.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from typing import Literal

import numpy as np
import structlog
from pydantic import BaseModel, ConfigDict, Field, field_validator

from exporters.base import RankCacheStale
from indexer.core import calibration, ranking, time_hints
from indexer.core.errors import Failure, Problem
from indexer.core.names import LABEL
from indexer.core.ranking import SHIPPED, Candidate, RankingSettings, keyword_score, vector_score
from indexer.core.results import collapse, shown_candidates
from indexer.core.scopes import Scope, ScopeError, ScopeFilter, resolve
from indexer.runtime.config import Config
from indexer.runtime.logs import RateLimitedLogger
from indexer.state.db import StateDB

log = structlog.get_logger("indexer.search")

#: Candidates per list (vector, BM25); more cost little and keep context scores whole.
CANDIDATES = 200
#: Extra candidates per list from inside the time window a query names.
TIME_CANDIDATES = 50
MAX_QUERY_CHARS = 2000
SNIPPET_MAX_CHARS = 700
SNIPPET_MAX_LINES = 6
_WORD = re.compile(r"[\w']+", re.UNICODE)
_STOP = frozenset("a an and are as at be by did do for from has have how i in is it me my of on or our so that the "
                  "this to was we what when where which who why will with you your".split())


class Mode(str, enum.Enum):
    HYBRID = "hybrid"
    VECTOR = "vector"
    KEYWORD = "keyword"


class SearchError(Failure):
    """A search that cannot be answered; ``problem`` says what kind (unavailable unless said)."""

    problem = Problem.UNAVAILABLE


class SearchRequest(BaseModel):
    """The request of ARCHITECTURE.md; also the HTTP API's validated body."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    persona: str = Field(min_length=1, max_length=256)
    session: str | None = Field(None, max_length=LABEL.max_length)  # any label of the ledger
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
    #: Every session in the caller's scope holding this turn (forks share turns), this
    #: result's own session first; empty for memory files.
    sessions: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SearchWarning:
    """Part of the answer is missing (e.g. the full-text stage failed): the
    results are still valid, but a client must not read them as complete."""

    code: str
    message: str


@dataclass(frozen=True, slots=True)
class SearchResponse:
    results: list[SearchResult]
    mode: str
    model: str
    took_ms: float
    warnings: tuple[SearchWarning, ...] = ()

    def as_dict(self) -> dict:
        return {"results": [asdict(r) for r in self.results], "mode": self.mode, "model": self.model,
                "took_ms": round(self.took_ms, 2), "warnings": [asdict(w) for w in self.warnings]}


@dataclass(slots=True)
class Retrieved:
    """What one query found before ranking: the scope-checked candidates and their rows
    (by row id), the dates the query names and its words (for snippets)."""

    hints: time_hints.TimeHints
    terms: list[str]
    table: object = None  # the LanceDB table the rows came from (their details are read from it)
    cands: list[Candidate] = field(default_factory=list)
    rows: dict[str, dict] = field(default_factory=dict)
    warnings: list[SearchWarning] = field(default_factory=list)


# -- snippets (pure) ------------------------------------------------------------------------------


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
    from indexer.core.documents import iso_time

    return iso_time(int(ms)) if ms else None


# -- the searcher (I/O edge) -------------------------------------------------------------------------


class Searcher:
    """Holds the LanceDB reader, the state DB and the query embedder; thread-safe for queries."""

    def __init__(self, config: Config, *, embedder=None, state: StateDB | None = None,
                 ranking_settings: RankingSettings = SHIPPED, rank_cache: bool = True):
        from exporters.lancedb import Retriever
        from exporters.lancedb.location import IndexLocation
        from indexer.search.scope_source import scope_source

        if "lancedb" not in config.index.sinks:
            raise SearchError("memory_search needs the lancedb sink: add \"lancedb\" to [index] sinks, then sync")
        self.config = config
        # Immutable; the benchmark passes its own per grid point.
        self.ranking = ranking_settings
        from exporters.lancedb.local_reads import IoUringUnavailable

        try:
            self.retriever = Retriever(IndexLocation.from_config(config),
                                       rank_cache_bytes=config.index.rank_cache_mb * 2**20 if rank_cache else 0)
        except IoUringUnavailable as exc:  # a setting this machine cannot honour: the operator's to change
            raise SearchError(str(exc), Problem.INVALID) from None
        # The state DB locally; on object storage the scope state the writer published (on every
        # machine, the writer's too: one path), checked against this process's model.
        self.state = scope_source(config, self.retriever, lambda: self.embedder.fingerprint) \
            if state is None or self.retriever.published is not None else state
        self._embedder = embedder
        # Full-text failures: counted (the daemon exports it as a metric) and
        # logged at a limited rate, never swallowed.
        self.fts_failures = 0
        self._chunk_counts: dict[tuple, int] = {}
        # A query's embedding and its full-text stage run here, beside the request's thread
        # (scope, vector stage): two tasks per request, four requests at a time.
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="search")
        self._fts_errors = RateLimitedLogger(log, every_s=60, level="warning")
        self._model_errors = RateLimitedLogger(log, every_s=300, level="warning")

    @classmethod
    def open(cls, config: Config, **kwargs) -> Searcher:
        if "lancedb" not in config.index.sinks:
            raise SearchError("memory_search needs the lancedb sink: add \"lancedb\" to [index] sinks, then sync")
        if not config.index.object_store and not config.state_db_path.exists():
            raise SearchError(f"no index at {config.index.dir}: run `ledger-indexer sync` or start the daemon")
        return cls(config, **kwargs)

    @property
    def embedder(self):
        if self._embedder is None:
            from indexer.embedding.factory import make_embedder

            self._embedder = make_embedder(self.config)
        return self._embedder

    @property
    def index_reads(self) -> str:
        """How this searcher reads the index: ``io_uring`` or ``threads`` (a local folder, see
        :mod:`exporters.lancedb.local_reads`), ``object_store``."""
        reads = self.retriever.reads
        return "object_store" if reads is None else reads.value

    @property
    def model_name(self) -> str:
        return self.config.embedding.model

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self.retriever.close()

    def scope_filter(self, request: SearchRequest) -> ScopeFilter:
        facts = self.state.scope_facts(request.persona, request.session)
        try:
            return resolve(request.persona, request.scope, request.session, frozenset(request.sources), facts)
        except ScopeError as exc:
            raise SearchError(str(exc), Problem.INVALID) from None

    def warm_up(self) -> None:
        """Load the query model and the rank columns of every live table now, so no
        request's ``took_ms`` pays for them."""
        self.embedder.embed_query("warm up")
        for persona in self.retriever.personas():
            try:
                self.retriever.warm(persona)
            except Exception as exc:  # queries read the table instead; they report its errors
                log.warning("search.warm_up_failed", persona=persona, error=str(exc)[:300])

    def search(self, request: SearchRequest) -> SearchResponse:
        if request.mode is not Mode.KEYWORD:
            _ = self.embedder  # load outside the timer (first query only)
        started = time.perf_counter()
        try:
            found = self.retrieve(request)
            results = self.assemble(found, request)
        except RankCacheStale as exc:  # never seen; the cache is dropped: ask the table itself
            log.error("search.rank_cache_stale", persona=request.persona, error=str(exc))
            found = self.retrieve(request)
            results = self.assemble(found, request)
        took = (time.perf_counter() - started) * 1000
        return SearchResponse(results=results, mode=request.mode.value, model=self.model_name, took_ms=took,
                              warnings=tuple(found.warnings))

    def retrieve(self, request: SearchRequest) -> Retrieved:
        """The candidates of a query within the caller's scope, before any ranking
        (the benchmark ranks one retrieval many times)."""
        # The query embedding needs neither the scope nor the table: it starts first and runs
        # while they are resolved (10,000 sessions: ~2 ms of state DB reads off the critical path).
        embedding = self._pool.submit(self.embedder.embed_query, request.query) \
            if request.mode is not Mode.KEYWORD else None
        try:
            scope = self.scope_filter(request)
            table = self.retriever.active_table(request.persona)
            if table is None and request.persona not in (indexed := self.state.personas_indexed()):
                if not indexed:  # nothing synced yet: the persona may well be right
                    raise SearchError(f"nothing is indexed yet at {self.config.index.dir}: run `ledger-indexer "
                                      "sync`, or wait for the daemon's first sync (`ledger-indexer status` shows "
                                      "its progress)")
                raise SearchError(f"unknown persona {request.persona!r}: no index holds it (persona ids are the "
                                  "ledger's persona_id, case-sensitive; `ledger-indexer status` lists them)",
                                  Problem.NOT_FOUND)
            found = Retrieved(hints=time_hints.parse(request.query), terms=query_terms(request.query))
            if table is not None and not scope.allows_nothing():
                self._query(table, request, scope, found, embedding)
            return found
        finally:
            if embedding is not None:
                wait([embedding])  # never leave work of this request running after it returned or failed

    def assemble(self, found: Retrieved, request: SearchRequest,
                 settings: RankingSettings | None = None) -> list[SearchResult]:
        """Rank the candidates, calibrate the scores (:mod:`indexer.core.calibration`),
        collapse them to one result per document and per forked turn
        (:mod:`indexer.core.results`), then apply ``min_score`` and ``max_results``."""
        settings = settings or self.ranking
        mode = request.mode.value
        scores = ranking.rank(found.cands, mode, found.hints, settings)
        # Candidates were read without their text (a random read per row): read it now for
        # the ones the first results can come from (:func:`indexer.core.results.shown_candidates`).
        shown = shown_candidates(scores, found.rows, request.max_results)
        self._details(found, shown)
        shown_scores = {k: scores[k] for k in shown if "text" in found.rows[k]}
        hits = []
        for hit in collapse(shown_scores, found.rows):  # ordered by the ranking score; calibration keeps that order
            score = calibration.calibrated(hit.score, mode, settings)
            if score < request.min_score:
                break
            hits.append(dataclasses.replace(hit, score=score))
            if len(hits) == request.max_results:
                break
        out = []
        for hit in hits:
            row = found.rows[hit.key]
            snippet, _, _ = snippet_for(row["text"], int(row["start_line"]), found.terms)
            out.append(SearchResult(
                path=row["path"], source=row["source"], persona=row["persona"], session=row.get("session"),
                turn_id=row.get("turn_id"), kind=row["kind"], start_line=int(row["start_line"]),
                end_line=int(row["end_line"]), score=round(float(hit.score), 4), snippet=snippet,
                timestamp=_iso(row.get("timestamp_ms")), sessions=list(hit.sessions),
            ))
        return out

    def _details(self, found: Retrieved, keys: list[str]) -> None:
        """Fill in the detail columns (text, lines) of ``keys``' rows, in place; a row deleted
        since it was found keeps none (and is left out of the results)."""
        missing = [found.rows[k] for k in keys if "text" not in found.rows[k]]
        if missing and found.table is not None:
            self.retriever.details(found.table, missing)

    def _query(self, table, request: SearchRequest, scope: ScopeFilter, found: Retrieved,
               embedding: Future | None) -> None:
        from exporters.lancedb.retriever import FtsUnavailable

        lance = self.retriever
        where = lance.where(scope)
        depth = max(CANDIDATES, request.max_results * 8)
        hints = found.hints
        time_where = None
        if hints:
            time_where = lance.within(where, hints.ranges())
        found.table = table
        # Ranking reads these; the text and lines of the few results shown come after (_details).
        columns = lance.rank_columns(table)
        rows: dict[str, dict] = {}
        vec: dict[str, float] = {}
        kw: dict[str, float] = {}
        qv = None
        wants_vector = request.mode in (Mode.HYBRID, Mode.VECTOR)
        if wants_vector and not self._same_model(request.persona, found.warnings):
            wants_vector = False  # the live table's vectors are another model's: keyword stage only
        scale = (float(getattr(self.embedder, "cosine_floor", 0.0)), float(getattr(self.embedder, "cosine_ceiling", 1.0))) \
            if wants_vector else (0.0, 1.0)

        def keyword_lists() -> list[tuple[list[dict], np.ndarray | None]]:
            out = []
            for w, limit in ((where, depth), (time_where, TIME_CANDIDATES)):
                if w is not None:
                    out.append(lance.matching(table, request.query, w, limit, columns, with_vectors=wants_vector))
            return out

        # The full-text query needs no query vector: it runs beside the embedding and the
        # vector query (LanceDB and ONNX Runtime release the GIL), so a hybrid query waits
        # for the longer of the two stages, not for their sum.
        pending = self._pool.submit(keyword_lists) \
            if request.mode in (Mode.HYBRID, Mode.KEYWORD) or not wants_vector else None
        try:
            if wants_vector:
                qv = np.asarray(embedding.result(), dtype=np.float32)
                for w, limit in ((where, depth), (time_where, TIME_CANDIDATES)):
                    if w is None:
                        continue
                    for row in lance.nearest(table, qv, w, limit, columns):
                        vec[row["id"]] = vector_score(row["_distance"], *scale)
                        rows.setdefault(row["id"], row)
        except BaseException:
            if pending is not None:
                wait([pending])  # never leave a query of this request running after it failed
            raise
        keyword = None
        if pending is not None:
            try:
                keyword = pending.result()
            except FtsUnavailable as exc:
                self._fts_failed(request, exc, found.warnings)
        if keyword is not None:
            chunks = self._chunks(table)
            for hits, vectors in keyword:
                if vectors is not None:  # exact vector scores, not 0 for ranking below the vector list's cut-off
                    sims = vectors @ (qv / (np.linalg.norm(qv) or 1.0))
                for i, row in enumerate(hits):
                    kw[row["id"]] = keyword_score(row["_score"], self.ranking, chunks)
                    if vectors is not None and row["id"] not in vec:
                        vec[row["id"]] = vector_score(1.0 - float(sims[i]), *scale)
                    rows.setdefault(row["id"], row)
        for key, row in rows.items():
            if not scope.allows(row):  # defence in depth: never trust the prefilter alone
                log.error("search.scope_leak_blocked", persona=request.persona, path=row.get("path"))
                continue
            memory = row.get("session") is None
            seq = row.get("chunk_index") if memory else row.get("turn_seq")
            found.rows[key] = row
            found.cands.append(Candidate(key=key, group=row["path"] if memory else row["session"],
                                         seq=None if seq is None else int(seq), vector=vec.get(key),
                                         keyword=kw.get(key), timestamp_ms=row.get("timestamp_ms")))

    def _same_model(self, persona: str, warnings: list[SearchWarning]) -> bool:
        """Whether the persona's live table was embedded by this process's model. After a change
        of model the daemon rebuilds beside the live table; until the new one switches in, the
        old table's vectors are another model's (same dimension or not): comparing a query
        vector with them is noise, so the query is answered by its keyword stage and says so."""
        if self.retriever.published is not None:
            return True  # object storage: PublishedScopeSource already refuses another model
        meta = self.retriever.meta(persona) or {}
        built, mine = meta.get("fingerprint"), self.embedder.fingerprint
        from indexer.embedding.model_files import same_vector_space

        if built is None or same_vector_space(built, mine):
            return True
        self._model_errors.failure("model", "search.model_changed", persona=persona, index=built, query=mine)
        warnings.append(SearchWarning("model_changed", "the index is being rebuilt with the configured embedding "
                                      "model; until it is done these results come from the keyword stage only"))
        return False

    def _chunks(self, table) -> int:
        """Rows of the table, for the keyword score's scale (BM25's IDF counts every row);
        cached per table version."""
        key = (table.name, self.retriever.version(table))
        n = self._chunk_counts.get(key)
        if n is None:
            n = int(table.count_rows())
            self._chunk_counts = {key: n} if len(self._chunk_counts) > 64 else {**self._chunk_counts, key: n}
        return n

    def _fts_failed(self, request: SearchRequest, exc: Exception, warnings: list[SearchWarning]) -> None:
        """A full-text failure is never silent: keyword mode fails with a clear
        error; hybrid answers from the vector stage and says so."""
        self.fts_failures += 1
        self._fts_errors.failure("fts", "search.fts_failed", persona=request.persona, error=str(exc)[:500])
        if request.mode is Mode.KEYWORD:
            raise SearchError("full-text search is unavailable for this persona's index "
                              f"({str(exc)[:200]}); use mode \"vector\", or run `ledger-indexer reindex`") from None
        warnings.append(SearchWarning("fts_unavailable", "full-text search failed; these results come from the "
                                      "vector stage only (run `ledger-indexer reindex` if it persists)"))


__all__ = ["SearchRequest", "SearchResponse", "SearchResult", "Searcher", "SearchError", "Mode", "Retrieved"]
