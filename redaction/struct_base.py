"""Shared pieces of the structure detectors (:mod:`redaction.tables`, :mod:`redaction.structures`,
:mod:`redaction.encoded`): how a value in a slot that names a secret is judged, what a name gives
its value, and line helpers over (text, start, end) offsets.
"""

from __future__ import annotations

import re

from .assignments import classify_name
from .detectors import _masked
from .entropy import is_code_reference, is_placeholder, looks_like_token

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
# Lines
# --------------------------------------------------------------------------

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


def _line_at(text: str, p: int) -> tuple[int, int]:
    nl = text.find("\n", p)
    return text.rfind("\n", 0, p) + 1, len(text) if nl < 0 else nl


def _next_line(text: str, le: int) -> tuple[int, int] | None:
    if le >= len(text):
        return None
    nl = text.find("\n", le + 1)
    return le + 1, len(text) if nl < 0 else nl

