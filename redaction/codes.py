"""Recovery / backup code lists after a cue (issue 34).

A cue (recovery, backup, emergency, scratch, one-time, 2FA, "codes" and its forms in other
languages) followed within a few lines by 3+ distinct items of one shape: one a line (bulleted,
numbered, in a table row or a code block; a header line or a closing sentence around the list is
not an item), or on one line separated by commas, semicolons or spaces. Items are judged together
(:func:`_code_list`): 8+ characters, mostly with digits, random (not a run of dates, ids, ports or
abbreviated commit hashes). Same conventions as :mod:`redaction.detectors`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .detectors import Candidate
from .entropy import shannon
from .phrases import word_hits
from .struct_base import _HEX_ID_RE, _line_at, _next_line

__all__ = ["find_code_lists", "CODE_LIST_PATTERNS", "CODE_CUES"]

_CODE_ITEM = r"[A-Za-z0-9]{3,12}(?:[- ][A-Za-z0-9]{3,12}){0,3}"
_CODE_WORD = r"[A-Za-z0-9]{3,12}(?:-[A-Za-z0-9]{3,12}){0,3}"  # an item with no inner space
# one item a line: after a bullet, a number, a checkbox or in a table row ("| 3 | abcd-1234 |")
_CODE_LINE_RE = re.compile(r"[ \t]*(?:>[ \t]?)*(?:[|│][ \t]*(?:[0-9]{1,2}[ \t]*[|│][ \t]*)?)?"
                           r"(?:[-*•+][ \t]+|[0-9]{1,2}[.):][ \t]+|\[[ xX]?\][ \t]+)?[`\"']?(?P<v>" + _CODE_ITEM
                           + r")[`\"']?[ \t]*[|│,;]?[ \t]*\r?")
_CODE_INLINE_RE = re.compile(r"(?<![A-Za-z0-9-])[\"'`]?" + _CODE_ITEM + r"[\"'`]?(?:(?:[ \t]*[,;][ \t]*(?:and[ \t]+|or[ \t]+)?"
                             r"|[ \t]+[/|·•][ \t]+|[ \t]+(?:and|or|und|et|y|e)[ \t]+)[\"'`]?" + _CODE_ITEM
                             + r"[\"'`]?){2,}(?![A-Za-z0-9-])")
_CODE_SPACED_RE = re.compile(r"(?<![A-Za-z0-9-])" + _CODE_WORD + r"(?:[ \t]+" + _CODE_WORD + r"){2,}(?![A-Za-z0-9-])")
_CODE_ONE_RE = re.compile(_CODE_ITEM)
# codes in columns: "k7x2m9q4  p3w8z1n6" (two or more spaces or a tab between them)
_CODE_ROW_RE = re.compile(r"[ \t]*(?:>[ \t]?)*" + _CODE_WORD + r"(?:(?:[ \t]{2,}|\t)" + _CODE_WORD + r"){1,3}[ \t]*\r?")
_CODE_WORD_RE = re.compile(_CODE_WORD)
# lines a list may hold between its items: blank, a fence, a table rule
_FILLER_RE = re.compile(r"[ \t]*(?:```[A-Za-z]*|[|│:\- \t]{3,})?[ \t]*\r?")
_CODE_WINDOW = 300
_MAX_LINES = 60
_DIGIT_RE = re.compile(r"[0-9]")  # the code patterns match ASCII only: their digits are 0-9
CODE_LIST_PATTERNS = (_CODE_ROW_RE.pattern, _CODE_LINE_RE.pattern, _CODE_INLINE_RE.pattern, _CODE_SPACED_RE.pattern, _FILLER_RE.pattern)
#: gate words of find_code_lists: the literal parts of its cues
CODE_CUES = ("locked out", "lockout", "recovery", "backup", "emergency", "scratch", "one-time", "one time", "single-use", "single use", "2fa",
             "mfa", "two-factor", "two factor", "2-step", "otp", "authenticator", "phone", "code", "códig", "codig",
             "codic", "recupera", "secours", "notfall", "herstel", "wiederherstell", "respaldo", "ripristin",
             "zapasow", "kody", "коды", "резервн", "восстановлен", "reservkod", "yedek", "kodlar", "バックアップ",
             "リカバリー", "备用", "恢复", "復原", "備用")


def _shape(item: str) -> tuple:
    return tuple(len(g) for g in re.split(r"[- ]", item)) + tuple(c for c in item if c in "- ")


def _code_list(items: list[str]) -> bool:
    """A list of one-time codes: 3+ distinct items of one shape, 8+ characters each, mostly with digits;
    not a list of short hashes, words, dates or counts."""
    if len(items) < 3 or len(set(items)) != len(items):
        return False
    shape = _shape(items[0])
    bare = [it.replace("-", "").replace(" ", "") for it in items]
    width = sum(shape[:len(shape) - len(shape) // 2])
    if any(_shape(it) != shape for it in items) or (width < 8 and not (
            width >= 6 and len(items) >= 5 and all(b.isdigit() for b in bare))):
        return False  # 8+ characters, or five or more codes of 6+ digits (SMS-style backup codes)
    if 2 * sum(any(c.isdigit() for c in b) for b in bare) < len(items):
        return False
    if all(b.isdigit() for b in bare):
        nums = sorted(int(b) for b in bare)
        if (len(items) < 4 and "-" not in items[0]) or nums[-1] - nums[0] < 100 * len(nums):
            return False  # plain numbers close together: ids, dates, counts, ports
    elif len(bare[0]) == len(items[0]) and all(_HEX_ID_RE.fullmatch(b) for b in bare):
        return False  # abbreviated commit hashes
    return shannon("".join(bare)) >= 3.0


def _runs(text: str, spans: list[tuple[int, int]]) -> Iterator[list[tuple[int, int]]]:
    """Consecutive items of one shape (a header line before the list has another shape)."""
    k = 0
    while k < len(spans):
        shape = _shape(text[spans[k][0]:spans[k][1]])
        j = k + 1
        while j < len(spans) and _shape(text[spans[j][0]:spans[j][1]]) == shape:
            j += 1
        yield spans[k:j]
        k = j


def find_code_lists(text: str, low: str) -> Iterator[Candidate]:
    if not _DIGIT_RE.search(text):
        return  # _code_list wants digits in half the items (ASCII items): ~1 text in 3 has none
    done = -1
    for cs, ce in word_hits(low, CODE_CUES):
        if cs < done or (low.startswith("code", cs) and ce < len(low) and low[ce].isalpha() and low[ce] != "s"):
            continue
        if not _DIGIT_RE.search(text, ce, ce + _CODE_WINDOW + 200):
            # items have digits (half of them at least): none after the cue, no list after it
            before = _list_before(text, cs)
            yield from before
            done = max(done, before[-1][2]) if before else done
            continue
        found: list[Candidate] = []
        # a list starting within the window after the cue: one item a line …
        nxt: tuple[int, int] | None = _line_at(text, ce)
        spans: list[tuple[int, int]] = []
        lines = 0
        while nxt is not None and lines < _MAX_LINES and (spans or nxt[0] < ce + _CODE_WINDOW):
            lines += 1
            m = _CODE_LINE_RE.fullmatch(text, *nxt)
            row = _CODE_ROW_RE.fullmatch(text, *nxt) if m is None else None
            if m is not None:
                spans.append(m.span("v"))
            elif row is not None:  # two to four codes a line, in columns
                spans.extend(x.span() for x in _CODE_WORD_RE.finditer(text, *nxt))
            elif not (spans and _FILLER_RE.fullmatch(text, *nxt)):
                found = _flush(text, spans)
                if found:
                    break
                spans = []
            nxt = _next_line(text, nxt[1])
        if not found and spans:
            found = _flush(text, spans)
        if not found:
            found = _list_before(text, cs)  # the list pasted first, then "^ those are the recovery codes"
        if found:
            yield from found
            done = max(done, found[-1][2])
            continue
        # … or on one line, separated by commas, semicolons or spaces
        hi = min(len(text), ce + _CODE_WINDOW + 400)
        for rx, one in ((_CODE_INLINE_RE, _CODE_ONE_RE), (_CODE_SPACED_RE, _CODE_WORD_RE)):
            if rx is _CODE_INLINE_RE and text.find(",", ce, hi) < 0 and text.find(";", ce, hi) < 0 \
                    and text.find(" / ", ce, hi) < 0 and text.find(" | ", ce, hi) < 0 and text.find(" · ", ce, hi) < 0 \
                    and text.find(" and ", ce, hi) < 0:
                continue
            m = rx.search(text, ce, hi)
            if m is None or m.start() >= ce + _CODE_WINDOW:
                continue
            items = [_drop_words(text, *x.span()) for part in _split_and(text, m.start(), m.end())
                     for x in one.finditer(text, *part)]
            if rx is _CODE_SPACED_RE:
                while items and not _DIGIT_RE.search(text, *items[0]):
                    items.pop(0)  # "codes are k3j9-x8p2 …": the words before the list
            for run in _runs(text, items):
                if _code_list([text[s:e] for s, e in run]) and \
                        (rx is _CODE_INLINE_RE or all(_DIGIT_RE.search(text, s, e) for s, e in run)):
                    for s, e in run:
                        yield ("recovery-codes", s, e, 0)
                    done = max(done, run[-1][1])
                    break


_AND_RE = re.compile(r" (?:and|or|und|et|y|e) ")


def _split_and(text: str, s: int, e: int) -> list[tuple[int, int]]:
    """"3tx8r-5vn1q and 6hb4w-2mz9k" read as one spaced item: the two items."""
    out = []
    for m in _AND_RE.finditer(text, s, e):
        out.append((s, m.start()))
        s = m.end()
    out.append((s, e))
    return out


def _drop_words(text: str, s: int, e: int) -> tuple[int, int]:
    """An item that took the words before it ("are 3tx8r-5vn1q"): the words without a digit go."""
    while True:
        sp = text.find(" ", s, e)
        if sp < 0 or _DIGIT_RE.search(text, s, sp):
            return s, e
        s = sp + 1


def _list_before(text: str, cs: int) -> list[Candidate]:
    """A code list ending on the lines right above the cue's line (fences and blank lines between)."""
    p = text.rfind("\n", 0, cs)
    spans: list[tuple[int, int]] = []
    lines = 0
    while p > 0 and lines < _MAX_LINES:
        pls = text.rfind("\n", 0, p) + 1
        m = _CODE_LINE_RE.fullmatch(text, pls, p)
        if m is not None:
            spans.append(m.span("v"))
        elif not _FILLER_RE.fullmatch(text, pls, p):
            break
        p = pls - 1
        lines += 1
    spans.reverse()
    return _flush(text, spans) if spans else []


def _flush(text: str, spans: list[tuple[int, int]]) -> list[Candidate]:
    """The codes of the first run of ``spans`` that reads as a code list; [] when none does."""
    for run in _runs(text, spans):
        if _code_list([text[s:e] for s, e in run]):
            return [("recovery-codes", s, e, 0) for s, e in run]
    return []
