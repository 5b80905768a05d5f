"""The ``memory`` source: a persona's workspace memory files (``MEMORY.md``,
``memory/**/*.md``), shared by every session of that persona.

Configured per persona as files or folders (``[memory] atlas = [...]``).
Each file becomes one document at ``memory/<path relative to the common
root>``, re-indexed when its hash changes and removed when the file goes.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import structlog

from indexer.core.documents import content_hash
from indexer.core.safe_names import safe_segment
from indexer.core.types import DocKind, Document, Source
from indexer.sync import quiet

log = structlog.get_logger("indexer.memory")
MAX_MEMORY_FILE_BYTES = 2_000_000


def list_memory_files(entries: tuple[Path, ...]) -> list[tuple[Path, str]]:
    """(file, index path) for every markdown file under the configured entries,
    de-duplicated by real path; symlinked folders are not followed."""
    roots = [p for p in entries if p.exists()]
    if not roots:
        return []
    common = Path(os.path.commonpath([str(p.parent if p.is_file() else p.parent) for p in roots]))
    found: dict[str, tuple[Path, str]] = {}
    for entry in roots:
        files = [entry] if entry.is_file() else sorted(
            p for p in entry.rglob("*.md") if p.is_file() and not any(part.startswith(".") for part in p.parts)
        )
        for file in files:
            real = os.path.realpath(file)
            if real in found or file.suffix.lower() != ".md":
                continue
            rel = file.relative_to(common).parts
            segments = [safe_segment(s) for s in rel[:-1]] + [safe_segment(Path(rel[-1]).stem) + ".md"]
            found[real] = (file, "memory/" + "/".join(segments))
    return sorted(found.values(), key=lambda item: item[1])


class MemorySource:
    """Reads, redacts and hashes a file only when its stat changed: a pass over
    unchanged memory files lists them and reads nothing. A file changed less
    than ``quiet.SETTLE_S`` ago is read every time (a write in the same
    timestamp tick could leave its stat unchanged)."""

    def __init__(self, ix) -> None:
        self.ix = ix
        # (persona, file, index path) -> (stat key, document or None when empty)
        self._read: dict[tuple[str, str, str], tuple[tuple, Document | None]] = {}

    def _entries(self, persona: str) -> tuple[Path, ...]:
        return tuple(self.ix.config.memory.get(persona, ()))

    def documents(self, persona: str) -> list[Document]:
        """The persona's whole memory set, for a rebuild (which replaces every document): the files
        read, and for a file there but not read its document indexed before, carried over from a sink
        that holds it. That text was redacted by the rules of its time, and a rebuild is what a new
        rule or known secret asks for: it is redacted again (markers in it shield nothing)."""
        docs, skipped = self._scan(persona)
        for path in sorted(skipped & self.ix.state.paths(persona, source=Source.MEMORY.value)):
            text = next((t for sink in self.ix.sinks if (t := sink.read(persona, path)) is not None), None)
            if text is None:
                log.warning("memory.not_carried_over", persona=persona, path=path,
                            action="the file is unreadable and no sink holds its text: it returns once readable")
                continue
            record = self.ix.state.file(persona, path)
            text = self.ix.redact(text)
            docs.append(_memory_document(persona, path, text, Path(path).name,
                                         record.updated_at if record is not None else 0))
        return docs

    def _scan(self, persona: str) -> tuple[list[Document], set[str]]:
        """(the documents of the files read, the index paths of files there but not read: unreadable or
        too large — their documents indexed before stay until the file can be read or goes)."""
        docs = []
        seen = set()
        skipped: set[str] = set()
        now = time.time()
        for file, path in list_memory_files(self._entries(persona)):
            try:
                stat = file.stat()
            except OSError as exc:
                log.warning("memory.skipped", persona=persona, file=str(file), reason="unreadable", error=str(exc))
                skipped.add(path)
                continue
            key = (persona, str(file), path)
            seen.add(key)
            stamp = quiet.stat_key(stat)
            cached = self._read.get(key)
            if cached is not None and cached[0] == stamp:
                if cached[1] is not None:
                    docs.append(cached[1])
                continue
            self._read.pop(key, None)
            if stat.st_size > MAX_MEMORY_FILE_BYTES:
                log.warning("memory.skipped", persona=persona, file=str(file), reason="too_large",
                            size=stat.st_size)
                skipped.add(path)
                continue
            try:
                raw = file.read_text(encoding="utf-8", errors="replace")
            except OSError as exc:
                log.warning("memory.skipped", persona=persona, file=str(file), reason="unreadable", error=str(exc))
                skipped.add(path)
                continue
            doc = self._document(persona, file, path, raw, stat)
            if quiet.settled_stat(stat, now):
                self._read[key] = (stamp, doc)
            if doc is not None:
                docs.append(doc)
        for key in [k for k in self._read if k[0] == persona and k not in seen]:
            del self._read[key]
        return docs, skipped

    def _document(self, persona: str, file: Path, path: str, raw: str, stat: os.stat_result) -> Document | None:
        text = self.ix.redact(raw.replace("\r\n", "\n")).rstrip("\n")
        if not text.strip():
            return None
        return _memory_document(persona, path, text, file.name, int(stat.st_mtime * 1000))

    def sync(self, persona: str) -> int:
        """Index changed memory files, drop removed ones. Returns documents written."""
        state = self.ix.state
        docs, skipped = self._scan(persona)
        indexed = state.paths(persona, source=Source.MEMORY.value)
        if not docs and not indexed:
            return 0
        known = state.hashes(persona, (d.path for d in docs))
        changed = [d for d in docs if known.get(d.path) != d.content_hash]
        gone = indexed - {d.path for d in docs} - skipped  # a file there but unreadable is not gone
        for sink in self.ix.sinks:
            if changed:
                sink.upsert(persona, changed)
            if gone:
                sink.delete(persona, gone)
        with state.atomic():
            state.record_documents(changed)
            state.forget_documents(persona, gone)
        if changed or gone:
            log.info("memory.synced", persona=persona, written=len(changed), removed=len(gone))
        return len(changed)


def _memory_document(persona: str, path: str, text: str, name: str, timestamp_ms: int) -> Document:
    """The document of a memory file's (redacted) text; titled by its first heading, else its name."""
    title = next((ln.lstrip("#").strip() for ln in text.split("\n") if ln.startswith("#")), name)
    return Document(
        path=path, source=Source.MEMORY, persona=persona, session=None, turn_id=None,
        kind=DocKind.MEMORY, title=title[:200], text=text, body=text, content_hash=content_hash(text),
        timestamp_ms=timestamp_ms, body_start_line=1,
    )
