"""The documents a pass is writing, from before any sink holds them until the state DB records them.

A fork's copy of a private session's own turn must be hidden from the moment a sink holds it, but
the files table (what search and the export derive hidden copies from) records it only after the
write. So a pass notes such copies first (``PrivateTurns.note_in_flight``), and keeps the
documents here until they are recorded: a visibility change made meanwhile (the daemon's API
thread) notes them again under the new visibility, in its own transaction, before it commits.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from indexer.core.types import Document


class WritesInFlight:
    """Per persona, the documents being written. One lock orders every note: a pass's and a
    visibility change's read-modify-write of the same state-DB record never interleave, and a
    change either comes before a pass registers its documents (the pass's note sees the new
    visibility) or sees them registered (and notes them itself)."""

    def __init__(self, ix) -> None:
        self._ix = ix
        self._lock = threading.Lock()
        self._docs: dict[str, list[Sequence[Document]]] = {}

    @contextmanager
    def writing(self, persona: str, docs: Sequence[Document]) -> Iterator[None]:
        """Hold ``docs`` as being written while the block runs (it writes them and records them)."""
        with self._lock:
            self._docs.setdefault(persona, []).append(docs)
        self.note(persona, docs)
        try:
            yield
        finally:
            with self._lock:
                held = self._docs[persona]
                held.remove(docs)
                if not held:
                    del self._docs[persona]

    def note(self, persona: str, docs: Sequence[Document]) -> None:
        """Note the copies among ``docs`` now (a rebuild, again right before its switch)."""
        with self._lock:
            noted = self._ix.state.private.note_in_flight(persona, docs)
            flying = noted or (self._ix.publisher is not None and bool(self._ix.state.private.in_flight(persona)))
        # Object storage: readers hide the copies before the table holds them. Whenever copies are in
        # flight, not only when noted now: a publish that failed is made before the retried write
        # (the publisher skips a state it published already).
        if flying:
            self._ix.publish_scopes()

    @contextmanager
    def change(self) -> Iterator[None]:
        """Wrap a visibility change's transaction; call :meth:`note_again` inside it, after the change."""
        with self._lock:
            yield

    def note_again(self) -> None:
        """Note every document being written by the visibility the caller's transaction now holds."""
        for persona, batches in self._docs.items():
            for docs in batches:
                self._ix.state.private.note_in_flight(persona, docs)
