"""Ranking for ``memory_search`` (pure): turn the candidates' vector and BM25
scores into one score in 0..1 per chunk.

1. **Fusion** — vector: cosine similarity clipped to 0..1; keyword: BM25 mapped
   through ``s / (s + K)`` where ``K`` is the BM25 weight (IDF) of a word found
   in one document of the corpus, ``ln(1 + N)`` for ``N`` indexed chunks
   (``bm25_k`` set to a number fixes ``K`` instead): BM25 grows with the IDF of
   the matched words and IDF with ``ln N``, so one rare word in common scores
   about 0.5 and every word of a several-word query about 0.8–0.9 in a corpus of
   ten chunks as in one of a million; hybrid: ``vector_weight·vector +
   (1 − vector_weight)·keyword``. Absolute functions of the query, the chunk and
   the corpus size, so ``min_score`` means the same for every query (min-max
   normalisation or RRF would make it relative to each result list).
2. **Conversational context** (hybrid) — a turn is read in its conversation:
   ``(f + gate·(neighbour_weight·max(f of the previous and next turn) +
   session_weight·mean(f of the session's best session_top turns))) /
   (1 + neighbour_weight + session_weight)`` with ``gate = min(1,
   f / context_gate)``. An answer often sits one turn after the words of the
   question, and the session that talks about the subject most is the likelier
   one; the gate gives that support in full to a turn with something of its own
   in common with the query (``f ≥ context_gate``: a word, or a related
   meaning) and in proportion below, so a turn that shares nothing with the
   query is not lifted by its session. For memory files, the "session" is the
   file and the neighbours are the adjacent chunks. Candidates missing from the
   lists count as 0, which the division keeps within 0..1.
3. **Dates in the query** (every mode) — when the query names a time
   (:mod:`indexer.core.time_hints`), ``(1 − time_weight)·score + time_weight·match``
   where ``match`` is 1 inside the window and falls to 0 over
   ``time_hints.MARGIN_DAYS`` outside it. Queries without dates, and queries whose
   dates match no candidate, are unaffected.

The score shown to callers is this ranking score through a fixed monotone map
(:mod:`indexer.core.calibration`), which leaves the order alone.

Weights: a grid on LoCoMo with leave-one-conversation-out cross-validation
(bench/RESULTS.md: each conversation's recall measured with the weights chosen
on the nine others); shipped is the point most of those ten choices agree on. They live in one immutable
:class:`RankingSettings`; :data:`SHIPPED` is the default every searcher uses,
and the benchmark passes its own settings object for each grid point.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from indexer.core.time_hints import TimeHints


class Fusion(str, enum.Enum):
    LINEAR = "linear"
    RRF = "rrf"


@dataclass(frozen=True, slots=True)
class RankingSettings:
    """Every ranking knob (see the module docstring for what each does)."""

    vector_weight: float = 0.3
    #: None: ``ln(1 + N)``, the IDF of a word found in one of the corpus's N chunks.
    bm25_k: float | None = None
    rrf_k: int = 60
    neighbour_weight: float = 0.1
    session_weight: float = 1.0
    session_top: int = 1
    context_gate: float = 0.3
    time_weight: float = 0.2
    fusion: Fusion = Fusion.LINEAR


SHIPPED = RankingSettings()


@dataclass(frozen=True, slots=True)
class Candidate:
    """One chunk found by a query. ``vector``/``keyword`` are the 0..1 scores
    (``None``: not in that list); ``group`` is the session label (or the path of
    a memory file) and ``seq`` the turn's position in it (or the chunk index)."""

    key: str
    group: str
    seq: int | None
    vector: float | None
    keyword: float | None
    timestamp_ms: int | None


def vector_score(distance: float, floor: float = 0.0, ceiling: float = 1.0) -> float:
    """Cosine distance (1 - cos) → similarity in 0..1, read on the model's own scale: ``floor``
    the cosine it gives unrelated text, ``ceiling`` the cosine of a query and a text that is
    its very words (MiniLM: 0 and 1; e5 rates any two texts 0.7 or more and a text with itself
    ~0.93 across its query/passage prefixes: indexer.embedding.packaged), so 0 means
    "unrelated", 1 "the query's own words", and fusion weights and calibration mean the same
    whatever the model."""
    cos = 1.0 - float(distance)
    if floor != 0.0 or ceiling != 1.0:
        cos = (cos - floor) / (ceiling - floor)
    return max(0.0, min(1.0, cos))


def bm25_scale(corpus_chunks: int | None, settings: RankingSettings = SHIPPED) -> float:
    """``K`` of :func:`keyword_score`: ``settings.bm25_k``, or ``ln(1 + N)`` (N: the chunks
    the full-text index holds; its IDF is computed over all of them, whatever the scope)."""
    if settings.bm25_k is not None:
        return float(settings.bm25_k)
    return math.log1p(max(1, int(corpus_chunks or 1)))


def keyword_score(bm25: float, settings: RankingSettings = SHIPPED, corpus_chunks: int | None = None) -> float:
    bm25 = max(0.0, float(bm25))
    return bm25 / (bm25 + bm25_scale(corpus_chunks, settings))


def fuse_linear(cands: Sequence[Candidate], settings: RankingSettings = SHIPPED) -> dict[str, float]:
    """Step 1 for hybrid: a chunk missing from one list scores 0 there."""
    w = settings.vector_weight
    return {c.key: w * (c.vector or 0.0) + (1 - w) * (c.keyword or 0.0) for c in cands}


def fuse_rrf(cands: Sequence[Candidate], settings: RankingSettings = SHIPPED) -> dict[str, float]:
    """Reciprocal-rank fusion (the benchmark's comparison), normalised so that first
    place in both lists is 1.0."""
    scores = {c.key: 0.0 for c in cands}
    for side in ("vector", "keyword"):
        ranked = sorted((c for c in cands if getattr(c, side) is not None), key=lambda c: -getattr(c, side))
        for rank_, c in enumerate(ranked):
            scores[c.key] += 1.0 / (settings.rrf_k + rank_ + 1)
    top = 2.0 / (settings.rrf_k + 1)
    return {key: value / top for key, value in scores.items()}


def with_context(base: dict[str, float], cands: Sequence[Candidate],
                 settings: RankingSettings = SHIPPED) -> dict[str, float]:
    """Step 2 of the module docstring; ``base`` holds the fused score of every candidate."""
    top_n = max(1, settings.session_top)
    unit: dict[tuple[str, int], float] = {}  # (group, seq) → best chunk score of that turn
    groups: dict[str, list[float]] = {}
    for c in cands:
        if c.seq is None:  # a chunk without a position is its own unit
            groups.setdefault(c.group, []).append(base[c.key])
        else:
            unit[(c.group, c.seq)] = max(unit.get((c.group, c.seq), 0.0), base[c.key])
    for (group, _), score in unit.items():
        groups.setdefault(group, []).append(score)
    session = {g: sum(sorted(v, reverse=True)[:top_n]) / top_n for g, v in groups.items()}
    nw, sw = settings.neighbour_weight, settings.session_weight
    norm = 1.0 + nw + sw
    out: dict[str, float] = {}
    for c in cands:
        nb = 0.0
        if c.seq is not None:
            nb = max(unit.get((c.group, c.seq - 1), 0.0), unit.get((c.group, c.seq + 1), 0.0))
        own = base[c.key]
        gate = 1.0 if own >= settings.context_gate else own / settings.context_gate
        out[c.key] = (own + gate * (nw * nb + sw * session[c.group])) / norm
    return out


def context_floor(settings: RankingSettings = SHIPPED) -> float:
    """The factor step 2 gives a turn that is alone in its session's candidates (no
    neighbour, no second matching turn): ``(1 + session_weight/session_top) /
    (1 + neighbour_weight + session_weight)``. Dividing by it reads a hybrid score as
    the fused score such a turn would need, which is what calibration maps."""
    top_n = max(1, settings.session_top)
    return (1.0 + settings.session_weight / top_n) / (1.0 + settings.neighbour_weight + settings.session_weight)


def with_time(scores: dict[str, float], cands: Iterable[Candidate], hints: TimeHints,
              settings: RankingSettings = SHIPPED) -> dict[str, float]:
    """Step 3 of the module docstring (unchanged scores when the query names no time)."""
    if not hints:
        return scores
    ts = {c.key: c.timestamp_ms for c in cands}
    match = {k: hints.match(ts.get(k)) for k in scores}
    if not any(match.values()):  # nothing from then (or "2000 users" read as a year): leave scores alone
        return scores
    tw = settings.time_weight
    return {k: (1 - tw) * s + tw * match[k] for k, s in scores.items()}


def rank(cands: Sequence[Candidate], mode: str, hints: TimeHints,
         settings: RankingSettings = SHIPPED) -> dict[str, float]:
    """Score every candidate (``mode``: ``hybrid`` | ``vector`` | ``keyword``)."""
    if mode == "vector":
        scores = {c.key: c.vector or 0.0 for c in cands}
    elif mode == "keyword":
        scores = {c.key: c.keyword or 0.0 for c in cands}
    elif settings.fusion is Fusion.RRF:
        scores = fuse_rrf(cands, settings)
    else:
        scores = with_context(fuse_linear(cands, settings), cands, settings)
    return with_time(scores, cands, hints, settings)


__all__ = ["Candidate", "Fusion", "RankingSettings", "SHIPPED", "rank", "with_context", "with_time", "fuse_linear",
           "fuse_rrf", "vector_score", "keyword_score", "bm25_scale", "context_floor"]
