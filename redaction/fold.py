"""Folding: the copy of a text the rules scan, with an offset map back.

Rules are written for plain ASCII context (``password: X``, ``ghp_…``). A
non-breaking or ideographic space after a keyword, a zero-width character,
soft hyphen or NUL inside a token, full-width letters (``ｇｈｐ_``) or ANSI
colour codes around it would each hide a secret from every rule. So the
engine scans a folded copy:

* every space separator (Unicode category Zs) and every other whitespace
  control becomes ``" "``; line and paragraph separators become ``"\\n"``;
* a character whose NFKC form is one printable ASCII character becomes it
  (full-width and mathematical letters, digits and punctuation);
* format characters (Cf: zero-width, joiners, bidi marks, soft hyphen,
  BOM), the remaining control characters and ANSI escape sequences are
  removed.

Spans found in the copy map back to the original through :class:`Folded`;
characters removed inside a span (or right before it) are masked with it.
A text whose unusual characters all fold to themselves (plain ASCII chat,
"café", "中文") is not copied at all.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass, field

__all__ = ["DASHES", "PROSE_DASHES", "Folded", "dash_readings", "dashed", "fold", "fold_value"]

# The ASCII a fold leaves alone: printable characters, tab, newline, return.
# Deleting them from the UTF-8 bytes (one C loop) leaves the encodings of
# the characters a fold may change; a regex scan for those is ~4x slower.
_ASCII_KEPT = bytes(range(0x20, 0x7F)) + b"\t\n\r"
_DROP = "\x00"  # what the translation table maps a removed character to
# A run of removed characters: the translated NULs and ANSI escape sequences —
# a whole CSI (``ESC [`` parameters, intermediates, final byte: ECMA-48), and
# of an OSC (``ESC ] 8 ; params ; URI ST``, a window title) only its opener:
# its text, a hyperlink's URL or a title, is scanned like any other, and its
# terminator separates (BEL reads as a space, ``ESC \`` as its backslash).
# Each alternative starts with a distinct character or is bounded: linear time.
_DROP_RUN_RE = re.compile(r"(?:\x1b\[[0-?]{0,32}[ -/]{0,4}[@-~]|\x1b\][0-9]{0,4};?|[\x00\x1b])+")
# Unicode dashes are left as they are in the folded copy: folded to "-", an em dash in prose before
# a token ("here it is—sk-proj-…") glued it to the word before, and rules that refuse a "-" before a
# token missed it. A token whose own hyphens are Unicode dashes ("sk‑proj‑…" with U+2011) is found
# by more scans of the copy, its dashes read otherwise (:func:`dash_readings`); all are united.
#: Unicode hyphens and dashes (every Pd character but "-", and the minus sign), read as "-" or as a
#: space by the extra scans (:func:`dash_readings`).
DASHES = "".join(chr(c) for c in range(0x80, 0x110000) if unicodedata.category(chr(c)) == "Pd") + "\u2212"
#: The dashes prose sets between words (en, em, bars, wave dashes): also read as a space, since read as
#: "-" one glues the token after it to the word before ("here it is—sk‑proj‑…").
PROSE_DASHES = "\u2013\u2014\u2015\u2e3a\u2e3b\u301c\u3030\ufe31\ufe32\ufe58"
_AS_HYPHENS = str.maketrans({c: "-" for c in DASHES})
_AS_SEPARATORS = str.maketrans({c: (" " if c in PROSE_DASHES else "-") for c in DASHES})
_DASH_RE = re.compile("[" + re.escape(DASHES) + "]")
# Invisible characters Unicode lists as default-ignorable that are not format characters (Cf):
# combining grapheme joiner, Hangul fillers, Khmer and Mongolian inherent vowels and selectors,
# variation selectors. Dropped from the scanned copy only (an emoji keeps its selector in the text).
_IGNORABLE = frozenset(
    "\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180f\u3164\uffa0"
    + "".join(chr(c) for c in range(0xFE00, 0xFE10)) + "".join(chr(c) for c in range(0xE0100, 0xE01F0)))
_TABLE_LIMIT = 1 << 16  # distinct characters remembered; a text's alphabet is far smaller


class _FoldTable(dict):
    """``str.translate`` table computed on first use of each character."""

    def __missing__(self, cp: int) -> str:
        out = _fold_char(chr(cp))
        if len(self) < _TABLE_LIMIT:
            self[cp] = out
        return out


def _fold_char(ch: str) -> str:
    if ch == "\x1b":
        return ch  # kept for _DROP_RUN_RE, which removes escape sequences
    if ch == "\x07":
        return " "  # BEL ends an OSC: what follows is other text
    if ch in _IGNORABLE:
        return _DROP
    cat = unicodedata.category(ch)
    if cat in ("Zl", "Zp"):
        return "\n"
    if cat == "Zs" or (cat == "Cc" and ch.isspace() and ch not in "\t\n\r"):
        return " "
    if cat in ("Cf", "Cc") and ch not in "\t\n\r":
        return _DROP
    nfkc = unicodedata.normalize("NFKC", ch)
    if len(nfkc) == 1 and nfkc.isascii() and nfkc.isprintable():
        return nfkc
    return ch


_TABLE = _FoldTable()


@dataclass(frozen=True, slots=True)
class Folded:
    """A folded copy of ``original`` and the map from its offsets back.

    ``cuts[k]`` is an offset in ``text`` before which removed characters
    were; ``shifts[k]`` is how many were removed up to there in total."""

    original: str = field(repr=False)  # may hold secrets: never in a repr
    text: str = field(repr=False)
    cuts: tuple[int, ...] = ()
    shifts: tuple[int, ...] = ()

    def start(self, i: int) -> int:
        """Original offset of the character at folded offset ``i``."""
        k = bisect.bisect_right(self.cuts, i)
        return i + (self.shifts[k - 1] if k else 0)

    def end(self, e: int) -> int:
        """Original end offset of a span ending at folded offset ``e`` (exclusive)."""
        return self.start(e - 1) + 1 if e > 0 else 0


def fold(text: str) -> Folded | None:
    """The folded copy of ``text``, or None when folding would not change it."""
    if not _changes(text):
        return None
    folded = text.translate(_TABLE)
    if _DROP not in folded and "\x1b" not in folded:
        return Folded(text, folded) if folded != text else None
    parts: list[str] = []
    cuts: list[int] = []
    shifts: list[int] = []
    last = removed = 0
    for m in _DROP_RUN_RE.finditer(folded):
        parts.append(folded[last:m.start()])
        removed += m.end() - m.start()
        cuts.append(m.start() - (removed - (m.end() - m.start())))
        shifts.append(removed)
        last = m.end()
    parts.append(folded[last:])
    return Folded(text, "".join(parts), tuple(cuts), tuple(shifts))


def _changes(text: str) -> bool:
    """Would folding change ``text``? Decided on its distinct unusual characters:
    deleting plain ASCII from the UTF-8 bytes (one C loop, also for a long
    text with a single "é") leaves exactly their encodings."""
    odd = text.encode("utf-8", "surrogatepass").translate(None, _ASCII_KEPT)
    if not odd:
        return False
    # NUL and ESC translate to themselves but are removed afterwards.
    return any(c in "\x00\x1b" or _TABLE[ord(c)] != c for c in set(odd.decode("utf-8", "surrogatepass")))


def dashed(text: str) -> str | None:
    """``text`` with every Unicode dash of :data:`DASHES` as ``"-"`` (one character for one: every
    offset holds), or None when it has none."""
    if text.isascii() or _DASH_RE.search(text) is None:  # isascii: a flag of the string, no scan
        return None
    return text.translate(_AS_HYPHENS)


def dash_readings(text: str) -> list[str]:
    """The other readings of ``text``'s Unicode dashes, each one character for one (offsets hold):
    every dash as ``"-"``, and prose dashes as spaces with the others as ``"-"``; none without dashes."""
    as_hyphens = dashed(text)
    if as_hyphens is None:
        return []
    readings = [as_hyphens]
    as_separators = text.translate(_AS_SEPARATORS)
    if as_separators != as_hyphens:
        readings.append(as_separators)
    return readings


def fold_value(value: str) -> str:
    """``value`` as it reads in a folded text (for literal matching there)."""
    f = fold(value)
    return value if f is None else f.text
