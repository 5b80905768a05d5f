"""The content contract: ledger rows in, redacted markdown documents out.

Pure functions, no I/O. A turn document is a short header for humans, a blank
line, then ``User:`` / ``Assistant:`` blocks in message order. Only user and
assistant ``content`` ever appears: never system prompts, tool calls, tool
results or ``thinking``. Everything shown, the label included, is redacted
before hashing, so a hash never depends on a secret.

A turn that follows another normal turn of its session opens its body with one
``Previous: …`` line: the opening words of the previous turn's first message
(:func:`turn_context`). A reply rarely names what it answers ("Yes, twice a
week"); with the question before it, both stages find it (LoCoMo, issue 36).
The context is taken from the previous turn's text *after* redacting it whole,
like its own document, so it never holds what that document masks.
"""

from __future__ import annotations

import datetime as dt
import enum
import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from indexer.core.safe_names import safe_segment, turn_path
from indexer.core.types import DocKind, Document, Source
from ledger.rows import CompactionRow, MessageRow, TurnRow

Redact = Callable[[str], str]

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_LINEBREAKS = re.compile(r"[\r\n\u2028\u2029\x85]")
TITLE_WORDS = 12
#: Opens the context line of a turn document (``chunking.embedding_text`` drops it, like the role labels).
CONTEXT_LABEL = "Previous: "
#: At most this many characters of the previous turn, cut on a word boundary.
CONTEXT_MAX_CHARS = 200
_BLOCK = re.compile(r"^(?:User|Assistant): ")
_NEXT_BLOCK = re.compile(r"\n\n(?=(?:User|Assistant): )")


class SkipReason(str, enum.Enum):
    """Why a document was not built. Counted per persona in status."""

    MESSAGE_TOO_LARGE = "message_too_large"
    MISSING_TURN = "missing_turn"
    BAD_ANCESTRY = "bad_ancestry"
    MISSING_THREAD = "missing_thread"
    MISSING_COMPACTION = "missing_compaction"
    INVALID_ROW = "invalid_row"


@dataclass(frozen=True, slots=True)
class Skip:
    reason: SkipReason
    session: str
    turn_id: str | None
    detail: str = ""


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def one_line(value: str) -> str:
    """A label shown in a header: line breaks and control characters become
    visible escapes, so a hostile label cannot forge ``User:`` lines."""
    value = _LINEBREAKS.sub(lambda m: repr(m.group())[1:-1], value)
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", value)


def iso_time(ms: int | None) -> str | None:
    if not ms:
        return None
    try:
        return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return None


def _header(label: str, turn_id: str, turn: TurnRow, kind: DocKind, redact: Redact, model: str | None,
            provider: str | None) -> list[str]:
    lines = [f"Session: {one_line(redact(label))}", f"Turn: {one_line(turn_id)}"]
    if kind is DocKind.COMPACTION:
        lines.append("Kind: compaction")
    when = iso_time(turn.completed_at or turn.started_at)
    if when:
        lines.append(f"Time: {when}")
    if model:  # ledger text like any other: a key pasted into a model name is masked too
        lines.append(f"Model: {one_line(redact(model))}")
    if provider:
        lines.append(f"Provider: {one_line(redact(provider))}")
    return lines


def _title(label: str, body: str, turn: TurnRow, kind: DocKind, redact: Redact) -> str:
    words = " ".join(body.split()[: TITLE_WORDS + 1][1:])  # drop the "User:" prefix word
    date = (iso_time(turn.completed_at or turn.started_at) or "")[:10]
    prefix = "Compaction" if kind is DocKind.COMPACTION else "Turn"
    parts = [p for p in (one_line(redact(label)), date, f"{prefix}: {words}" if words else prefix) if p]
    return " · ".join(parts)


def _assemble(persona: str, label: str, turn: TurnRow, kind: DocKind, body: str, redact: Redact,
              model: str | None, provider: str | None, context_line: str = "") -> Document:
    header = _header(label, turn.id, turn, kind, redact, model, provider)
    title = _title(label, body, turn, kind, redact)  # the turn's own words, never the context's
    if context_line:
        body = f"{context_line}\n\n{body}"
    text = "\n".join(header) + "\n\n" + body
    return Document(
        path=turn_path(safe_segment(label), turn.id, compaction=kind is DocKind.COMPACTION),
        source=Source.SESSIONS,
        persona=persona,
        session=label,
        turn_id=turn.id,
        kind=kind,
        title=title,
        text=text,
        body=body,
        content_hash=content_hash(text),
        timestamp_ms=turn.completed_at or turn.started_at or None,
        body_start_line=len(header) + 2,
    )


def turn_text(messages: Sequence[MessageRow], *, max_message_bytes: int) -> tuple[str, int] | None:
    """The unredacted body of a normal turn (``User:`` / ``Assistant:`` blocks) and the bytes
    cut from oversized messages, or None when it has no user/assistant text at all."""
    blocks: list[str] = []
    cut = 0
    for msg in messages:
        if msg.role not in ("user", "assistant"):
            continue
        if msg.content is None:
            continue  # NULL content: a tool-call placeholder, nothing to show
        content = msg.content.strip()
        left_out = msg.truncated
        if left_out:
            content, left_out = cut_cleanly(msg.content, left_out)
        if not content and not left_out:
            continue
        if left_out:  # the marker alone when the whole head was one word
            content = (content + truncation_marker(left_out, max_message_bytes)).lstrip("\n")
            cut += left_out
        speaker = "User" if msg.role == "user" else "Assistant"
        blocks.append(f"{speaker}: {content}")
    return ("\n\n".join(blocks), cut) if blocks else None


def turn_context(previous: Sequence[MessageRow], *, redact: Redact, max_message_bytes: int,
                 max_chars: int = CONTEXT_MAX_CHARS) -> str | None:
    """The context a turn carries from the turn before it: the opening words of that turn's first
    user message (its first message when it has none), on one line, at most ``max_chars``
    characters cut on a word boundary; None when it has no text (or ``max_chars`` is 0).

    The previous turn's text is redacted whole, as its own document is, and only then cut: a cut
    could split a secret from what makes a rule recognise it (``password: …``), and a value a
    rule finds anywhere in that turn is masked where it recurs in the part kept."""
    if max_chars <= 0:
        return None
    raw = turn_text(previous, max_message_bytes=max_message_bytes)
    if raw is None:
        return None
    try:
        redacted = redact(raw[0])
    except ValueError:  # the redactor refused the previous turn (too costly): it is a bad row, no line
        return None
    blocks = _NEXT_BLOCK.split(redacted)
    first = next((b for b in blocks if b.startswith("User: ")), blocks[0])
    words = " ".join(_BLOCK.sub("", first, count=1).split())  # one line: it cannot forge a block
    if len(words) > max_chars:
        cut = words[: max_chars + 1]
        words = (cut[: cut.rfind(" ")] if " " in cut else cut[:max_chars]).rstrip() + " …"
    return words or None


def turn_document(
    persona: str,
    label: str,
    turn: TurnRow,
    messages: Sequence[MessageRow],
    *,
    redact: Redact,
    max_message_bytes: int,
    previous: Sequence[MessageRow] | None = None,
) -> Document | Skip | None:
    """The document of one normal turn, a :class:`Skip` for bad data, or None
    when the turn has no user/assistant text at all (nothing to remember).
    ``previous``: the messages of the turn before it in its session, for the context line
    (:func:`turn_context`); None when there is none to show: the first turn, one after a
    compaction or an unfinished turn, a fork's first turn (the caller decides)."""
    raw = turn_text(messages, max_message_bytes=max_message_bytes)
    if raw is None:
        return None
    # Redacted as one text: a secret that a rule recognises in one message
    # is masked wherever it recurs in the turn, in the other message too.
    context = turn_context(previous, redact=redact, max_message_bytes=max_message_bytes) if previous else None
    line, body = "", ""
    if context:
        # The context and the turn redacted as one text as well: a value a rule finds in this
        # turn is masked where it recurs in the context (the context alone is one line).
        try:
            line, _, body = redact(f"{CONTEXT_LABEL}{context}\n\n{raw[0]}").partition("\n\n")
        except ValueError:  # refused together: the turn alone decides (a bad row if it is refused too)
            line, body = "", ""
    if not line.startswith(CONTEXT_LABEL) or not body:  # no context (or a redactor that changed the layout)
        line, body = "", redact(raw[0])
    doc = _assemble(persona, label, turn, DocKind.TURN, body, redact, turn.model, turn.provider, line)
    return replace(doc, truncated_bytes=raw[1]) if raw[1] else doc


def compaction_text(compaction: CompactionRow, *, max_message_bytes: int) -> tuple[str, int] | None:
    """The unredacted summary of a compaction (with its truncation marker) and the bytes cut,
    or None when it has none."""
    if compaction.summary is None:
        return None
    summary = compaction.summary.strip()
    left_out = compaction.truncated
    if left_out:
        summary, left_out = cut_cleanly(compaction.summary, left_out)
    if not summary and not left_out:
        return None
    if left_out:
        summary = (summary + truncation_marker(left_out, max_message_bytes)).lstrip("\n")
    return summary, left_out


def compaction_document(
    persona: str,
    label: str,
    turn: TurnRow,
    compaction: CompactionRow | None,
    *,
    redact: Redact,
    max_message_bytes: int,
) -> Document | Skip | None:
    if compaction is None:
        return Skip(SkipReason.MISSING_COMPACTION, label, turn.id, "compaction turn without a compactions row")
    raw = compaction_text(compaction, max_message_bytes=max_message_bytes)
    if raw is None:
        return None
    summary, left_out = raw
    body = f"Summary: {redact(summary)}"
    doc = _assemble(persona, label, turn, DocKind.COMPACTION, body, redact,
                    compaction.model or turn.model, compaction.provider or turn.provider)
    return replace(doc, truncated_bytes=left_out) if left_out else doc


def cut_cleanly(head: str, left_out: int) -> tuple[str, int]:
    """``head`` (a text cut at the byte limit, ``left_out`` bytes after it) without the word the cut
    split: a secret split there would be stored nearly whole and no longer match its rule (a token
    one character short). Returns the text, stripped, and the bytes now left out."""
    if head[-1:].isspace():
        return head.strip(), left_out  # the cut fell between words
    split = max(head.rfind(c) for c in " \t\n\r")
    return head[:max(split, 0)].strip(), left_out + len(head[split + 1:].encode("utf-8", "surrogatepass"))


def truncation_marker(left_out: int, limit: int) -> str:
    """Shown where an oversized message was cut, so a reader knows text is missing."""
    return f"\n[… truncated: {left_out:,} more bytes (ledger.max_message_bytes = {limit:,})]"
