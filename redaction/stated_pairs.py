"""Logins given as pairs and values continued past their line (issue 34, round 3).

* a login written as a pair on a line that names a login: "`monitor` / `X`", "admin // X",
  "u: ops p: X", "log in as `deploy` with `X`", "admin:X@nas.home.lan" (the host stays);
* a device or network login "wifi: SSID / value", "IPMI: ADMIN / value";
* a key named by what it is, then a base64 run: "aws configure set aws_secret_access_key X", "secret
  access key for the backup bucket = X", "unseal key 1: X";
* the rest of a value masked by another rule, on the next line ("token=<masked>" then a line
  holding only the rest) or joined to it on its line ("`<masked>` + `rest`").

The values are judged by :func:`redaction.stated_near.pw_like`. Same conventions as
:mod:`redaction.detectors`: pure functions over (text, lowercased text).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .cues import camel_passphrase, word_passphrase
from .detectors import Candidate
from .entropy import shannon
from .stated_near import _BARE_WORDS_RE, _line, _phrase_ok, _strong, _trim
from .value_shape import _PW_SYMBOLS, _id_shaped, shape

__all__ = ["find_continued", "find_label_pairs", "find_login_pairs", "find_named_keys"]

# the end of a line whose value was masked (by another rule, in an earlier pass: the engine re-scans
# with markers blanked) or written as *** — then a line that holds only the rest of a token
_CONTINUED_RE = re.compile(r"(?:\x0b{4,}|\*{3,})[\"']?[ \t]*(?:\+|\\|\.\.\.|…)?[ \t]*\r?\n"
                           r"[ \t]*(?:[A-Za-z_][A-Za-z0-9_]*[ \t]*\+=[ \t]*|\+[ \t]*)?[\"']?"
                           r"(?P<v>[A-Za-z0-9_\-+/=.~]{6,512})[\"']?[ \t]*[;,)]?[ \t]*\r?(?:\n|$)")
# "wifi: AcmeGuest / value", "IPMI: ADMIN / value", "router: admin // value"
_LABEL_PAIR_RE = re.compile(r"(?im)^[ \t>*-]*(?:[^\n:]{0,40}?\b)?(?P<label>wi-?fi|wlan|ssid|network|guest|ipmi|idrac|ilo|bmc"
                            r"|router|console|switch|nas|printer|camera|ap|login|creds|credentials|account|vpn)\b"
                            r"[^\n:]{0,30}:[ \t]+[`'\"]?[^\s/`'\"]{2,40}[`'\"]?[ \t]+/{1,2}[ \t]+(?P<v>[^\n]{4,80}?)[ \t]*\r?$")


_LONG_RANDOM_RE = re.compile(r"(?=.*[0-9])(?=.*[A-Z])(?=.*[a-z])[A-Za-z0-9_\-+/=]{12,}|[0-9a-f]{16,}")


def _token_rest(v: str) -> bool:
    """The rest of a token: random-looking (digits or mixed case, not a word or a path)."""
    return (any(c.isdigit() for c in v) or (any(c.isupper() for c in v[1:]) and any(c.islower() for c in v))) \
        and not _id_shaped(v.strip(".")) or (len(v) >= 12 and any(c.isdigit() for c in v) and "/" not in v[:1])


# "`<masked>` + `rest`", "\"<masked>\"\"rest\"": the rest of a value joined to it on the same line
_JOINED_RE = re.compile(r"\x0b{4,}(?P<q>[\"'`])[ \t]*(?:\+[ \t]*)?(?P=q)(?P<v>[A-Za-z0-9_\-+/=.~]{6,512})(?P=q)")


def find_continued(text: str, low: str) -> Iterator[Candidate]:
    for m in _JOINED_RE.finditer(text):
        if _token_rest(m.group("v")):
            yield ("split-secret", *m.span("v"), 0)
    for m in _CONTINUED_RE.finditer(text):
        v = m.group("v")
        if m.group().startswith("*") and not (len(v) >= 12 and (shape(v) == "medium" or _LONG_RANDOM_RE.fullmatch(v))):
            continue  # "password: ***" then a line of prose: only a long random run continues a value
        if _token_rest(v) and not v.startswith(("http", "//")):
            yield ("split-secret", *m.span("v"), 0)


def find_label_pairs(text: str, low: str) -> Iterator[Candidate]:
    for m in _LABEL_PAIR_RE.finditer(text):
        s, e = m.span("v")
        v = text[s:e]
        if " " in v:
            if _BARE_WORDS_RE.fullmatch(v) and _phrase_ok(v):
                yield ("stated-password", s, e, 0)
            continue
        s, e = _trim(text, s, e)
        if e > s and _strong(text[s:e]):
            yield ("stated-password", s, e, 0)


# a login given as a pair on a line that names a login: "`monitor` / `X`", "admin // X", "u: ops p: X",
# "log in as `deploy` with `X`", "admin:X@nas.home.lan"
_PAIR_CUE_RE = re.compile(r"(?i)\b(?:log(?:ged)?[ -]?in(?:to)?|sign[ -]?in|creds?|credentials?|account|acct|user(?:name)?|u"
                          r"|admin|root|ssh|basic auth|auth|access|dashboard|console|portal|panel|ui)\b")
_PAIR_RE = re.compile(r"(?<![\w@./:+=%-])(?P<q>[`'\"]?)(?P<u>[A-Za-z][\w.@-]{1,40})(?P=q)[ \t]*"
                      r"(?:/{1,2}|\||,|:| (?:with|and|mit|et|y|e|con|avec) )[ \t]*"
                      r"(?P<q2>[`'\"]?)(?P<v>[^\s`'\"]{4,64})(?P=q2)(?=[\s,;.)]|$)")
_UP_RE = re.compile(r"(?i)\bu(?:ser(?:name)?)?[ \t]*[:=][ \t]*\S+[ \t,;/|]+p(?:w|wd|ass(?:word)?)?[ \t]*[:=][ \t]*"
                    r"[`'\"]?(?P<v>[^\s`'\"]{4,64})")
_PW_WORD_RE = re.compile(r"(?i)pass|\bpw|pwd|creds|kennw|mot de|contrase|senha|wachtw|has[lł]o|парол")
_HOST_TAIL_RE = re.compile(r"@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}(?::\d+)?$|@localhost(?::\d+)?$|@\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?$")


def find_login_pairs(text: str, low: str) -> Iterator[Candidate]:
    for m in _UP_RE.finditer(text):
        s, e = _trim(text, *m.span("v"))
        if e > s and _strong(text[s:e]):
            yield ("stated-password", s, e, 0)
    done: set[int] = set()
    for c in _PAIR_CUE_RE.finditer(text):
        ls, le = _line(text, c.start())
        if ls in done:
            continue
        done.add(ls)  # only the lines naming a login are read for pairs
        yield from _line_pairs(text, ls, le)


def _line_pairs(text: str, ls: int, le: int) -> Iterator[Candidate]:
    for m in _PAIR_RE.finditer(text, ls, le):
        s, e = m.span("v")
        h = _HOST_TAIL_RE.search(text, s, e)
        if h is not None:
            e = h.start()  # user:password@host: the host stays
        s, e = _trim(text, s, e)
        v = text[s:e]
        raw = text[m.end("u"):m.start("v")]
        sep = raw.strip(" \t`'\"")
        if sep in ("/", "//", "|") and not (raw[:1] in " \t`'\"" and raw[-1:] in " \t`'\""):
            continue  # "docs/auth.md#keys": a path; a pair is written "admin / X"
        if sep == ":" and h is None:
            continue  # "user:password" with no host is user-colon-password's (it knows the shapes around it)
        u = m.group("u")
        if e <= s or len(u) > 32 or not (u.islower() or u.isupper() or u[1:].islower()) or "=" in v[:-2] \
                or v.lower() == u.lower() or not _strong(v):
            continue  # the user is a name (not a run of a blob); the value is no key=value
        if shape(v) is None and h is None and not m.group("q2") and not (word_passphrase(v) or camel_passphrase(v)):
            continue  # "'username' | base64": a word with a number is a value only when quoted or before @host
        if shape(v) != "medium" and not m.group("q2") and h is None and not any(c in _PW_SYMBOLS for c in v) \
                and not (word_passphrase(v) or camel_passphrase(v)) and not _PW_WORD_RE.search(text, ls, le):
            continue  # "SSO account / Okta2 profile": a name with a number needs a password word on its line
        if sep == "," and not m.group("q2"):
            continue  # "type=LOGIN_ERROR, clientId=…": lists of fields, not a pair
        if sep == "" or sep.isalpha():
            if not (shape(v) == "medium" or m.group("q2")):
                continue  # "deploy and X", "as deploy, X": only a credential-shaped or quoted value
        yield ("stated-password", s, e, 0)


# a key named by what it is, then (within a few words) a base64 run of its length
_NAMED_KEY_RE = re.compile(r"(?i)(?<![A-Za-z0-9])(?:aws_?)?secret[ _-]?access[ _-]?key|unseal[ _-]key|recovery[ _-]key"
                           r"|root[ _-]token")
_B64_RUN_RE = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/]{32,128}={0,2}(?![A-Za-z0-9+/=_-])")
NAMED_KEY_GATES = ("secret access key", "secret_access_key", "secretaccesskey", "secret-access-key", "unseal",
                   "recovery key", "recovery_key", "recovery-key", "root token", "root_token", "root-token")


def find_named_keys(text: str, low: str) -> Iterator[Candidate]:
    for m in _NAMED_KEY_RE.finditer(text):
        le = text.find("\n", m.end())
        k = _B64_RUN_RE.search(text, m.end(), min(len(text) if le < 0 else le, m.end() + 80))
        if k is None:
            continue
        v = k.group().rstrip("=")
        if v.startswith("/") or re.search(r"/[a-z]{3,}/", v):
            continue  # a path (/usr/share/doc/…), not a key
        # (not _id_shaped: a base64 key with two runs of letters between "/" reads as a path to it)
        if sum(c.isdigit() for c in v) >= 2 and any(c.isupper() for c in v) and any(c.islower() for c in v) \
                and not v.isalnum() or (len(v) >= 40 and sum(c.isdigit() for c in v) >= 3 and shannon(v) >= 4.0):
            yield ("named-key", *k.span(), 0)
