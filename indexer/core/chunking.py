"""Split a document into chunks that fit the embedding model's window.

MiniLM sees at most 256 tokens ([CLS] and [SEP] included) and the index
truncates there, so anything past the window would be invisible to vector
search. ``chunk_document`` cuts on line boundaries, greedily, with a token
overlap between consecutive chunks, counting tokens with the model's own
tokenizer (``Embedder.count_tokens``, special tokens excluded).

- Every chunk carries its 1-based inclusive ``start_line``/``end_line`` in the
  text it was cut from (``first_line`` shifts them, e.g. when the body starts
  below a header).
- A line longer than the window is split into pieces on word boundaries
  (characters for one enormous word); each piece is a chunk whose
  ``start_line == end_line`` is that line.
- Blank lines at the edges of a chunk are trimmed; whitespace-only chunks are
  dropped. The output is deterministic and in document order; ``index`` runs
  0..n-1.
- A run of text costs at least ``ceil(len / MAX_CHARS_PER_TOKEN)`` tokens, so
  a long unbroken string that a tokenizer maps to a single ``[UNK]`` (BERT does
  that to any word over 100 characters) still gets split and rows stay small.
- Token counts are per line and summed. For WordPiece (MiniLM) this equals the
  count of the joined text, because newlines are plain whitespace to it; for
  other tokenizers it is a close estimate.

Changing this algorithm or its defaults changes :data:`CHUNKING_VERSION`,
which is part of the index metadata (a change forces a re-embed).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from indexer.core.types import Chunk

CHUNKING_VERSION = "lines-v3"  # v3: the context line is not embedded; v2: nor are role labels
#: Content tokens per chunk: room for [CLS]/[SEP] and tokenizer drift under MiniLM's 256.
DEFAULT_MAX_TOKENS = 200
#: Tokens of context repeated at the start of the next chunk.
DEFAULT_OVERLAP_TOKENS = 40

#: Cost floor: a run of text costs at least one token per this many characters.
MAX_CHARS_PER_TOKEN = 16

_WORD = re.compile(r"\S+\s*")
_ROLE_LABEL = re.compile(r"^(?:User|Assistant|Summary): ", re.MULTILINE)
_CONTEXT_LINE = re.compile(r"\APrevious: [^\n]*\n*")


def embedding_text(chunk_text: str) -> str:
    """What the model sees of a chunk: its text without the ``User:`` / ``Assistant:`` /
    ``Summary:`` labels that open the document's blocks, and without the ``Previous: …`` context
    line that opens a turn's body (:func:`indexer.core.documents.turn_context`). The labels are
    formatting, the same on every turn, and on short turns they pull all vectors together
    (measured on LoCoMo while developing: vector recall@10 41.6 → 44.7 without them). The
    context line helps the keyword stage only: with it embedded, MiniLM's vector recall@10 fell
    53.5 → 51.7 and hybrid rose to 67.8, without it hybrid rose to 71.0 (LoCoMo tuning
    conversations, bench/recall_context.py ``ctx200`` / ``ctx200@vplain``); and a turn's vector
    stays what it was before the line existed (the embedding cache keeps an upgrade cheap).
    The stored text and snippets keep both."""
    return _ROLE_LABEL.sub("", _CONTEXT_LINE.sub("", chunk_text, count=1))


def _costing(count_tokens: Callable[[str], int]) -> Callable[[str], int]:
    def cost(s: str) -> int:
        if not s:
            return 0
        floor = -(-len(s) // MAX_CHARS_PER_TOKEN)
        return floor if not s.strip() else max(count_tokens(s), floor)

    return cost


def chunk_document(
    text: str,
    *,
    count_tokens: Callable[[str], int],
    max_tokens: int = DEFAULT_MAX_TOKENS,
    overlap_tokens: int = DEFAULT_OVERLAP_TOKENS,
    first_line: int = 1,
) -> list[Chunk]:
    """Chunk ``text`` (lines split on ``\\n``) into pieces of at most ``max_tokens``."""
    if max_tokens < 1:
        raise ValueError("max_tokens must be >= 1")
    overlap_tokens = max(0, min(overlap_tokens, max_tokens - 1))
    measure = _costing(count_tokens)
    lines = text.split("\n")
    cost = [measure(ln) for ln in lines]
    n = len(lines)
    spans: list[tuple[int, int, str]] = []  # (start_idx, end_idx, text), 0-based inclusive

    def emit(s: int, e: int) -> None:
        while s <= e and not lines[s].strip():
            s += 1
        while e >= s and not lines[e].strip():
            e -= 1
        if s <= e:
            spans.append((s, e, "\n".join(lines[s : e + 1])))

    i = 0
    while i < n:
        if cost[i] > max_tokens:
            for piece in _split_long_line(lines[i], measure, max_tokens, overlap_tokens):
                if piece.strip():
                    spans.append((i, i, piece))
            i += 1
            continue
        # Greedy window [i, j).
        j, total = i, 0
        while j < n and cost[j] <= max_tokens and total + cost[j] <= max_tokens:
            total += cost[j]
            j += 1
        emit(i, j - 1)
        if j >= n:
            break
        if cost[j] > max_tokens:
            i = j  # the long line is handled on its own; no overlap into or out of it
            continue
        # Next window starts with up to overlap_tokens of this one's tail, must
        # start after i (progress) and must leave room for line j.
        k, ov = j, 0
        while k - 1 > i and ov + cost[k - 1] <= overlap_tokens and ov + cost[k - 1] + cost[j] <= max_tokens:
            k -= 1
            ov += cost[k]
        # Skip an overlap made only of blank lines.
        if all(not lines[m].strip() for m in range(k, j)):
            k = j
        i = k
    return [Chunk(index=ix, start_line=s + first_line, end_line=e + first_line, text=t) for ix, (s, e, t) in enumerate(spans)]


def _split_long_line(line: str, count_tokens: Callable[[str], int], max_tokens: int, overlap_tokens: int) -> list[str]:
    """Pieces of one over-long line, each within ``max_tokens``, on word boundaries."""
    words: list[str] = []
    cost: list[int] = []
    for w in _WORD.findall(line):
        c = count_tokens(w)
        if c > max_tokens:
            parts = _split_word(w, count_tokens, max_tokens)
            words.extend(parts)
            cost.extend(count_tokens(p) for p in parts)
        else:
            words.append(w)
            cost.append(c)
    pieces: list[str] = []
    i, n = 0, len(words)
    while i < n:
        j, total = i, 0
        while j < n and total + cost[j] <= max_tokens:
            total += cost[j]
            j += 1
        if j == i:  # defensive: a word the counter still finds too long
            j = i + 1
        piece = "".join(words[i:j]).strip()
        # Token counts of joined words can exceed the sum (rare merges); shrink until it fits.
        while j - i > 1 and count_tokens(piece) > max_tokens:
            j -= 1
            piece = "".join(words[i:j]).strip()
        pieces.append(piece)
        if j >= n:
            break
        k, ov = j, 0
        while k - 1 > i and ov + cost[k - 1] <= overlap_tokens and ov + cost[k - 1] + cost[j] <= max_tokens:
            k -= 1
            ov += cost[k]
        i = k
    return pieces


def _split_word(word: str, count_tokens: Callable[[str], int], max_tokens: int) -> list[str]:
    """Cut one enormous whitespace-free word into character runs within ``max_tokens``."""
    out: list[str] = []
    rest = word
    while rest:
        if len(rest) <= max_tokens * MAX_CHARS_PER_TOKEN and count_tokens(rest) <= max_tokens:
            out.append(rest)
            break
        lo, hi = 1, min(len(rest), max_tokens * MAX_CHARS_PER_TOKEN)  # largest prefix length that fits
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if count_tokens(rest[:mid]) <= max_tokens:
                lo = mid
            else:
                hi = mid - 1
        out.append(rest[:lo])
        rest = rest[lo:]
    return out
