"""Tables, CSV and key/value listings whose header or key names a secret (issue 34).

Markdown and box-drawing tables (with or without a rule line under the header), CSV separated by
commas, semicolons or tabs (also a header given as ``--fields a,b,c``), whitespace-aligned listings
(``vault kv get``) and column tables (``HOST   USER   PASSWORD``): a ``password``/``secret``/``token``/
``api key`` column (or a password word of another language: ``Passwort``, ``mot de passe``,
``contraseña``; a ``PIN`` column of digits) masks that column's values; a ``NAME | VALUE`` row whose
name is a secret name masks its value. Values are judged by :func:`redaction.struct_base._judge`.
Same conventions as :mod:`redaction.detectors`.
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
_TABLE_WORDS = ("pass", "pw", "secret", "token", "key", "auth", "cred", "wort", "mot de", "contrase", "senha", "wachtw",
                "clave", "pin", "hasł", "haslo", "heslo", "parol", "пароль")
# What separates the cells of a table, a CSV row or a "name    value" listing.
_CELL_SEPARATORS = ("|", ",", ";", "  ", "\t", "│", "┃", "║")
TABLE_PATTERNS = (_BAR_SPLIT_RE.pattern, _RULE_LINE_RE.pattern, _WS_SPLIT_RE.pattern, _CSV_HEAD_RE.pattern,
                  _NAME_RE.pattern, r"[^\W\d][\w .'-]{0,40}") + _TABLE_WORDS


_ROLE_RE = re.compile(r"(?:User|Assistant|user|assistant|USER|ASSISTANT|Human|AI|System):[ \t]*")
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


# Column names in other languages (a header cell, lowercased): they say password like "password" does.
_I18N_PASSWORD = frozenset("""passwort kennwort wachtwoord lösenord losenord passord adgangskode salasana contraseña
contrasena clave senha hasło haslo heslo jelszó jelszo lozinka geslo şifre sifre parola пароль mdp
""".split()) | {"mot de passe", "palavra-passe", "palavra passe", "parola d'ordine", "code d'accès"}
_PIN_NAMES = frozenset({"pin", "pin code", "pincode", "pin_code", "code pin", "puk"})
_PIN_RE = re.compile(r"[0-9]{4,12}")


def _column(name: str) -> str | None:
    """The strength a header cell gives its column: a secret name, a password word of another
    language, or a PIN column (digits only)."""
    bare = name.strip().strip("`*_\"'").strip().lower()
    if bare in _I18N_PASSWORD:
        return "password"
    if bare in _PIN_NAMES:
        return "pin"
    return _secret_name(name)


def _ok(strength: str, v: str) -> bool:
    if strength == "pin":
        return _PIN_RE.fullmatch(v) is not None and len(set(v)) >= 3
    return _judge(strength, v)


def _column_values(text: str, rows: list[tuple[int, int]], cols: dict[int, str], width: int,
                   split) -> Iterator[Candidate]:
    for rs, re_ in rows:
        cells = split(text, rs, re_)
        if cells is None or len(cells) != width:
            return
        for i, strength in cols.items():
            s, e = _strip_cell(text, *cells[i])
            if e > s and _ok(strength, text[s:e]):
                yield ("table-secret", s, e, 0)


def _rows(text: str, le: int, fits) -> tuple[list[tuple[int, int]], int]:
    """The rows after a header ending at ``le`` while ``fits(s, e)``; rule lines are skipped."""
    rows: list[tuple[int, int]] = []
    end = le
    nxt = _next_line(text, le)
    while nxt is not None and nxt[1] > nxt[0] and len(rows) < 200:
        if _RULE_LINE_RE.fullmatch(text, *nxt) and not rows:
            pass  # |---|---| or ----- under a header
        elif fits(*nxt):
            rows.append(nxt)
        else:
            break
        end = nxt[1]
        nxt = _next_line(text, nxt[1])
    return rows, end


def find_tables(text: str, low: str) -> Iterator[Candidate]:
    if not any(sep in text for sep in _CELL_SEPARATORS):
        return  # every kind of table below needs one on the line of a cue word (most prose: none)
    done = -1
    for hit, _he in word_hits(low, _TABLE_WORDS):
        if hit <= done or (low.startswith("pin", hit) and ((hit and low[hit - 1].isalpha())
                                                             or low[hit + 3:hit + 4].isalpha())):
            continue  # "ping", "mapping": not a PIN column
        ls, le = _line_at(text, hit)
        done = le
        role = _ROLE_RE.match(text, ls, le)
        if role is not None:
            ls = role.end()  # "User: host;user;pwd": the turn's role is not a cell
        line = text[ls:le]
        if le - ls < 4 or not any(sep in line for sep in _CELL_SEPARATORS):
            continue
        # Bar tables: a header naming a secret column (a rule line under it or not), or NAME | VALUE rows.
        cells = _bar_cells(text, ls, le)
        if cells is not None:
            kv = list(_kv_row(text, cells)) if len(cells) == 2 else []
            if kv:
                yield from kv  # "| SMTP_PASSWORD | value |": a row, not a header
                continue
            cols = {k: st for k, c in enumerate(cells) if (st := _column(text[c[0]:c[1]]))}
            if cols:
                width = len(cells)
                rows, end = _rows(text, le, lambda s, e, w=width: (c := _bar_cells(text, s, e)) is not None and len(c) == w)
                if rows:
                    done = end
                    yield from _column_values(text, rows, cols, width, _bar_cells)
            continue
        # CSV (comma, semicolon or tab): a header line (or a command's trailing "a,b,c" list) and rows
        # of as many fields.
        for sep in (",", ";", "\t"):
            head = _csv_header(text, ls, le, sep)
            if head is None:
                continue
            hcells = _csv_cells(text, *head, sep)
            cols = {k: st for k, c in enumerate(hcells) if (st := _column(text[c[0]:c[1]]))}
            if cols:
                n = len(hcells) - 1
                rows, end = _rows(text, le, lambda s, e, sep=sep, n=n: text.count(sep, s, e) == n)
                if rows:
                    done = end
                    yield from _column_values(text, rows, cols, n + 1, lambda t, s, e, sep=sep: _csv_cells(t, s, e, sep))
                    break
        else:
            # Whitespace-aligned: "name    value" (vault kv get, describe output) or a header of 3+
            # columns ("HOST   USER   PASSWORD") over rows of as many cells.
            if _WS_SPLIT_RE.search(text, ls, le):
                cells = _split_cells(text, ls, le, _WS_SPLIT_RE)
                if len(cells) == 2 and _NAME_RE.fullmatch(text, *cells[0]):
                    yield from _kv_row(text, cells)
                elif len(cells) >= 3 and all(_NAME_RE.fullmatch(text, *c) or " " in text[c[0]:c[1]].strip()
                                             for c in cells):
                    cols = {k: st for k, c in enumerate(cells) if (st := _column(text[c[0]:c[1]]))}
                    width = len(cells)
                    if cols:
                        rows, end = _rows(text, le, lambda s, e, w=width: len(_split_cells(text, s, e, _WS_SPLIT_RE)) == w)
                        done = max(done, end)
                        yield from _column_values(text, rows, cols, width,
                                                  lambda t, s, e: _split_cells(t, s, e, _WS_SPLIT_RE))


def _csv_cells(text: str, s: int, e: int, sep: str = ",") -> list[tuple[int, int]]:
    cells = []
    pos = s
    while True:
        c = text.find(sep, pos, e)
        if c < 0:
            cells.append((pos, e))
            return cells
        cells.append((pos, c))
        pos = c + 1


def _csv_header(text: str, ls: int, le: int, sep: str = ",") -> tuple[int, int] | None:
    """The delimited list a CSV header is: the whole line, or (commas) its last space-separated word."""
    if sep not in text[ls:le]:
        return None
    cells = _csv_cells(text, ls, le, sep)
    if len(cells) >= 2 and all(_HEAD_CELL_RE.fullmatch(text[a:b].strip(" \r\"'")) for a, b in cells) \
            and text.count(" ", ls, le) <= text.count(sep, ls, le) + 2 * sum(
                text[a:b].strip().lower() in _I18N_PASSWORD for a, b in cells):
        return ls, le
    if sep != ",":
        return None
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


_HEAD_CELL_RE = re.compile(r"[^\W\d][\w .'-]{0,40}")


def _kv_row(text: str, cells: list[tuple[int, int]]) -> Iterator[Candidate]:
    ns, ne = _strip_cell(text, *cells[0])
    strength = _secret_name(text[ns:ne]) if _NAME_RE.fullmatch(text, ns, ne) else None
    if strength is None:
        return
    s, e = _strip_cell(text, *cells[1])
    if e > s and _judge(strength, text[s:e]):
        yield ("table-secret", s, e, 0)
