"""Exact-value redaction of secrets the operator knows about.

Patterns miss secrets without a recognisable shape (a database password
like ``correct-horse``). If the deployment knows its own secrets, listing
them here guarantees they never reach the index, wherever they appear.
"""

from __future__ import annotations

import json
import unicodedata
import os
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterable, Mapping
from urllib.parse import quote

from .fold import fold_value

__all__ = ["KnownSecrets", "IgnoredEntry", "MIN_KNOWN_SECRET_LENGTH"]

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


class _ChunkTrie:
    """Needles by 16-character chunks: the first level keyed by the first ``width`` characters (the
    shortest needle's length, at most 16), each deeper level by the next 16; what is left of a
    needle (under 16 characters) is kept at its node by length."""

    __slots__ = ("width", "root")

    def __init__(self, needles: Iterable[str]) -> None:
        needles = list(needles)
        self.width = min(_CHUNK, *(len(n) for n in needles)) if needles else _CHUNK
        self.root: dict[str, _Node] = {}
        for needle in needles:
            node = self.root.setdefault(needle[:self.width], _Node())
            pos = self.width
            while len(needle) - pos >= _CHUNK:
                node = node.children.setdefault(needle[pos:pos + _CHUNK], _Node())
                pos += _CHUNK
            node.tails.setdefault(len(needle) - pos, set()).add(needle[pos:])

    def spans(self, text: str) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        width, get = self.width, self.root.get
        for i in range(len(text) - width + 1):
            node = get(text[i:i + width])
            pos = i + width
            while node is not None:
                for length, tails in node.tails.items():
                    if text[pos:pos + length] in tails:
                        out.append((i, pos + length))
                node = node.children.get(text[pos:pos + _CHUNK]) if node.children else None
                pos += _CHUNK
        return out


class _Node:
    __slots__ = ("children", "tails")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.tails: dict[int, set[str]] = {}


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
            for form in forms | {fold_value(f) for f in forms}:
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
        """Every occurrence of every needle, as (start, end) offsets. A search per needle (``str.find``,
        in C) unless there are thousands of needles (a text full of distinct secrets, each a repeat to
        look for), where a search per needle is quadratic: then one walk of the text."""
        if len(self._needles) > _FIND_EACH_LIMIT:
            return self._spans_by_window(text)
        out: list[tuple[int, int]] = []
        for needle in self._needles:
            i = text.find(needle)
            while i >= 0:
                out.append((i, i + len(needle)))
                i = text.find(needle, i + 1)
        return out

    def _spans_by_window(self, text: str) -> list[tuple[int, int]]:
        """The same in one walk: at each offset, down a trie of the needles in 16-character chunks
        (:class:`_ChunkTrie`) as far as the text matches — so the work at an offset is bounded by how
        much of some needle starts there, whatever the number of needles or of their lengths."""
        if self._trie is None:
            self._trie = _ChunkTrie(self._needles)
        return self._trie.spans(text)
