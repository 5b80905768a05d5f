"""Ranking for ``memory_search`` (pure): turn the candidates' vector and BM25
scores into one score in 0..1 per chunk.

1. **Fusion** — vector: cosine similarity clipped to 0..1; keyword: BM25 mapped
   through ``s / (s + BM25_K)``; hybrid: ``VECTOR_WEIGHT·vector +
   (1 − VECTOR_WEIGHT)·keyword``. Absolute functions of the query and the chunk,
   so ``min_score`` means the same for every query (min-max normalisation or
   RRF would make it relative to each result list).
2. **Conversational context** (hybrid) — a turn is read in its conversation:
   ``(f + NEIGHBOUR_WEIGHT·max(f of the previous and next turn) +
   SESSION_WEIGHT·mean(f of the session's best SESSION_TOP turns)) /
   (1 + NEIGHBOUR_WEIGHT + SESSION_WEIGHT)``. An answer often sits one turn
   after the words of the question, and the session that talks about the
   subject most is the likelier one. For memory files, the "session" is the file
   and the neighbours are the adjacent chunks. Candidates missing from the lists
   count as 0, which the division keeps within 0..1.
3. **Dates in the query** (every mode) — when the query names a time
   (:mod:`indexer.time_hints`), ``(1 − TIME_WEIGHT)·score + TIME_WEIGHT·match``
   where ``match`` is 1 inside the window and falls to 0 over
   ``time_hints.MARGIN_DAYS`` outside it. Queries without dates, and queries whose
   dates match no candidate, are unaffected.

Weights: the best LoCoMo recall@10 of a grid; two-fold cross-validation over
its conversations estimates what they give on conversations they were not
chosen on (bench/RESULTS.md). The constants are read at call time, so the
benchmark can set them in-process.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Iterable, Sequence

from indexer.time_hints import TimeHints

VECTOR_WEIGHT = 0.3
BM25_K = 8.0
RRF_K = 60
NEIGHBOUR_WEIGHT = 0.1
SESSION_WEIGHT = 1.0
SESSION_TOP = 2
TIME_WEIGHT = 0.2


class Fusion(str, enum.Enum):
    LINEAR = "linear"
    RRF = "rrf"


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


def vector_score(distance: float) -> float:
    """Cosine distance (1 - cos) → similarity in 0..1."""
    return max(0.0, min(1.0, 1.0 - float(distance)))


def keyword_score(bm25: float) -> float:
    bm25 = max(0.0, float(bm25))
    return bm25 / (bm25 + BM25_K)


def fuse_linear(cands: Sequence[Candidate]) -> dict[str, float]:
    """Step 1 for hybrid: a chunk missing from one list scores 0 there."""
    return {c.key: VECTOR_WEIGHT * (c.vector or 0.0) + (1 - VECTOR_WEIGHT) * (c.keyword or 0.0) for c in cands}


def fuse_rrf(cands: Sequence[Candidate]) -> dict[str, float]:
    """Reciprocal-rank fusion (the benchmark's comparison), normalised so that first
    place in both lists is 1.0."""
    scores = {c.key: 0.0 for c in cands}
    for side in ("vector", "keyword"):
        ranked = sorted((c for c in cands if getattr(c, side) is not None), key=lambda c: -getattr(c, side))
        for rank_, c in enumerate(ranked):
            scores[c.key] += 1.0 / (RRF_K + rank_ + 1)
    top = 2.0 / (RRF_K + 1)
    return {key: value / top for key, value in scores.items()}


def with_context(base: dict[str, float], cands: Sequence[Candidate]) -> dict[str, float]:
    """Step 2 of the module docstring; ``base`` holds the fused score of every candidate."""
    top_n = max(1, SESSION_TOP)
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
    norm = 1.0 + NEIGHBOUR_WEIGHT + SESSION_WEIGHT
    out: dict[str, float] = {}
    for c in cands:
        nb = 0.0
        if c.seq is not None:
            nb = max(unit.get((c.group, c.seq - 1), 0.0), unit.get((c.group, c.seq + 1), 0.0))
        out[c.key] = (base[c.key] + NEIGHBOUR_WEIGHT * nb + SESSION_WEIGHT * session[c.group]) / norm
    return out


def with_time(scores: dict[str, float], cands: Iterable[Candidate], hints: TimeHints) -> dict[str, float]:
    """Step 3 of the module docstring (unchanged scores when the query names no time)."""
    if not hints:
        return scores
    ts = {c.key: c.timestamp_ms for c in cands}
    match = {k: hints.match(ts.get(k)) for k in scores}
    if not any(match.values()):  # nothing from then (or "2000 users" read as a year): leave scores alone
        return scores
    return {k: (1 - TIME_WEIGHT) * s + TIME_WEIGHT * match[k] for k, s in scores.items()}


def rank(cands: Sequence[Candidate], mode: str, hints: TimeHints, fusion: Fusion = Fusion.LINEAR) -> dict[str, float]:
    """Score every candidate (``mode``: ``hybrid`` | ``vector`` | ``keyword``)."""
    if mode == "vector":
        scores = {c.key: c.vector or 0.0 for c in cands}
    elif mode == "keyword":
        scores = {c.key: c.keyword or 0.0 for c in cands}
    elif fusion is Fusion.RRF:
        scores = fuse_rrf(cands)
    else:
        scores = with_context(fuse_linear(cands), cands)
    return with_time(scores, cands, hints)


__all__ = ["Candidate", "Fusion", "rank", "with_context", "with_time", "fuse_linear", "fuse_rrf",
           "vector_score", "keyword_score", "VECTOR_WEIGHT", "BM25_K", "RRF_K"]
