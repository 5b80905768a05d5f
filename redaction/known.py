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


_FIND_EACH_LIMIT = 64  # needles searched one by one up to this many; more: one walk by prefix
_PREFIX = 16  # characters a needle is looked up by (fewer when one is shorter): past a shared
# vendor prefix (ghp_), so a bucket holds few needles


class KnownSecrets:
    """An immutable set of literal secrets to redact wherever they occur.

    Each value is also matched in its JSON-escaped and URL-encoded forms,
    the two encodings transcripts most often add around a value.
    """

    __slots__ = ("_values", "_needles", "_ignored")

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
        """Every occurrence of every needle, as (start, end) offsets."""
        if len(self._needles) > _FIND_EACH_LIMIT:
            return self._spans_by_prefix(text)
        out: list[tuple[int, int]] = []
        for needle in self._needles:
            i = text.find(needle)
            while i >= 0:
                out.append((i, i + len(needle)))
                i = text.find(needle, i + 1)
        return out

    def _spans_by_prefix(self, text: str) -> list[tuple[int, int]]:
        """The same, in one walk of the text: with thousands of needles (a text full of distinct
        secrets, each a repeat to look for) a search per needle is quadratic."""
        width = min(_PREFIX, *(len(n) for n in self._needles))  # the shortest needle's length, at most _PREFIX
        by_prefix: dict[str, list[str]] = {}
        for needle in self._needles:
            by_prefix.setdefault(needle[:width], []).append(needle)
        out: list[tuple[int, int]] = []
        for i in range(len(text) - width + 1):
            for needle in by_prefix.get(text[i:i + width], ()):
                if text.startswith(needle, i):
                    out.append((i, i + len(needle)))
        return out
