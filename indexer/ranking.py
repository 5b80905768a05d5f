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
   ``TIME_MARGIN_DAYS`` outside it. Queries without dates, and queries whose
   dates match no candidate, are unaffected.

Weights were chosen on LoCoMo with two-fold cross-validation over its
conversations (bench/RESULTS.md).
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
TIME_MARGIN_DAYS = 7.0


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


def keyword_score(bm25: float, k: float | None = None) -> float:
    bm25 = max(0.0, float(bm25))
    k = BM25_K if k is None else k
    return bm25 / (bm25 + k)


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


def with_context(base: dict[str, float], cands: Sequence[Candidate], *, neighbour_weight: float | None = None,
                 session_weight: float | None = None, session_top: int | None = None) -> dict[str, float]:
    """Step 2 of the module docstring; ``base`` holds the fused score of every candidate."""
    nw = NEIGHBOUR_WEIGHT if neighbour_weight is None else neighbour_weight
    sw = SESSION_WEIGHT if session_weight is None else session_weight
    top_n = SESSION_TOP if session_top is None else max(1, session_top)
    unit: dict[tuple[str, int], float] = {}  # (group, seq) → best chunk score of that turn
    groups: dict[str, list[float]] = {}
    for c in cands:
        if c.seq is not None:
            u = (c.group, c.seq)
            unit[u] = max(unit.get(u, 0.0), base[c.key])
    for (group, _), score in unit.items():
        groups.setdefault(group, []).append(score)
    # a chunk without a position is its own unit
    for c in cands:
        if c.seq is None:
            groups.setdefault(c.group, []).append(base[c.key])
    session = {g: sum(sorted(v, reverse=True)[:top_n]) / top_n for g, v in groups.items()}
    out: dict[str, float] = {}
    norm = 1.0 + nw + sw
    for c in cands:
        nb = 0.0
        if c.seq is not None:
            nb = max(unit.get((c.group, c.seq - 1), 0.0), unit.get((c.group, c.seq + 1), 0.0))
        out[c.key] = (base[c.key] + nw * nb + sw * session[c.group]) / norm
    return out


def with_time(scores: dict[str, float], cands: Iterable[Candidate], hints: TimeHints, *,
              weight: float | None = None, margin_days: float | None = None) -> dict[str, float]:
    """Step 3 of the module docstring (unchanged scores when the query names no time)."""
    if not hints:
        return scores
    w = TIME_WEIGHT if weight is None else weight
    margin = TIME_MARGIN_DAYS if margin_days is None else margin_days
    ts = {c.key: c.timestamp_ms for c in cands}
    match = {k: hints.match(ts.get(k), margin) for k in scores}
    if not any(match.values()):  # nothing from then (or "2000 users" read as a year): leave scores alone
        return scores
    return {k: (1 - w) * s + w * match[k] for k, s in scores.items()}


def rank(cands: Sequence[Candidate], mode: str, hints: TimeHints, fusion: Fusion = Fusion.LINEAR) -> dict[str, float]:
    """Score every candidate (``mode``: ``hybrid`` | ``vector`` | ``keyword``)."""
    if mode == "vector":
        scores = {c.key: c.vector or 0.0 for c in cands}
    elif mode == "keyword":
        scores = {c.key: c.keyword or 0.0 for c in cands}
    elif fusion is Fusion.RRF:
        vec = sorted((c for c in cands if c.vector is not None), key=lambda c: -c.vector)
        kw = sorted((c for c in cands if c.keyword is not None), key=lambda c: -c.keyword)
        scores = fuse_rrf([c.key for c in vec], [c.key for c in kw])
        scores = {c.key: scores.get(c.key, 0.0) for c in cands}
    else:
        base = fuse_linear({c.key: c.vector or 0.0 for c in cands}, {c.key: c.keyword or 0.0 for c in cands})
        scores = with_context(base, cands)
    return with_time(scores, cands, hints)


__all__ = ["Candidate", "Fusion", "rank", "with_context", "with_time", "fuse_linear", "fuse_rrf",
           "vector_score", "keyword_score", "VECTOR_WEIGHT", "BM25_K", "RRF_K"]
