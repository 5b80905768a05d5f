"""Encoded values (issue 34): a base64 blob decoded on the same line (``| base64 -d``) whose decoding
is a credential; ``name%3Dvalue`` inside a URL-encoded URL (any number of layers) whose name says
secret; a token used as a URL's user (the host and path stay). Same conventions as
:mod:`redaction.detectors`.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from urllib.parse import unquote

from .cues import word_passphrase
from .detectors import URL_USERINFO_RE, Candidate, _masked, overlapping
from .entropy import looks_like_token, shannon
from .phrases import word_hits
from .struct_base import (
    _HEX_ID_RE,
    _classes,
    _judge,
    _line_at,
    _secret_name,
    _token_format,
    password_shape,
    token_shape,
)

__all__ = ["find_encoded_values", "ENCODED_PATTERNS"]

_B64_BLOB_RE = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/]{16,4096}={0,2}(?![A-Za-z0-9+/=_-])")
# name%3Dvalue after "?" or "&", encoded any number of times (%3F, %253F, %26, %2526 …)
_ENC_PARAM_RE = re.compile(r"(?:%(?:25){0,3}3[Ff]|%(?:25){0,3}26|[?&])(?P<name>[A-Za-z0-9_.\-]{1,64})"
                           r"%(?P<lvl>(?:25){0,3})3[Dd]")
_ENC_VALUE_RE = re.compile(r"(?:[A-Za-z0-9._~+!*-]|%(?:25){0,3}[0-9A-Fa-f]{2}){1,2048}")
_ENC_STOP = frozenset("& \"'<>")
_KEY_PARAMS = frozenset({"key", "apikey", "api-key", "sig", "signature", "access_key", "accesskey", "k"})
_TOKEN_USER_PW = frozenset({"", "x-oauth-basic", "x-oauth-token", "x", "oauth2", "basic"})
_ENC_JSON_RE = re.compile(r"%(?P<l>(?:25)?)22(?P<name>[A-Za-z0-9_.\-]{1,64})%(?P=l)22%(?P=l)3[Aa](?:%(?P=l)20)*%(?P=l)22"
                          r"(?P<v>(?:[A-Za-z0-9._~+!*-]|%(?:25){0,2}[0-9A-Fa-f]{2}){1,512}?)%(?P=l)22")
ENCODED_PATTERNS = (_B64_BLOB_RE.pattern, _ENC_PARAM_RE.pattern, _ENC_VALUE_RE.pattern, _ENC_JSON_RE.pattern)


_JSON_SECRET_RE = re.compile(r'(?i)"[a-z_]*(?:password|passwd|secret|token|api_?key|private_?key)"\s*:\s*"[^"]{4,}"')


def _decoded_secret(d: str) -> bool:
    d = d.strip("\r\n")
    if "PRIVATE KEY" in d:
        return True
    if not d or not d.isprintable() or any(c.isspace() for c in d):
        return False
    if _token_format(d):
        return True
    if d[0] in "{[" and d[-1] in "}]":
        # a JSON payload (an event body, a JWT header): data unless a field is named for a secret
        return _JSON_SECRET_RE.search(d) is not None
    if word_passphrase(d):
        return True  # "wombat_glacier_dynamo": a passphrase of words, encoded
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
            vm = _ENC_VALUE_RE.match(text, m.end())
            if vm is None:
                continue
            s, e = vm.span()
            e = _encoded_end(text, s, e, len(m.group("lvl")) // 2)
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
            elif strength is None and m.group("name").lower() in _KEY_PARAMS and (
                    (_HEX_ID_RE.fullmatch(value) and len(value) >= 32) or token_shape(value, 20)):
                yield ("encoded-secret", s, e, 0)  # "…%3Fkey%3D<40 hex>": an API key as a bare "key" parameter
    if "%3a" in low or "%253a" in low:
        for m in _ENC_JSON_RE.finditer(text):  # %22password%22%3A%22<value>%22: JSON inside a URL
            value = unquote(unquote(m.group("v")))
            strength = _secret_name(m.group("name"))
            if strength is not None and _judge(strength, value):
                yield ("encoded-secret", *m.span("v"), 0)
    if "@" in text:
        for m in overlapping(URL_USERINFO_RE, text):
            pw = m.group("pw")
            user = m.group("user")
            if (pw is None or pw.lower() in _TOKEN_USER_PW) and _token_user(user):
                yield ("url-credentials", *m.span("user"), 0)


def _encoded_end(text: str, s: int, e: int, level: int = 0) -> int:
    """Cut an encoded value at the first escape that decodes to a separator (``%26`` is ``&``) at
    the level of its name's ``=`` (``password%3D…%2526…``: the ``&`` one level deeper is the value's)."""
    p = s
    while p < e:
        if text[p] == "%":
            q = p + 1
            while text.startswith("25", q) and q + 2 < e and text[q + 2] in "0123456789abcdefABCDEF":
                q += 2
            if chr(int(text[q:q + 2], 16)) in _ENC_STOP and (q - p - 1) // 2 <= level:
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
