"""Split secrets, and the index of the structure detectors (issue 34).

This module finds **split values**: a literal continued on the next lines, judged joined —
``"abc" +`` / ``"def"`` (any number of parts), a shell ``\\`` continuation, a YAML block scalar
(``API_TOKEN: >-`` then indented halves) or a triple-quoted string under a key naming a secret,
the wrapped lines of a code block after a cue.

The other structure detectors live beside it and are named here for ``rules.py``:
:mod:`redaction.tables` (tables, CSV, key/value listings whose header or key names a secret),
:mod:`redaction.codes` (recovery code lists), :mod:`redaction.groups` (values read out in groups,
TOTP seeds), :mod:`redaction.encoded` (base64, URL-encoded, a token as a URL's user); shared value
judgment and line helpers in :mod:`redaction.struct_base`. Same conventions as
:mod:`redaction.detectors`: ``find_*(text, low)`` yields ``(rule_id, start, end, keep)``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .codes import CODE_CUES, CODE_LIST_PATTERNS, find_code_lists
from .detectors import Candidate, _masked
from .encoded import ENCODED_PATTERNS, find_encoded_values
from .entropy import shannon
from .groups import GROUP_CUES, GROUP_PATTERNS, find_groups, find_totp
from .struct_base import _HEX_ID_RE, _classes, _judge, _lines, _secret_name, _token_format, password_shape, token_shape
from .tables import _TABLE_WORDS, TABLE_PATTERNS, find_tables

# The detectors of tables.py, codes.py, groups.py and encoded.py are named here for rules.py.
__all__ = ["find_tables", "find_code_lists", "find_groups", "find_totp", "find_split_values", "find_encoded_values",
           "TABLE_PATTERNS", "CODE_LIST_PATTERNS", "CODE_CUES", "GROUP_PATTERNS", "GROUP_CUES", "SPLIT_PATTERNS",
           "ENCODED_PATTERNS", "_TABLE_WORDS", "password_shape", "token_shape"]

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
_LAST_LINE_RE = re.compile(r"[ \t]*(" + _PART + r"{2,512})[ \t]*\r?")
_HASH_LENS = frozenset({7, 8, 10, 12, 16, 32, 40, 56, 64, 96, 128})
_SECRET_CUE_RE = re.compile(r"token|secret|key|pass(?:word|phrase)?|credential|api")
SPLIT_PATTERNS = (_JOINT_RE.pattern, _PART_RUN_RE.pattern, _ASSIGNED_RE.pattern, _FENCE_RE.pattern, _LAST_LINE_RE.pattern,
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
        bm = _PART_RUN_RE.match(text, m.end())
        if bm is None or not text.startswith(m.group("q2"), bm.end()):
            continue
        joints.append((as_, ae, *bm.span()))
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
        bm = _PART_RUN_RE.match(text, q)
        if pos - as_ >= 6 and bm is not None and (bm.end() == len(text) or text[bm.end()] in " \t\r\n;|&)`\"'"):
            joints.append((as_, pos, *bm.span()))
        pos = text.find("\\\n", pos + 2)
    for parts in _chains(joints):
        if any(_masked(text[a:b]) for a, b in parts):
            continue
        if _split_secret("".join(text[a:b] for a, b in parts), _assigned_strength(text, parts[0][0])):
            for a, b in parts:
                yield ("split-secret", a, b, 0)
    if any(o in text for o in _BLOCK_OPENERS):
        yield from _block_values(text)
    if "```" in text:
        for f in _FENCE_RE.finditer(text):
            bs, be = f.span("body")
            rows = _lines(text[bs:be].rstrip("\n"))
            if not 2 <= len(rows) <= 12:
                continue
            line_ms = [(_WRAPPED_LINE_RE if k < len(rows) - 1 else _LAST_LINE_RE).fullmatch(text, bs + s, bs + e)
                       for k, (s, e) in enumerate(rows)]  # the last line of a wrapped value may be short
            ms = [lm for lm in line_ms if lm is not None]
            if len(ms) < len(line_ms):
                continue  # a line that is no piece of a wrapped value
            pieces = [lm.group(1) for lm in ms]
            joined = "".join(pieces)
            if _masked(joined):
                continue
            cue = _SECRET_CUE_RE.search(low, max(0, f.start() - 200), f.start())
            if len(pieces) > 2 and cue is None:
                ok = False  # lines of ids or tokens, one a line: only a cue says they are one value
            elif all(_HEX_ID_RE.fullmatch(p) for p in pieces):
                # hashes, one a line, stay; a hex token wrapped is lines of no hash length
                ok = cue is not None and len(joined) >= 32 and not any(len(p) in _HASH_LENS for p in pieces)
            else:
                ok = _token_format(joined) or (cue is not None and _classes(joined) >= 3 and token_shape(joined, 24)
                                               and shannon(joined) >= 4.0)
            if ok:
                for lm in ms:
                    yield ("split-secret", *lm.span(1), 0)


def _chains(joints: list[tuple[int, int, int, int]]) -> list[list[tuple[int, int]]]:
    """Joints sharing a part chain into one value: "a" + / "b" + / "c"."""
    out: list[list[tuple[int, int]]] = []
    for as_, ae, bs, be in sorted(joints):
        if out and out[-1][-1] == (as_, ae):
            out[-1].append((bs, be))
        else:
            out.append([(as_, ae), (bs, be)])
    return out


# A key whose value is a block on the next lines: YAML "name: |" / ">-", a triple-quoted string.
_BLOCK_KEY_RE = re.compile(r"(?m)^(?P<ind>[ \t]*)(?:- )?[\"']?(?P<name>[A-Za-z_][A-Za-z0-9_.\-]{0,63})[\"']?[ \t]*"
                           r"(?::|=|:=)[ \t]*(?P<open>[|>][+-]?[1-9]?[+-]?|\"\"\"|''')[ \t]*\r?$")
_BLOCK_LINE_RE = re.compile(r"[ \t]*(" + _PART + r"{4,512})[ \t]*\r?")


_BLOCK_OPENERS = (": |", ": >", ":|", ":>", '= """', "= '''", '="""', "='''", ': """')


def _block_values(text: str) -> Iterator[Candidate]:
    """The lines of a block value under a key naming a secret, judged joined (a token folded over
    lines: ``API_TOKEN: >-`` then two indented halves)."""
    for k in _BLOCK_KEY_RE.finditer(text):
        strength = _secret_name(k.group("name").rsplit(".", 1)[-1])
        if strength is None:
            continue
        yaml = k.group("open")[0] in "|>"
        spans: list[tuple[int, int]] = []
        nxt = k.end() + 1
        while nxt < len(text) and len(spans) < 40:
            nl = text.find("\n", nxt)
            end = len(text) if nl < 0 else nl
            m = _BLOCK_LINE_RE.fullmatch(text, nxt, end)
            if m is None or (yaml and m.start(1) - nxt <= len(k.group("ind"))):
                break  # a YAML block ends where the indentation does
            spans.append(m.span(1))
            nxt = end + 1
        if not spans:
            continue
        joined = "".join(text[a:b] for a, b in spans)
        if not _masked(joined) and (_judge(strength, joined) or _token_format(joined)):
            for a, b in spans:
                yield ("split-secret", a, b, 0)
