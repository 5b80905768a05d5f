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

import re
from collections.abc import Iterator

from .detectors import Candidate, _masked
from .encoded import ENCODED_PATTERNS, find_encoded_values
from .groups import GROUP_CUES, GROUP_PATTERNS, find_groups, find_totp
from .entropy import shannon
from .phrases import word_hits
from .struct_base import (_HEX_ID_RE, _classes, _judge, _lines, _line_at, _next_line, _secret_name, _token_format,
                          password_shape, token_shape)
from .tables import _TABLE_WORDS, TABLE_PATTERNS, find_tables

__all__ = ["find_tables", "find_code_lists", "find_groups", "find_split_values", "find_encoded_values",
           "find_totp", "TABLE_PATTERNS", "CODE_LIST_PATTERNS", "GROUP_PATTERNS", "GROUP_CUES", "SPLIT_PATTERNS", "ENCODED_PATTERNS",
           "_TABLE_WORDS", "password_shape", "token_shape"]

# --------------------------------------------------------------------------
# Recovery / backup code lists
# --------------------------------------------------------------------------

_CODE_ITEM = r"[A-Za-z0-9]{3,12}(?:[- ][A-Za-z0-9]{3,12}){0,3}"
_CODE_LINE_RE = re.compile(r"[ \t]*(?:[-*•+][ \t]+|[0-9]{1,2}[.)][ \t]+)?(?P<v>" + _CODE_ITEM + r")[ \t]*\r?")
_CODE_INLINE_RE = re.compile(r"(?<![A-Za-z0-9-])" + _CODE_ITEM + r"(?:[ \t]*[,;][ \t]*" + _CODE_ITEM
                             + r"){3,}(?![A-Za-z0-9-])")
_CODE_ONE_RE = re.compile(_CODE_ITEM)
_CODE_WINDOW = 300
_DIGIT_RE = re.compile(r"[0-9]")  # the code patterns match ASCII only: their digits are 0-9
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

#: gate words of find_code_lists: the literal parts of its cues
CODE_CUES = ("recovery", "backup", "emergency", "scratch", "one-time", "one time", "single-use", "single use", "2fa",
             "mfa", "two-factor", "two factor", "2-step", "otp", "authenticator", "phone", "code")
