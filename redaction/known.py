"""Exact-value redaction of secrets the operator knows about.

Patterns miss secrets without a recognisable shape (a database password
like ``correct-horse``). If the deployment knows its own secrets, listing
them here guarantees they never reach the index, wherever they appear.
"""

from __future__ import annotations

import json
import os
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from .fold import dashed, fold_value

__all__ = ["KnownSecrets", "IgnoredEntry", "MIN_KNOWN_SECRET_LENGTH", "RedactionTooCostly"]

# Values shorter than this are ignored: masking every "abc" or "1234" in the
# corpus would shred ordinary text while protecting almost nothing (such a
# secret is guessable anyway).
MIN_KNOWN_SECRET_LENGTH = 4


@dataclass(frozen=True, slots=True)
class IgnoredEntry:
    """A configured value that was not used. Never contains the value itself."""

    line: int
    """1-based position in the file / list."""
    reason: str


# One walk of the text (a lookup at each offset, in Python) pays off over a search per needle (in C,
# a few GB/s) from about this many needles.
_FIND_EACH_LIMIT = 2000
_CHUNK = 16  # characters a trie level consumes (the first level: fewer when a needle is shorter)
# The walk's work (trie nodes visited and tails looked up) may reach this many steps a character of
# text, plus a floor: beyond it the text was built to make the walk slow (thousands of values it
# states itself, sharing long prefixes with what follows) and is refused (RedactionTooCostly).
_STEPS_PER_CHAR = 6
_STEPS_FLOOR = 1_000_000


class RedactionTooCostly(ValueError):
    """Finding every repeat of a text's secrets would take too long: the text is refused whole (its
    turn is a bad row, logged and retried with ``--retry-bad``), never indexed half-masked. The
    message names sizes only, never the text."""


def _needle_runs(text: str, needle: str) -> list[tuple[int, int]]:
    """The occurrences of ``needle`` in ``text`` joined where they overlap (a value repeating
    itself, "abab…" in "abababab…"), without listing each one: from an occurrence, the last one
    starting inside it extends the run (``rfind`` over a window of twice the needle), so a run
    costs O(its length) in C whatever the number of occurrences inside it."""
    out: list[tuple[int, int]] = []
    n = len(needle)
    i = text.find(needle)
    while i >= 0:
        start, last = i, i
        end = i + n
        while True:
            j = text.rfind(needle, last + 1, end - 1 + n)
            if j < 0:
                break
            last, end = j, j + n
        out.append((start, end))
        i = text.find(needle, end)
    return out


class _ChunkTrie:
    """Needles by 16-character chunks: the first level keyed by the first ``width`` characters (the
    shortest needle's length, at most 16), each deeper level by the next 16; what is left of a
    needle (under 16 characters) is kept at its node by length."""

    __slots__ = ("width", "root", "count")

    def __init__(self, needles: Iterable[str]) -> None:
        needles = list(needles)
        self.count = len(needles)
        self.width = min(_CHUNK, *(len(n) for n in needles)) if needles else _CHUNK
        self.root: dict[str, _Node] = {}
        for needle in needles:
            node = self.root.setdefault(needle[:self.width], _Node())
            pos = self.width
            while len(needle) - pos >= _CHUNK:
                node = node.children.setdefault(needle[pos:pos + _CHUNK], _Node())
                pos += _CHUNK
            node.tails.setdefault(len(needle) - pos, set()).add(needle[pos:])
        for node in _nodes(self.root):  # longest tail first: the first hit at a node is its longest
            node.tails = dict(sorted(node.tails.items(), reverse=True))

    def spans(self, text: str) -> list[tuple[int, int]]:
        """The runs of every needle's occurrences: at each offset only the longest needle starting
        there counts (a shorter one lies inside it), joined with the run before it where they overlap.
        Raises :class:`RedactionTooCostly` past ``_STEPS_PER_CHAR`` steps a character."""
        out: list[tuple[int, int]] = []
        width, get = self.width, self.root.get
        budget = _STEPS_PER_CHAR * len(text) + _STEPS_FLOOR
        steps = 0
        run_s = run_e = -1
        for i in range(len(text) - width + 1):
            node = get(text[i:i + width])
            if node is None:
                continue
            pos = i + width
            best = -1
            while node is not None:
                for length, tails in node.tails.items():
                    steps += 1
                    if text[pos:pos + length] in tails:
                        best = pos + length
                        break
                node = node.children.get(text[pos:pos + _CHUNK]) if node.children else None
                pos += _CHUNK
                steps += 1
            if steps > budget:
                raise RedactionTooCostly(
                    f"the search for {self.count:,} forms of secret values (each value, its encodings and "
                    f"normal forms) in a text of {len(text):,} characters passed {budget:,} steps; the text "
                    f"is not indexed (split the message, or list its secrets in the known-secrets file)")
            if best < 0:
                continue
            if i < run_e:
                run_e = max(run_e, best)
            else:
                if run_e >= 0:
                    out.append((run_s, run_e))
                run_s, run_e = i, best
        if run_e >= 0:
            out.append((run_s, run_e))
        return out


class _Node:
    __slots__ = ("children", "tails")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.tails: dict[int, set[str]] = {}


def _nodes(level: dict[str, _Node]):
    stack = list(level.values())
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.children.values())


class KnownSecrets:
    """An immutable set of literal secrets to redact wherever they occur.

    Each value is also matched in its JSON-escaped and URL-encoded forms,
    the two encodings transcripts most often add around a value.
    """

    __slots__ = ("_values", "_needles", "_ignored", "_trie")

    def __init__(self, values: Iterable[str] = (), *, min_length: int = MIN_KNOWN_SECRET_LENGTH) -> None:
        kept: list[str] = []
        ignored: list[IgnoredEntry] = []
        seen: set[str] = set()
        for i, raw in enumerate(values, start=1):
            value = raw.strip()
            if not value:
                ignored.append(IgnoredEntry(i, "blank"))
            elif len(value) < min_length:
                ignored.append(IgnoredEntry(i, f"shorter than {min_length} characters: matching it literally "
                                               "would redact ordinary text"))
            elif value not in seen:
                seen.add(value)
                kept.append(value)
        needles: set[str] = set()
        for v in kept:
            # Text is matched in its folded form (fold.py): a value with a
            # non-breaking space or a full-width letter is looked for folded too.
            # Composed and decomposed (macOS writes "ü" as "u" + a combining mark) forms too.
            forms = {v, unicodedata.normalize("NFC", v), unicodedata.normalize("NFD", v)}
            forms |= {fold_value(f) for f in forms}
            # A value with Unicode dashes is looked for with "-" too: a text with other dashes (or
            # "-") is also scanned with its dashes read as "-" (Redactor.redact).
            forms |= {d for d in map(dashed, forms) if d is not None}
            for form in forms:
                if len(form) >= min_length:
                    needles.add(form)
                    needles.add(json.dumps(form, ensure_ascii=False)[1:-1])
                    needles.add(quote(form, safe="", errors="surrogatepass"))
        self._values = tuple(kept)
        # Longest first, so a secret that contains another is masked whole.
        self._needles = tuple(sorted(needles, key=len, reverse=True))
        self._trie: _ChunkTrie | None = None  # built on the first search that needs it, then kept
        self._ignored = tuple(ignored)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], *, encoding: str = "utf-8") -> KnownSecrets:
        """One secret per line. Surrounding whitespace is stripped; blank
        lines and values under MIN_KNOWN_SECRET_LENGTH are skipped and listed
        in ``ignored``. There is no comment syntax: every other line is a secret."""
        return cls(Path(path).read_text(encoding=encoding).splitlines())

    @classmethod
    def from_env(cls, var: str, environ: Mapping[str, str] | None = None) -> KnownSecrets:
        """Newline-separated secrets in environment variable ``var`` (unset: none)."""
        env = os.environ if environ is None else environ
        return cls(env.get(var, "").splitlines())

    @property
    def values(self) -> tuple[str, ...]:
        return self._values

    @property
    def needles(self) -> tuple[str, ...]:
        """Every form matched: each value, JSON-escaped and URL-encoded (longest first)."""
        return self._needles

    @property
    def ignored(self) -> tuple[IgnoredEntry, ...]:
        return self._ignored

    def __len__(self) -> int:
        return len(self._values)

    def __bool__(self) -> bool:
        return bool(self._values)

    def __repr__(self) -> str:  # never print the secrets themselves
        return f"KnownSecrets({len(self._values)} values, {len(self._ignored)} ignored)"

    def __or__(self, other: KnownSecrets) -> KnownSecrets:
        return KnownSecrets(self._values + other._values)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where the needles occur, as (start, end) offsets: every occurrence, except that
        occurrences overlapping each other are given as the one run they cover (a value repeating
        itself, or values that are prefixes of each other, in text built to repeat them: listing
        each occurrence was quadratic in time and memory). Covered characters are exactly those of
        the occurrences. A search per needle (``str.find``, in C) unless there are thousands of
        needles (a text full of distinct secrets, each a repeat to look for): then one walk of the
        text, which raises :class:`RedactionTooCostly` when the text makes it too slow."""
        if len(self._needles) > _FIND_EACH_LIMIT:
            return self._spans_by_window(text)
        out: list[tuple[int, int]] = []
        for needle in self._needles:
            out.extend(_needle_runs(text, needle))
        return out

    def _spans_by_window(self, text: str) -> list[tuple[int, int]]:
        """The same in one walk: at each offset, down a trie of the needles in 16-character chunks
        (:class:`_ChunkTrie`) as far as the text matches; the longest needle at an offset counts."""
        if self._trie is None:
            self._trie = _ChunkTrie(self._needles)
        return self._trie.spans(text)
