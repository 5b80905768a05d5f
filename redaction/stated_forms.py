"""More forms of a credential stated in text (issue 34), beside :mod:`redaction.stated`:

* ``user:password`` in running text ("logged in with ops:Z3phyr_322");
* passphrases of words after a password cue ("the passphrase is fossil lotus quartz 7624");
* the passphrase stated right after a private key block;
* an AWS secret access key stated in prose next to its key id.

Same conventions as :mod:`redaction.detectors`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .cues import word_passphrase
from .entropy import shannon
from .stated import _SPAN_AFTER, Candidate, _cue_hits, _line_bounds, _memo_shape, _tokens, _trim
from .value_shape import _PASSPHRASE_RE, _PW_SYMBOLS, _classes, shape

__all__ = ["find_user_colon_passwords", "find_word_passphrases", "find_after_private_key", "find_aws_prose_secrets"]

# --------------------------------------------------------------------------
# user:password in running text
# --------------------------------------------------------------------------

# "logged in with ops:Z3phyr_322", "creds deploy:Sparrow1994$": a short lowercase user name,
# a colon, a value that is credential-shaped on its own. Schemes and digests are not users.
_USER_PW_RE = re.compile(r"(?<![A-Za-z0-9_@/:.\\-])(?P<u>[a-z][a-z0-9._-]{1,31}):(?P<p>[^\s:/]{6,128})"
                         r"(?=[\s,;.!?)\]'\"`]|$)")
_NOT_USERS = frozenset("""
h1 h2 h3 http https ftp sftp ssh git file mailto tel data urn arn sha sha1 sha256 sha384 sha512 md5 base64 b64 hex npm pkg
docker oci registry image tag ref refs origin upstream key secret token id uuid env var type kind name label
""".split())
USER_PW_PATTERNS = (_USER_PW_RE.pattern,)
_USER_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789._-")


def find_user_colon_passwords(text: str, low: str) -> Iterator[Candidate]:
    i = text.find(":")
    if i < 0:
        return
    while i >= 0:
        a = i
        while a > 0 and i - a <= 32 and (text[a - 1] in _USER_CHARS):
            a -= 1
        m = _USER_PW_RE.match(text, a) if a < i else None
        i = text.find(":", i + 1)
        if m is None:
            continue
        if m.group("u") in _NOT_USERS or m.group("u").endswith((".", "-", "_")):
            continue
        s, e = _trim(text, *m.span("p"))
        sh = shape(text[s:e]) if e > s else None
        if sh == "medium" or (sh == "weak" and (_pw_like(text[s:e]) or _cue_on_line(text, low, s))) \
                or (e > s and _words_pw(text[s:e])):
            yield ("stated-password", s, e, 0)


def _words_pw(v: str) -> bool:
    """A passphrase of words after ``user:`` with no cue: four or more words, or three and a number
    ("magpie_indigo_marigold_383", "kestrel+cinder+quartz+waffle")."""
    return word_passphrase(v) and (v[-1].isdigit() or len(re.split(r"[-_.+]", v)) >= 4)


def _pw_like(v: str) -> bool:
    """A weak value that reads as a password after ``user:`` with no cue around: 8+ characters,
    letters and digits, and capitals mixed with lower case or a password symbol ("Marble2007",
    "8FkpkFQDb"); not a CamelCase name with a version ("PostgreSQL15", "Python3")."""
    up, lo, dg, _sy = _classes(v)
    if len(v) < 8 or not dg or not (up or lo):
        return False
    if any(c in _PW_SYMBOLS for c in v):
        return True
    return up and lo and not _NAME_VERSION_RE.fullmatch(v)


# a name and a version: "PostgreSQL15", "Keycloak22", "Node18Alpine" (a capital after the digits)
_NAME_VERSION_RE = re.compile(r"(?:[A-Z][a-z]+|[A-Z]{2,})+(?:[A-Z]{2,})?[0-9]{1,3}(?:[A-Z][a-z]+)*")


def _cue_on_line(text: str, low: str, pos: int) -> bool:
    """A login or password cue on the line of ``pos`` ("basic auth", "creds", "login")."""
    ls, le = _line_bounds(text, pos, pos)
    seg = low[ls:le]
    # "account" is a login cue for a pair ("account: jenkins / X"), not for any user:value on its line
    return any(kind != "tok" and not seg.startswith("acc", s) for s, _e, kind in _cue_hits(text[ls:le], seg))


# --------------------------------------------------------------------------
# Passphrases of words ("The passphrase is fossil lotus quartz 7624")
# --------------------------------------------------------------------------

_WORDS_AFTER_RE = re.compile(
    r"(?:pass ?phrase|passwort|password|mot de passe|contraseña|senha|wachtwoord|kennwort)s?"
    r"(?:[ \t]+(?:is|was|ist|est|es|é|è|:|=|->|→)[ \t]*|[ \t]*[:=→][ \t]*)[\"'`]?"
    r"(?P<v>[a-z]{3,12}(?: [a-z]{3,12}){2,7}(?: \d{1,6})?|[a-z]{3,12}(?: [a-z]{3,12}){1,7} \d{1,6})"
    r"(?![A-Za-z0-9])")
_STOPWORDS = frozenset("""
the a an and or not but is are was were be been being to of in on at by for from with without as that this these
those it its your my our their his her you we they he she them us me at least most more less than characters chars
char words word letters long short required needed must should can will would may might optional empty set reset
change changed stored saved hashed encrypted protected same different new old wrong right correct incorrect valid
invalid expired field prompt manager policy here there when then also only just still please every each any all
some no yes ok via into onto over under about after before again too very one two three four five six seven eight
""".split())
PASSPHRASE_PATTERNS = (_WORDS_AFTER_RE.pattern,)


def find_word_passphrases(text: str, low: str) -> Iterator[Candidate]:
    for m in _WORDS_AFTER_RE.finditer(low):
        words = m.group("v").split()
        if any(w in _STOPWORDS for w in words) or not text[m.start("v"):m.end("v")].islower() \
                or (len(words) < 4 and not words[-1].isdigit()):
            continue
        yield ("stated-password", m.start("v"), m.end("v"), 0)


# --------------------------------------------------------------------------
# A value stated right after a private key block (its passphrase)
# --------------------------------------------------------------------------

_KEY_END_RE = re.compile(r"private key-----")
# words and a number: "zephyr pepper cinder 5486" (a diceware passphrase)
_WORD_RUN_RE = re.compile(r"(?<![A-Za-z0-9])[a-z]{3,12}(?: [a-z]{3,12}){2,8} \d{1,6}(?![A-Za-z0-9])")
KEY_AFTER_PATTERNS = (_KEY_END_RE.pattern,)


def find_after_private_key(text: str, low: str) -> Iterator[Candidate]:
    memo: dict[str, str | None] = {}
    shape = lambda v: _memo_shape(memo, v)  # noqa: E731
    for m in _KEY_END_RE.finditer(low):
        if low.rfind("-----end", max(0, m.start() - 40), m.start()) < 0:
            continue
        # the next three non-empty lines
        pos, lines = m.end(), 0
        while lines < 3 and pos < len(text):
            nl = text.find("\n", pos)
            end = len(text) if nl < 0 else nl
            if text[pos:end].strip() and not text[pos:end].strip().startswith("```"):
                lines += 1
                for s0, e0 in _tokens(text, pos, min(end, pos + _SPAN_AFTER)):
                    s, e = _trim(text, s0, e0)
                    if e <= s:
                        continue
                    v = text[s:e]
                    sh = shape(v)
                    if sh == "medium" or (sh == "weak" and _PASSPHRASE_RE.fullmatch(v)):
                        yield ("stated-password", s, e, 0)
                for w in _WORD_RUN_RE.finditer(low, pos, end):
                    words = w.group().split()
                    while words and words[0] in _STOPWORDS:
                        words.pop(0)
                    if len(words) >= 4 and not any(x in _STOPWORDS for x in words):
                        yield ("stated-password", w.end() - len(" ".join(words)), w.end(), 0)
            pos = end + 1


# --------------------------------------------------------------------------
# The AWS secret access key stated in prose after (or before) its key id
# --------------------------------------------------------------------------

_AWS_ID_RE = re.compile(r"(?<![A-Za-z0-9])A(?:KIA|SIA)[A-Z0-9]{16}(?![A-Za-z0-9])")
_AWS_SECRET_RE = re.compile(r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
AWS_PATTERNS = (_AWS_ID_RE.pattern, _AWS_SECRET_RE.pattern)


def find_aws_prose_secrets(text: str, low: str) -> Iterator[Candidate]:
    if "AKIA" not in text and "ASIA" not in text:
        return
    for m in _AWS_ID_RE.finditer(text):
        lo, hi = max(0, m.start() - 300), min(len(text), m.end() + 300)
        for k in _AWS_SECRET_RE.finditer(text, lo, hi):
            v = k.group()
            up, lw, dg, _sy = _classes(v)
            if up and lw and dg and shannon(v) >= 4.0:
                yield ("aws-secret-access-key", k.start(), k.end(), 0)
