"""Structures and split secrets: a credential found by the shape of what holds it (issue 34).

* **Tables** whose header or key names a secret: Markdown and box-drawing
  tables, CSV (also a header given as ``--fields a,b,c``), whitespace-aligned
  listings (``vault kv get``): a ``password``/``secret``/``token``/``api key``
  column masks that column's values; a ``NAME | VALUE`` row whose name is a
  secret name masks its value.
* **Code lists**: recovery/backup codes after a cue — one per line, bulleted,
  numbered or comma-separated, all of one shape.
* **Groups**: a value read out in space-separated groups (a TOTP setup key
  ``vohw 4pma 5rie m765``, a token in chunks) after a cue; base32 seeds after a
  2FA cue; the ``secret`` of an ``otpauth://`` URI.
* **Split values**: a string literal continued on the next line
  (``"abc" +`` / ``"def"``, a shell ``\\`` continuation, two wrapped lines of a
  code block), judged joined.
* **Encoded values**: a base64 blob decoded on the same line (``| base64 -d``)
  whose decoding is a credential; ``name%3Dvalue`` inside a URL-encoded URL
  (any number of layers) whose name says secret; a token used as a URL's user
  (the host and path stay).

Values are judged by their shape (length, character classes, entropy, not an
id, hash or version shape) and by the structure that names them; names by
``assignments.classify_name``. Same conventions as :mod:`redaction.detectors`:
``find_*(text, low)`` yields ``(rule_id, start, end, keep)``.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from urllib.parse import unquote

from .assignments import classify_name
from .detectors import URL_USERINFO_RE, Candidate, _masked, overlapping
from .phrases import word_hits
from .entropy import is_code_reference, is_placeholder, looks_like_token, shannon

__all__ = ["find_tables", "find_code_lists", "find_groups", "find_split_values", "find_encoded_values",
           "TABLE_PATTERNS", "CODE_LIST_PATTERNS", "GROUP_PATTERNS", "SPLIT_PATTERNS", "ENCODED_PATTERNS"]

# --------------------------------------------------------------------------
# Value shapes
# --------------------------------------------------------------------------

_HEX_ID_RE = re.compile(r"[0-9a-fA-F]{7,64}")
_UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_VERSION_RE = re.compile(r"[vV]?[0-9]+(?:[.:-][0-9A-Za-z]+)+")
_HOSTISH_RE = re.compile(r"(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}(?::[0-9]+)?|[0-9]{1,3}(?:\.[0-9]{1,3}){3}(?::[0-9]+)?")
_EMAILISH_RE = re.compile(r"[^@\s]+@[^@\s]+")


def _classes(v: str) -> int:
    return (any(c.islower() for c in v) + any(c.isupper() for c in v) + any(c.isdigit() for c in v)
            + any(not c.isalnum() for c in v))


def password_shape(v: str) -> bool:
    """A literal password in a slot that names one: 6+ characters, no space, letters and at least one more
    class (digit, other case, symbol), not a placeholder, reference, path, host, e-mail, date or version."""
    if not 6 <= len(v) <= 256 or _masked(v) or any(c.isspace() for c in v):
        return False
    if is_placeholder(v) or is_code_reference(v) or any(c in "()[]{}<>" for c in v):
        return False
    if not any(c.isalpha() for c in v) or "://" in v or v.startswith(("/", "~", "./", "$")):
        return False
    if _HOSTISH_RE.fullmatch(v) or _EMAILISH_RE.fullmatch(v) or _VERSION_RE.fullmatch(v):
        return False
    return _classes(v) >= 2 and not (v.islower() and v.replace("-", "").replace("_", "").isalpha())


def token_shape(v: str, min_len: int = 8) -> bool:
    """A generated secret: looks_like_token, and not a UUID (an id shown next to a secret)."""
    return not _masked(v) and not _UUID_RE.fullmatch(v) and looks_like_token(v, min_len=min_len)


def _judge(strength: str, v: str) -> bool:
    if strength == "password":
        return password_shape(v) or token_shape(v)
    if strength == "strong":
        return token_shape(v)
    if strength == "weak":
        return looks_like_token(v, min_len=16, min_entropy=3.5, need_digit=True) and not _HEX_ID_RE.fullmatch(v)
    return False


def _secret_name(name: str) -> str | None:
    """The strength a column/key name gives its values, or None. A bare "key" column (GPG key ids,
    cache keys, dictionary keys) names nothing."""
    name = name.strip().strip("`*_\"'").strip()
    if not name or len(name) > 48 or not any(c.isalpha() for c in name):
        return None
    cls = classify_name(name.replace(" ", "_"))
    if cls is None or cls[0] not in ("password", "strong"):
        return None
    return cls[0]


def _token_format(value: str) -> bool:
    """Does a token rule (a known vendor format) cover most of ``value``?"""
    from .engine import _scan_tokens  # lazy: the engine imports the rules, which import this module

    cands: list = []
    _scan_tokens(value, value.lower(), cands, lambda _w: True)
    return any(c[1] - c[0] >= 0.8 * len(value) for c in cands)


def _strip_cell(text: str, s: int, e: int) -> tuple[int, int]:
    while s < e and text[s] in " \t`\"'*":
        s += 1
    while e > s and text[e - 1] in " \t`\"'*\r":
        e -= 1
    return s, e


# --------------------------------------------------------------------------
# Tables, CSV, key/value listings
# --------------------------------------------------------------------------

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


def _lines(text: str) -> list[tuple[int, int]]:
    out = []
    pos = 0
    n = len(text)
    while pos <= n:
        nl = text.find("\n", pos)
        end = n if nl < 0 else nl
        out.append((pos, end))
        if nl < 0:
            break
        pos = nl + 1
    return out


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


def _line_at(text: str, p: int) -> tuple[int, int]:
    nl = text.find("\n", p)
    return text.rfind("\n", 0, p) + 1, len(text) if nl < 0 else nl


def _next_line(text: str, le: int) -> tuple[int, int] | None:
    if le >= len(text):
        return None
    nl = text.find("\n", le + 1)
    return le + 1, len(text) if nl < 0 else nl


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


# --------------------------------------------------------------------------
# Recovery / backup code lists
# --------------------------------------------------------------------------

_CODE_ITEM = r"[A-Za-z0-9]{3,12}(?:[- ][A-Za-z0-9]{3,12}){0,3}"
_CODE_LINE_RE = re.compile(r"[ \t]*(?:[-*•+][ \t]+|[0-9]{1,2}[.)][ \t]+)?(?P<v>" + _CODE_ITEM + r")[ \t]*\r?")
_CODE_INLINE_RE = re.compile(r"(?<![A-Za-z0-9-])" + _CODE_ITEM + r"(?:[ \t]*[,;][ \t]*" + _CODE_ITEM
                             + r"){3,}(?![A-Za-z0-9-])")
_CODE_ONE_RE = re.compile(_CODE_ITEM)
_CODE_WINDOW = 300
CODE_LIST_PATTERNS = (_CODE_LINE_RE.pattern, _CODE_INLINE_RE.pattern)


def _shape(item: str) -> tuple:
    return tuple(len(g) for g in re.split(r"[- ]", item)) + tuple(c for c in item if c in "- ")


def _code_list(items: list[str]) -> bool:
    """A list of one-time codes: 3+ distinct items of one shape, 8+ characters each, mostly with digits;
    not a list of short hashes or words."""
    if len(items) < 3 or len(set(items)) != len(items):
        return False
    shape = _shape(items[0])
    if any(_shape(it) != shape for it in items) or sum(shape[:len(shape) - len(shape) // 2]) < 8:
        return False
    bare = [it.replace("-", "").replace(" ", "") for it in items]
    if 2 * sum(any(c.isdigit() for c in b) for b in bare) < len(items):
        return False
    if all(b.isdigit() for b in bare) and len(bare[0]) == len(items[0]):
        return False  # plain numbers: ids, counts, not codes
    if len(bare[0]) == len(items[0]) and all(_HEX_ID_RE.fullmatch(b) for b in bare):
        return False  # abbreviated commit hashes
    return shannon("".join(bare)) >= 3.0


class _Cue:
    __slots__ = ("_s", "_e")

    def __init__(self, s: int, e: int) -> None:
        self._s, self._e = s, e

    def start(self) -> int:
        return self._s

    def end(self) -> int:
        return self._e


def find_code_lists(text: str, low: str) -> Iterator[Candidate]:
    if not _DIGIT_RE.search(text):
        return  # _code_list wants digits in half the items (ASCII items): ~1 text in 3 has none
    done = -1
    for cs, ce in word_hits(low, CODE_CUES):
        if cs < done or (low.startswith("code", cs) and ce < len(low) and low[ce].isalpha() and low[ce] != "s"):
            continue
        cue = _Cue(cs, ce)
        # a list starting within the window after the cue: one item a line …
        ls, le = _line_at(text, cue.end())
        nxt: tuple[int, int] | None = (ls, le)
        while nxt is not None and nxt[0] < cue.end() + _CODE_WINDOW:
            spans = []
            while nxt is not None and (m := _CODE_LINE_RE.fullmatch(text, *nxt)) is not None:
                spans.append(m.span("v"))
                nxt = _next_line(text, nxt[1])
            if spans:
                if _code_list([text[s:e] for s, e in spans]):
                    for s, e in spans:
                        yield ("recovery-codes", s, e, 0)
                    done = spans[-1][1]
                    break
            elif nxt is not None:
                nxt = _next_line(text, nxt[1])
        # … or items separated by commas
        m = _CODE_INLINE_RE.search(text, cue.end(), min(len(text), cue.end() + _CODE_WINDOW + 400)) \
            if text.find(",", cue.end(), cue.end() + _CODE_WINDOW + 20) >= 0 or \
            text.find(";", cue.end(), cue.end() + _CODE_WINDOW + 20) >= 0 else None
        if m is not None and m.start() < cue.end() + _CODE_WINDOW:
            spans = [x.span() for x in _CODE_ONE_RE.finditer(text, m.start(), m.end())]
            if _code_list([text[s:e] for s, e in spans]):
                for s, e in spans:
                    yield ("recovery-codes", s, e, 0)
                done = max(done, m.end())


# --------------------------------------------------------------------------
# Groups: TOTP seeds and setup keys, tokens read out in chunks
# --------------------------------------------------------------------------

_OTPAUTH_RE = re.compile(r"otpauth://[^\s\"'<>`]{0,512}?[?&]secret=(?P<v>[A-Za-z0-9%=_-]{8,256})")
_2FA_CUE_RE = re.compile(r"2fa|mfa|totp|otp|two[- ]factor|2-step|authenticator|setup key|set-up key|seed"
                         r"|manual(?:ly)?|scan|qr")
_BASE32_RE = re.compile(r"(?<![A-Za-z0-9_/+=-])(?:[A-Z2-7]{16,128}|[a-z2-7]{16,128})(?![A-Za-z0-9_/+=-])")
_GROUP_CUE_RE = re.compile(r"key|secret|seed|token|pass(?:word|phrase|code)?|chunks?|groups?|otp|2fa|mfa|scan")
_GROUPS_RE = re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{3,12}(?: [A-Za-z0-9_-]{3,12}){2,15}(?![A-Za-z0-9_-])")
_CUE_WINDOW = 120
_DIGIT_RE = re.compile(r"[0-9]")  # the code and group patterns match ASCII only: their digits are 0-9
#: literal cue words of find_groups (its gates)
GROUP_CUES = ("key", "secret", "seed", "token", "pass", "chunk", "group", "otp", "2fa", "mfa", "scan")
GROUP_PATTERNS = (_OTPAUTH_RE.pattern, _2FA_CUE_RE.pattern, _BASE32_RE.pattern, _GROUP_CUE_RE.pattern,
                  _GROUPS_RE.pattern) + GROUP_CUES


def _line_start(text: str, p: int, lines_back: int = 1) -> int:
    s = p
    for _ in range(lines_back + 1):
        s = text.rfind("\n", 0, max(0, s - 1)) + 1 if s > 0 else 0
        if s == 0:
            break
    return max(s, p - _CUE_WINDOW)


def _base32_seed(v: str) -> bool:
    if shannon(v) < 3.0 or is_placeholder(v):
        return False
    if v.islower() or not any(c.isdigit() for c in v):
        return any(c.isdigit() for c in v) and len(v) >= 16 if v.islower() else len(v) >= 24
    return True


def find_totp(text: str, low: str) -> Iterator[Candidate]:
    """The secret of an otpauth:// URI; a base32 seed after a 2FA cue."""
    if "otpauth:" in low:
        for m in _OTPAUTH_RE.finditer(text):
            v = m.group("v")
            if not _masked(v) and not is_placeholder(v):
                yield ("totp-secret", *m.span("v"), 0)
    if not _2FA_CUE_RE.search(low):
        return  # a seed needs a cue before it on its line; the cue pattern is plain words
    for m in _BASE32_RE.finditer(text):
        v = m.group()
        if _base32_seed(v) and _2FA_CUE_RE.search(low, _line_start(text, m.start()), m.start()):
            yield ("totp-secret", *m.span(), 0)


def find_groups(text: str, low: str) -> Iterator[Candidate]:
    """A value read out in groups after a cue: looked for only just after each cue word."""
    if not _DIGIT_RE.search(text):
        return  # see below: a group value has a digit
    seen = -1
    for _cs, ws in word_hits(low, GROUP_CUES):
        nl = low.find("\n", ws, ws + _CUE_WINDOW)
        if nl >= 0:
            nl2 = low.find("\n", nl + 1, ws + _CUE_WINDOW)
            we = nl2 if nl2 >= 0 else min(len(low), ws + _CUE_WINDOW)
        else:
            we = min(len(low), ws + _CUE_WINDOW)
        if we <= seen:
            continue
        if not _DIGIT_RE.search(text, max(ws, seen), we):
            seen = we
            continue  # a value read out in groups has a digit (below): prose after a cue has none
        for m in _GROUPS_RE.finditer(text, max(ws, seen), we):
            if any(c.isdigit() for c in m.group()):
                found = _grouped(text, low, m.start(), m.end())
                if found:
                    yield found
        seen = we


def _grouped(text: str, low: str, s: int, e: int) -> Candidate | None:
    """A value read out in space-separated groups: the longest run of equal groups in [s, e)."""
    groups = [(g.start(), g.end()) for g in re.finditer(r"[^ ]+", text[s:e])]
    # the run of groups with one length (a prefix group may be longer, the last shorter)
    best = None
    k = 0
    while k < len(groups):
        length = groups[k + 1][1] - groups[k + 1][0] if k + 1 < len(groups) else 0
        j = k + 1
        while j < len(groups) and groups[j][1] - groups[j][0] == length:
            j += 1
        if j < len(groups) and 0 < groups[j][1] - groups[j][0] < length:
            j += 1  # a shorter last group
        if j - k >= 3 and length >= 3 and groups[k][1] - groups[k][0] >= length:
            if best is None or j - k > best[1] - best[0]:
                best = (k, j)
        k += 1
    if best is None:
        return None
    gs, ge = s + groups[best[0]][0], s + groups[best[1] - 1][1]
    parts = text[gs:ge].split(" ")
    joined = "".join(parts)
    if len(joined) < 12 or _masked(joined):
        return None
    cue = _GROUP_CUE_RE.search(low, _line_start(text, gs), gs)
    if cue is None:
        return None
    b32 = (all(p.islower() or p.isdigit() for p in parts) or all(p.isupper() or p.isdigit() for p in parts)) and \
        all(c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ234567" for c in joined)
    if b32 and len(parts) >= 4 and len({len(p) for p in parts[1:-1]}) <= 1 and any(c.isdigit() for c in joined) \
            and shannon(joined) >= 3.0:
        return ("totp-secret", gs, ge, 0)
    if _HEX_ID_RE.fullmatch(joined) or not any(c.isdigit() for c in joined):
        return None  # a fingerprint or hash shown in groups; words
    if _token_format(joined) or (_classes(joined) >= 3 and token_shape(joined, 16) and shannon(joined) >= 3.5):
        return ("grouped-secret", gs, ge, 0)
    return None


# --------------------------------------------------------------------------
# Split values: one literal continued on the next line
# --------------------------------------------------------------------------

_PART = r"[A-Za-z0-9_\-+/=.~]"
# "abc" +  /  "def"   ("abc"  /  "def")   "abc"  /  + "def": found at the joint, then each part around it
_JOINT_RE = re.compile(r"(?P<q>[\"'])[ \t]*\+?[ \t]*\r?\n[ \t]*\+?[ \t]*(?P<q2>[\"'])")
_PART_RUN_RE = re.compile(_PART + r"{4,512}")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}=")
_PART_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+/=.~")
# the name a value is assigned to, right before it on its line
_ASSIGNED_RE = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_.\-]{0,63})[\"'\]]?[ \t]*(?::=|=|:)[ \t]*\(?[ \t]*[\"']?$")
_FENCE_RE = re.compile(r"(?m)^[ \t]*```[^\n]*\n(?P<body>(?:(?![ \t]*```)[^\n]*\n){1,40}?)[ \t]*```")
_WRAPPED_LINE_RE = re.compile(r"[ \t]*(" + _PART + r"{8,512})[ \t]*\r?")
_HASH_LENS = frozenset({7, 8, 10, 12, 16, 32, 40, 56, 64, 96, 128})
_SECRET_CUE_RE = re.compile(r"token|secret|key|pass(?:word|phrase)?|credential|api")
SPLIT_PATTERNS = (_JOINT_RE.pattern, _PART_RUN_RE.pattern, _ASSIGNED_RE.pattern, _FENCE_RE.pattern,
                  _WRAPPED_LINE_RE.pattern, _SECRET_CUE_RE.pattern)


def _assigned_strength(text: str, p: int) -> str | None:
    ls = text.rfind("\n", 0, p) + 1
    m = _ASSIGNED_RE.search(text, max(ls, p - 160), p)
    if m is None:
        return None
    return _secret_name(m.group("name").rsplit(".", 1)[-1])


def _split_secret(joined: str, strength: str | None) -> bool:
    if strength is not None and _judge(strength, joined):
        return True
    return _token_format(joined)


def _run_before(text: str, p: int, limit: int = 512) -> int:
    """Start of the run of value characters ending at ``p``."""
    s = p
    lo = max(0, p - limit)
    while s > lo and text[s - 1] in _PART_CHARS:
        s -= 1
    return s


def find_split_values(text: str, low: str) -> Iterator[Candidate]:
    joints = []
    for m in _JOINT_RE.finditer(text):
        ae = m.start()
        as_ = _run_before(text, ae)
        if as_ == 0 or text[as_ - 1] != m.group("q") or ae - as_ < 6:
            continue
        b = _PART_RUN_RE.match(text, m.end())
        if b is None or not text.startswith(m.group("q2"), b.end()):
            continue
        joints.append((as_, ae, *b.span()))
    pos = text.find("\\\n")
    while pos >= 0:
        # NAME=abc\  /  def   (a shell line continuation)
        as_ = _run_before(text, pos)
        nm = _ENV_NAME_RE.match(text, as_, pos)
        if nm is not None:
            as_ = nm.end()  # NAME=value\
        q = pos + 2
        while q < len(text) and text[q] in " \t":
            q += 1
        b = _PART_RUN_RE.match(text, q)
        if pos - as_ >= 6 and b is not None and (b.end() == len(text) or text[b.end()] in " \t\r\n;|&)`\"'"):
            joints.append((as_, pos, *b.span()))
        pos = text.find("\\\n", pos + 2)
    for as_, ae, bs, be in joints:
        a, b_ = text[as_:ae], text[bs:be]
        if _masked(a) or _masked(b_):
            continue
        if _split_secret(a + b_, _assigned_strength(text, as_)):
            yield ("split-secret", as_, ae, 0)
            yield ("split-secret", bs, be, 0)
    if "```" in text:
        for f in _FENCE_RE.finditer(text):
            bs, be = f.span("body")
            rows = _lines(text[bs:be].rstrip("\n"))
            if len(rows) != 2:
                continue
            ms = [_WRAPPED_LINE_RE.fullmatch(text, bs + s, bs + e) for s, e in rows]
            if None in ms:
                continue
            a, b = ms[0].group(1), ms[1].group(1)
            joined = a + b
            if _masked(joined):
                continue
            cue = _SECRET_CUE_RE.search(low, max(0, f.start() - 200), f.start())
            if _HEX_ID_RE.fullmatch(a) and _HEX_ID_RE.fullmatch(b):
                # two hashes, one a line, stay; a hex token wrapped is two lines of no hash length
                ok = cue is not None and len(joined) >= 32 and len(a) not in _HASH_LENS and len(b) not in _HASH_LENS
            else:
                ok = _token_format(joined) or (cue is not None and _classes(joined) >= 3 and token_shape(joined, 24)
                                               and shannon(joined) >= 4.0)
            if ok:
                yield ("split-secret", *ms[0].span(1), 0)
                yield ("split-secret", *ms[1].span(1), 0)


# --------------------------------------------------------------------------
# Encoded values: base64 piped to a decoder, URL-encoded parameters, a token as a URL's user
# --------------------------------------------------------------------------

_B64_BLOB_RE = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/]{16,4096}={0,2}(?![A-Za-z0-9+/=_-])")
# name%3Dvalue after "?" or "&", encoded any number of times (%3F, %253F, %26, %2526 …)
_ENC_PARAM_RE = re.compile(r"(?:%(?:25){0,3}3[Ff]|%(?:25){0,3}26|[?&])(?P<name>[A-Za-z0-9_.\-]{1,64})"
                           r"%(?P<lvl>(?:25){0,3})3[Dd]")
_ENC_VALUE_RE = re.compile(r"(?:[A-Za-z0-9._~+!*-]|%(?:25){0,3}[0-9A-Fa-f]{2}){1,2048}")
_ENC_STOP = frozenset("& \"'<>")
_TOKEN_USER_PW = frozenset({"", "x-oauth-basic", "x-oauth-token", "x", "oauth2", "basic"})
ENCODED_PATTERNS = (_B64_BLOB_RE.pattern, _ENC_PARAM_RE.pattern, _ENC_VALUE_RE.pattern)


def _decoded_secret(d: str) -> bool:
    d = d.strip("\r\n")
    if "PRIVATE KEY" in d:
        return True
    if not d or not d.isprintable() or any(c.isspace() for c in d):
        return False
    if _token_format(d):
        return True
    user, sep, pw = d.partition(":")
    if sep and user and pw and "/" not in d and password_shape(pw):
        return True  # user:password (HTTP basic)
    return token_shape(d, 16) or (len(d) >= 8 and _classes(d) >= 3 and password_shape(d))


def find_encoded_values(text: str, low: str) -> Iterator[Candidate]:
    if "base64" in low:
        last = -1
        for hit, _he in word_hits(low, ("base64",)):
            if hit <= last:
                continue
            ls, le = _line_at(low, hit)
            last = le
            for m in _B64_BLOB_RE.finditer(text, ls, le):
                v = m.group()
                if len(v) % 4 or shannon(v) < 3.5:
                    continue
                try:
                    d = base64.b64decode(v, validate=True).decode("ascii")
                except (binascii.Error, ValueError):
                    continue
                if _decoded_secret(d):
                    yield ("encoded-secret", *m.span(), 0)
    if "%3d" in low or "%253d" in low:
        for m in _ENC_PARAM_RE.finditer(text):
            v = _ENC_VALUE_RE.match(text, m.end())
            if v is None:
                continue
            s, e = v.span()
            e = _encoded_end(text, s, e)
            if e <= s:
                continue
            strength = _secret_name(m.group("name"))
            value = text[s:e]
            for _ in range(4):
                if "%" not in value:
                    break
                value = unquote(value)
            if strength is not None and _judge(strength, value):
                yield ("encoded-secret", s, e, 0)
    if "@" in text:
        for m in overlapping(URL_USERINFO_RE, text):
            pw = m.group("pw")
            user = m.group("user")
            if (pw is None or pw.lower() in _TOKEN_USER_PW) and _token_user(user):
                yield ("url-credentials", *m.span("user"), 0)


def _encoded_end(text: str, s: int, e: int) -> int:
    """Cut an encoded value at the first escape that decodes to a separator (``%26`` is ``&``)."""
    p = s
    while p < e:
        if text[p] == "%":
            q = p + 1
            while text.startswith("25", q) and q + 2 < e and text[q + 2] in "0123456789abcdefABCDEF":
                q += 2
            if chr(int(text[q:q + 2], 16)) in _ENC_STOP:
                return p
            p = q + 2
        else:
            p += 1
    return e


def _token_user(user: str) -> bool:
    """A URL's user that is a token (``https://<token>@host``): a generated value, 20+ characters."""
    if _masked(user) or len(user) < 20:
        return False
    if _HEX_ID_RE.fullmatch(user) and len(user) >= 32:
        return any(c.isdigit() for c in user) and any(c.isalpha() for c in user)
    return looks_like_token(user, min_len=20, min_entropy=3.0, need_digit=True) and _classes(user) >= 3

#: gate words of find_code_lists: the literal parts of its cues
CODE_CUES = ("recovery", "backup", "emergency", "scratch", "one-time", "one time", "single-use", "single use", "2fa",
             "mfa", "two-factor", "two factor", "2-step", "otp", "authenticator", "phone", "code")
