"""Tables, CSV and key/value listings whose header or key names a secret (issue 34).

Markdown and box-drawing tables, CSV (also a header given as ``--fields a,b,c``), whitespace-aligned
listings (``vault kv get``): a ``password``/``secret``/``token``/``api key`` column masks that
column's values; a ``NAME | VALUE`` row whose name is a secret name masks its value. Values are judged
by :func:`redaction.struct_base._judge`. Same conventions as :mod:`redaction.detectors`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .detectors import Candidate
from .phrases import word_hits
from .struct_base import _judge, _line_at, _next_line, _secret_name, _strip_cell

__all__ = ["find_tables", "TABLE_PATTERNS"]

_BARS = "|│┃║"
_BAR_SPLIT_RE = re.compile(r"[|│┃║]")
_RULE_LINE_RE = re.compile(r"[\s|│┃║+:=─━═┼┬┴├┤┌┐└┘╞╡╪-]*")
_WS_SPLIT_RE = re.compile(r"[ \t]{2,}|\t")
_CSV_HEAD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_ .-]{0,40}(?:,[A-Za-z_][A-Za-z0-9_ .-]{0,40})+")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{1,63}")
_TABLE_WORDS = ("pass", "pw", "secret", "token", "key", "auth", "cred")
# What separates the cells of a table, a CSV row or a "name    value" listing.
_CELL_SEPARATORS = ("|", ",", "  ", "\t", "│", "┃", "║")
TABLE_PATTERNS = (_BAR_SPLIT_RE.pattern, _RULE_LINE_RE.pattern, _WS_SPLIT_RE.pattern, _CSV_HEAD_RE.pattern,
                  _NAME_RE.pattern) + _TABLE_WORDS


_ROLE_PREFIX_RE = re.compile(r"[ \t]*[A-Za-z][A-Za-z ]{0,20}:[ \t]*(?=[|│┃║])")


def _bar_cells(text: str, s: int, e: int) -> list[tuple[int, int]] | None:
    """Cells of a bar-separated row (outer bars optional), or None if not a row. A label before the
    first bar ("Assistant: | a | b |", a turn's role) is not a cell."""
    role = _ROLE_PREFIX_RE.match(text, s, e)
    if role is not None:
        s = role.end()
    bars = [m.start() for m in _BAR_SPLIT_RE.finditer(text, s, e)]
    if not bars:
        return None
    edges = [s - 1] + bars + [e]
    cells = [(a + 1, b) for a, b in zip(edges, edges[1:])]
    if cells and not text[cells[0][0]:cells[0][1]].strip():
        cells = cells[1:]
    if cells and not text[cells[-1][0]:cells[-1][1]].strip():
        cells = cells[:-1]
    return cells if len(cells) >= 2 else None


def _split_cells(text: str, s: int, e: int, sep: re.Pattern[str]) -> list[tuple[int, int]]:
    cells = []
    pos = s
    while pos < e and text[pos] in " \t":
        pos += 1
    for m in sep.finditer(text, pos, e):
        cells.append((pos, m.start()))
        pos = m.end()
    end = e
    while end > pos and text[end - 1] in " \t\r":
        end -= 1
    if end > pos:
        cells.append((pos, end))
    return cells


def _csv_cells(text: str, s: int, e: int) -> list[tuple[int, int]]:
    cells = []
    pos = s
    while True:
        c = text.find(",", pos, e)
        if c < 0:
            cells.append((pos, e))
            return cells
        cells.append((pos, c))
        pos = c + 1


def _column_values(text: str, rows: list[tuple[int, int]], cols: dict[int, str], width: int,
                   split) -> Iterator[Candidate]:
    for rs, re_ in rows:
        cells = split(text, rs, re_)
        if cells is None or len(cells) != width:
            return
        for i, strength in cols.items():
            s, e = _strip_cell(text, *cells[i])
            if e > s and _judge(strength, text[s:e]):
                yield ("table-secret", s, e, 0)


def find_tables(text: str, low: str) -> Iterator[Candidate]:
    if not any(sep in text for sep in _CELL_SEPARATORS):
        return  # every kind of table below needs one on the line of a cue word (most prose: none)
    done = -1
    for hit, _he in word_hits(low, _TABLE_WORDS):
        if hit <= done:
            continue
        ls, le = _line_at(text, hit)
        done = le
        line = text[ls:le]
        if le - ls < 4 or not any(sep in line for sep in _CELL_SEPARATORS):
            continue
        # Bar tables: a header naming a secret column, or NAME | VALUE rows.
        cells = _bar_cells(text, ls, le)
        if cells is not None:
            nxt = _next_line(text, le)
            rules = 0
            while nxt is not None and nxt[1] > nxt[0] and _RULE_LINE_RE.fullmatch(text, *nxt):
                rules += 1
                nxt = _next_line(text, nxt[1])
            cols = {k: st for k, c in enumerate(cells) if (st := _secret_name(text[c[0]:c[1]]))}
            if cols and rules:
                rows = []
                end = done
                while nxt is not None and _bar_cells(text, *nxt) is not None:
                    if not _RULE_LINE_RE.fullmatch(text, *nxt):
                        rows.append(nxt)
                    end = nxt[1]
                    nxt = _next_line(text, nxt[1])
                if rows:
                    done = end
                    yield from _column_values(text, rows, cols, len(cells), _bar_cells)
                    continue
            if len(cells) == 2:
                yield from _kv_row(text, cells)
            continue
        # CSV: a header line (or a command's trailing "a,b,c" list) and rows of as many fields.
        head = _csv_header(text, ls, le)
        if head is not None:
            hcells = _csv_cells(text, *head)
            cols = {k: st for k, c in enumerate(hcells) if (st := _secret_name(text[c[0]:c[1]]))}
            if cols:
                rows = []
                nxt = _next_line(text, le)
                while nxt is not None and nxt[1] > nxt[0] and text.count(",", *nxt) == len(hcells) - 1:
                    rows.append(nxt)
                    done = nxt[1]
                    nxt = _next_line(text, nxt[1])
                if rows:
                    yield from _column_values(text, rows, cols, len(hcells), _csv_cells)
                    continue
        # Whitespace-aligned "name    value" (vault kv get, describe output).
        if _WS_SPLIT_RE.search(text, ls, le):
            cells = _split_cells(text, ls, le, _WS_SPLIT_RE)
            if len(cells) == 2 and _NAME_RE.fullmatch(text, *cells[0]):
                yield from _kv_row(text, cells)


def _csv_header(text: str, ls: int, le: int) -> tuple[int, int] | None:
    """The comma list a CSV header is: the whole line, or its last space-separated word."""
    if "," not in text[ls:le]:
        return None
    m = _CSV_HEAD_RE.fullmatch(text, ls, le)
    if m is not None and text.count(" ", ls, le) <= text.count(",", ls, le):
        return ls, le
    sp = text.rfind(" ", ls, le)
    if sp < 0:
        return None
    s = sp + 1
    while s < le and text[s] in "\"'=":
        s += 1
    e = le
    while e > s and text[e - 1] in "\"' \r":
        e -= 1
    m = _CSV_HEAD_RE.fullmatch(text, s, e)
    if m is None or " " in text[s:e]:
        return None
    return s, e


def _kv_row(text: str, cells: list[tuple[int, int]]) -> Iterator[Candidate]:
    ns, ne = _strip_cell(text, *cells[0])
    strength = _secret_name(text[ns:ne]) if _NAME_RE.fullmatch(text, ns, ne) else None
    if strength is None:
        return
    s, e = _strip_cell(text, *cells[1])
    if e > s and _judge(strength, text[s:e]):
        yield ("table-secret", s, e, 0)
