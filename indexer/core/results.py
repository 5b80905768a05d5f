"""From scored chunks to results (pure): one result per document, then one per
turn that forked sessions share.

1. **One per document** — a document's result is its best-scoring chunk.
2. **One per forked turn** — a turn in the ancestry of several sessions (a fork)
   is stored once per session (``sessions/<label>/turns/<turn>.md``), with the
   same body in every copy. Such copies become one result: the best-scoring
   copy is kept and :attr:`Hit.sessions` lists every session that holds the
   turn, the kept copy's session first, then the others by score. Copies are
   merged only when they are the same kind of document for the same ledger
   ``turn_id`` *and* their best chunks are identical (same chunk index, same
   text): a turn whose content differs between two copies stays two results.
   Memory files (no session, no turn id) are never merged.

Every row given here has already passed the caller's scope (the searcher
filters candidates before ranking), so :attr:`Hit.sessions` never names a
session the caller may not see; and a LanceDB table holds one persona, so
nothing is ever merged across personas. Copies that did not make the
candidate lists are not listed (both copies share their vector and BM25
scores, so they enter the lists together).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Hit:
    """One result: ``key`` is its best chunk (a row id), ``score`` that chunk's
    score, ``sessions`` the sessions holding the same turn (empty for memory)."""

    key: str
    score: float
    sessions: tuple[str, ...]


def _fork_key(row: Mapping) -> tuple | None:
    if row.get("session") is None or not row.get("turn_id"):
        return None
    return (row.get("source"), row.get("kind"), row["turn_id"], row.get("chunk_index"), row.get("text"))


def _best_per_document(scores: Mapping[str, float], rows: Mapping[str, Mapping]) -> list[tuple[str, tuple[float, str]]]:
    """(path, (score, key)) of each document's best chunk, best first (ties by path, then key)."""
    best: dict[str, tuple[float, str]] = {}
    for key, score in scores.items():
        path = rows[key]["path"]
        current = best.get(path)
        if current is None or score > current[0] or (score == current[0] and key < current[1]):
            best[path] = (score, key)
    return sorted(best.items(), key=lambda item: (-item[1][0], item[0]))


def _group_key(row: Mapping) -> tuple | None:
    """The fork key without the text: copies that *may* merge (the text decides)."""
    if row.get("session") is None or not row.get("turn_id"):
        return None
    return (row.get("source"), row.get("kind"), row["turn_id"], row.get("chunk_index"))


def shown_candidates(scores: Mapping[str, float], rows: Mapping[str, Mapping], limit: int) -> list[str]:
    """The row ids :func:`collapse` needs to produce the first ``limit`` hits exactly, read
    without the text (``path``, ``session``, ``turn_id``, ``kind``, ``source``, ``chunk_index``):
    the best chunk of the best documents until ``limit`` fork groups are covered, and every
    candidate document of those groups (a copy only merges within its group, so the hits
    built from these ids are the first hits built from all of them). Best first."""
    docs = _best_per_document(scores, rows)
    groups: dict[tuple, list[str]] = {}
    for _path, (_score, key) in docs:
        gk = _group_key(rows[key])
        if gk is not None:
            groups.setdefault(gk, []).append(key)
    out: list[str] = []
    seen_groups: set[tuple] = set()
    taken: set[str] = set()
    for _path, (_score, key) in docs:
        if len(seen_groups) >= limit:
            break
        if key in taken:
            continue
        gk = _group_key(rows[key])
        members = groups[gk] if gk is not None else [key]
        seen_groups.add(gk if gk is not None else ("doc", key))
        for member in members:
            if member not in taken:
                taken.add(member)
                out.append(member)
    return out


def collapse(scores: Mapping[str, float], rows: Mapping[str, Mapping]) -> list[Hit]:
    """``scores``: row id → score; ``rows``: row id → the row (``path``, ``session``,
    ``turn_id``, ``kind``, ``source``, ``chunk_index``, ``text``). Returns the hits,
    best first (ties by path), as the module docstring says."""
    docs = _best_per_document(scores, rows)
    hits: list[tuple[str, float, list[str]]] = []
    by_fork: dict[tuple, int] = {}
    for _path, (score, key) in docs:
        row = rows[key]
        fk = _fork_key(row)
        if fk is not None and fk in by_fork:
            sessions = hits[by_fork[fk]][2]
            if row["session"] not in sessions:
                sessions.append(row["session"])
            continue
        if fk is not None:
            by_fork[fk] = len(hits)
        hits.append((key, score, [row["session"]] if row.get("session") is not None else []))
    return [Hit(key, score, tuple(sessions)) for key, score, sessions in hits]


__all__ = ["Hit", "collapse", "shown_candidates"]
