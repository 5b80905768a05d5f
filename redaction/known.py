"""Exact-value redaction of secrets the operator knows about.

Patterns miss secrets without a recognisable shape (a database password
like ``correct-horse``). If the deployment knows its own secrets, listing
them here guarantees they never reach the index, wherever they appear.
"""

from __future__ import annotations

import json
from collections import defaultdict
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
_WINDOW = 16  # characters looked up at each offset (fewer when a needle is shorter)


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
        """The same in one walk: at each offset one lookup of the next ``width`` characters (the
        shortest needle's length, at most _WINDOW); only where needles start so, one set lookup per
        length among them (needles sharing a prefix, JWTs of one header, share a bucket)."""
        width = min(_WINDOW, *(len(n) for n in self._needles))
        buckets: dict[str, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
        for needle in self._needles:
            buckets[needle[:width]][len(needle)].add(needle)
        out: list[tuple[int, int]] = []
        get = buckets.get
        for i in range(len(text) - width + 1):
            bucket = get(text[i:i + width])
            if bucket:
                for length, group in bucket.items():
                    if text[i:i + length] in group:
                        out.append((i, i + length))
        return out
