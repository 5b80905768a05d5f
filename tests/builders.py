"""One builder for the Documents the sink and exporter tests write.

Real documents come from ``indexer.core.documents`` (ledger rows in); the sink tests
need documents with chosen paths, bodies and kinds, built the same way
everywhere: a ``Session:``/``Turn:`` header, a blank line, the body, the
content hash of the text.
"""

from __future__ import annotations

from indexer.core.documents import content_hash
from indexer.core.safe_names import safe_segment
from indexer.core.types import DocKind, Document, Source


def document(body: str, *, path: str | None = None, persona: str = "atlas", session: str | None = "s1",
             turn: str | None = "t1", kind: DocKind = DocKind.TURN, source: Source = Source.SESSIONS,
             title: str | None = None, timestamp_ms: int | None = None) -> Document:
    """A session document (header + body), or a memory file (``kind=MEMORY``: the text is the body)."""
    if kind is DocKind.MEMORY:
        header: list[str] = []
        text = body
    else:
        header = [f"Session: {session}", f"Turn: {turn}"]
        text = "\n".join(header) + "\n\n" + body
    if path is None:
        folder = "compactions" if kind is DocKind.COMPACTION else "turns"
        path = f"sessions/{safe_segment(session or '')}/{folder}/{turn}.md"
    return Document(path=path, source=source, persona=persona, session=session, turn_id=turn, kind=kind,
                    title=title if title is not None else f"{session} / {turn}", text=text, body=body,
                    content_hash=content_hash(text), timestamp_ms=timestamp_ms,
                    body_start_line=len(header) + 2 if header else 1)
