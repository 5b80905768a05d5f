"""Plain typed values returned by ledger queries (no ORM objects escape)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class HistoryRow:
    id: int
    session_label: str
    thread_id: str
    changed_at: int


@dataclass(frozen=True, slots=True)
class SessionRow:
    label: str
    thread_id: str
    persona: str
    status: str
    created_at: int
    updated_at: int


@dataclass(frozen=True, slots=True)
class ThreadRow:
    turn_id: str
    ancestry_json: str | None
    persona: str | None


@dataclass(frozen=True, slots=True)
class TurnRow:
    id: str
    parent_turn_id: str | None
    turn_type: str
    status: str
    started_at: int
    completed_at: int | None
    model: str | None
    provider: str | None
    #: a field of the wrong type, said in words (the turn is a bad row; its other fields are defaults)
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class MessageRow:
    """A user or assistant message. ``content`` is None when it was NULL.
    ``length`` is its size in bytes; over the reader's limit, ``content``
    holds only its first ``limit`` bytes (cut on a UTF-8 boundary) and
    ``truncated`` says how many bytes were left out."""

    id: str
    turn_id: str
    role: str
    content: str | None
    length: int | None
    sequence: int
    truncated: int = 0
    #: a field of the wrong type, said in words (its turn is a bad row)
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class CompactionRow:
    turn_id: str
    summary: str | None
    length: int | None
    model: str | None
    provider: str | None
    truncated: int = 0  # bytes left out over the reader's limit, as for messages
