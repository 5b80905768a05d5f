"""The score callers see (pure): the ranking score of :mod:`indexer.core.ranking`
through one fixed, strictly increasing map onto 0..1, so that ``min_score``
reads the same for every query and the order of the results never changes.

**Evidence** ``x``. In ``vector`` and ``keyword`` mode, ``x`` is the ranking
score itself (cosine similarity; BM25 saturated at the IDF of a word found in
one chunk). In ``hybrid`` mode the ranking score is the fused score
``0.3·vector + 0.7·keyword`` (shipped weights) read in its conversation, which
divides a turn alone in its session by up to ``1/context_floor`` (2.1/1.5 as
shipped); ``x = score / context_floor`` undoes that, so ``x`` is the fused
score a turn would need on its own to rank there: ``x`` ≈ 1 for a turn that is
the query's words and meaning, up to ``1/context_floor`` for a turn whose
neighbours and session match too. RRF fusion (a benchmark comparison only) is
rank-based and is shown as it is.

**Map** ``score = x^p / (x^p + h^p)`` (``h`` = :attr:`Calibration.half`,
``p`` = :attr:`Calibration.power`): 0.5 at ``x = h``; strictly increasing, so it
never reorders; 0 at ``x = 0`` and below 1 everywhere. ``h`` and ``p`` are set
from what the parts of ``x`` mean, not fitted:

- *the query's words and meaning* — MiniLM cosine ≥ 0.85 for a text holding
  the query's words, every query word present (BM25 of several words ≥ 4× the
  one-word IDF: keyword ≥ 0.8), ``x ≥ 0.3·0.85 + 0.7·0.8 ≈ 0.82`` → **≥ 0.9**;
- *one rare word in common*, nothing else (cosine ~0.2, keyword ~0.5):
  ``x ≈ 0.41`` → **~0.4**;
- *nothing in common* (cosine ≤ 0.2 — MiniLM's range for unrelated text —, no
  word): ``x ≤ 0.06`` → **< 0.001**.

Read a score as: ≥ 0.9 the query's own words and meaning; 0.5–0.9 clearly on
the subject (most words, or close meaning, or a matching date or
conversation); 0.2–0.5 a word or two in common or a related subject; < 0.1
unrelated. A turn in a session that discusses the subject gets part of that
session's score (the conversational context), so it sits above 0 even when it
shares no word itself. ``bench/RESULTS.md`` reports how the scores of
LoCoMo's gold and non-gold turns fall and what ``min_score`` 0.3/0.5 keeps.
"""

from __future__ import annotations

from dataclasses import dataclass

from indexer.core.ranking import SHIPPED, Fusion, RankingSettings, context_floor


@dataclass(frozen=True, slots=True)
class Calibration:
    half: float = 0.45
    power: float = 4.0


SHIPPED_CALIBRATION = Calibration()


def evidence(score: float, mode: str, settings: RankingSettings = SHIPPED) -> float:
    """``x`` of the module docstring for one ranking score."""
    score = max(0.0, float(score))
    if mode == "hybrid" and settings.fusion is Fusion.LINEAR:
        return score / context_floor(settings)
    return score


def calibrated(score: float, mode: str, settings: RankingSettings = SHIPPED,
               calibration: Calibration = SHIPPED_CALIBRATION) -> float:
    """The score a caller sees for one ranking score (0..1, strictly increasing in it)."""
    if mode == "hybrid" and settings.fusion is Fusion.RRF:
        return min(1.0, max(0.0, float(score)))
    x = evidence(score, mode, settings)
    if x <= 0.0:
        return 0.0
    r = (min(x, 1e6) / calibration.half) ** calibration.power  # underflows to 0 near x = 0, never overflows
    return r / (1.0 + r)


__all__ = ["Calibration", "SHIPPED_CALIBRATION", "calibrated", "evidence"]
