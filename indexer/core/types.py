"""Typed values shared by the indexer, the sinks and search.

These are the contracts between the pure core (documents, redaction,
chunking, scopes) and the thin edges (ledger I/O, sinks, HTTP, CLI).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Source(str, enum.Enum):
    SESSIONS = "sessions"
    MEMORY = "memory"


class DocKind(str, enum.Enum):
    TURN = "turn"
    COMPACTION = "compaction"
    MEMORY = "memory"


@dataclass(frozen=True, slots=True)
class Document:
    """One indexed document: a turn, a compaction summary or a memory file.

    ``path`` is the index id (``sessions/<safeLabel>/turns/<turnId>.md``,
    ``sessions/<safeLabel>/compactions/<turnId>.md`` or ``memory/...``);
    ``session`` is the ledger's own label, unchanged (None for memory files).
    ``text`` is the full markdown (header, blank line, body), already redacted;
    ``body`` is the redacted body alone (what is embedded, and what forks share);
    ``text.split("\n")[body_start_line - 1:]`` are the body's lines.
    """

    path: str
    source: Source
    persona: str
    session: str | None
    turn_id: str | None
    kind: DocKind
    title: str
    text: str
    body: str
    content_hash: str
    timestamp_ms: int | None = None
    # 1-based line of ``text`` where ``body`` starts. Chunks embed body lines
    # only (so forks with different headers share embeddings) but report line
    # numbers of the whole text.
    body_start_line: int = 1
    # Bytes left out of oversized messages (ledger.max_message_bytes); the
    # body says so with a visible marker. 0: nothing was cut.
    truncated_bytes: int = 0
    # Position of the turn in its session's thread (0-based), for ranking by
    # conversational context; None for memory files.
    turn_seq: int | None = None

    @property
    def lines(self) -> list[str]:
        return self.text.split("\n")


@dataclass(frozen=True, slots=True)
class Chunk:
    """A slice of a document's text, by 1-based inclusive line numbers."""

    index: int
    start_line: int
    end_line: int
    text: str
