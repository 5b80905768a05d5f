"""Values read out in groups (issue 34): a TOTP seed or setup key, a token copied in chunks.

* the ``secret`` of an ``otpauth://`` URI; a base32 seed after a 2FA cue;
* a **grouped value**: three or more groups of letters and digits separated by single spaces
  (``ghp_2eCdUD 7WzUMx 8682X9``, ``vohw 4pma 5rie m765``) or hyphens
  (``a0C4Q-UbXZy-A7o4x-x2OhJ``). Groups may differ in length (people split by eye). Judged joined:
  after a cue (key, token, secret, seed, password, code, licence … in the 200 characters before it,
  also in the message before), a value with digits in a third of its groups and few word-like
  groups; with no cue at all, only a value that is random on its own (mixed case, digits in most
  groups, letters and digits interleaved, 20+ characters). Never digits alone (phone and card
  numbers, ids), never a hex run next to a hash or fingerprint cue (GPG fingerprints, digests,
  commit lists), never a UUID.

Same conventions as :mod:`redaction.detectors`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .detectors import Candidate, _masked
from .entropy import is_placeholder, shannon
from .struct_base import _HEX_ID_RE, _classes, _token_format, token_shape

__all__ = ["find_totp", "find_groups", "GROUP_PATTERNS", "GROUP_CUES"]

_OTPAUTH_RE = re.compile(r"otpauth://[^\s\"'<>`]{0,512}?[?&]secret=(?P<v>[A-Za-z0-9%=_-]{8,256})")
_2FA_CUE_RE = re.compile(r"2fa|mfa|totp|otp|two[- ]factor|2-step|authenticator|setup key|set-up key|seed|zwei-faktor"
                         r"|deux facteurs|doble factor|dois fatores|due fattori|tweestaps|dwuetapow"
                         r"|manual(?:ly)?|scan|qr")
_BASE32_RE = re.compile(r"(?<![A-Za-z0-9_/+=-])(?:[A-Z2-7]{16,128}|[a-z2-7]{16,128})(?![A-Za-z0-9_/+=-])")
# Cue words before a grouped value (English and the common European forms). Matched anywhere in
# a word: "apikey", "Schlüssel", "licence".
_GROUP_CUE_RE = re.compile(
    r"key|secret|seed|token|pass(?:word|phrase|code)?|pw|pin\b|code|licen[cs]e|serial|cred|auth|chunks?|groups?"
    r"|blocks?|otp|2fa|mfa|scan|schl[uü]ssel|cl[eé]|clave|chave|chiave|sleutel|geheim|secreto|segredo|segreto"
    r"|jeton|contrase|senha|passwort|wachtwoord")
# A hex run next to one of these is a fingerprint, digest or hash list, not a secret.
_HASH_CUE_RE = re.compile(r"fingerprint|fpr|gpg|pgp|sha|md5|checksum|hash|digest|commit|rev|hex ?dump|sig\b|cert"
                          r"|serial number|mac\b|ipv6|uuid|guid|request id|trace")
# Three or more groups of 3-12 alphanumerics (the first may carry a vendor prefix: ghp_, sk-),
# one separator throughout: single spaces or single hyphens.
_GROUPS_RE = re.compile(
    r"(?<![A-Za-z0-9_/+=.-])(?:[A-Za-z]{2,10}[_-])?[A-Za-z0-9]{2,12}"
    r"(?:(?: [A-Za-z0-9]{2,12}){2,15}|(?:-[A-Za-z0-9]{2,12}){2,15})(?![A-Za-z0-9_/+=-])")
_CUE_WINDOW = 200
_DIGIT_RE = re.compile(r"[0-9]")
#: literal cue words of find_groups (its gates): a no-cue value passes the gate by its digits
GROUP_CUES = ("0", "1", "2", "3", "4", "5", "6", "7", "8", "9")
GROUP_PATTERNS = (_OTPAUTH_RE.pattern, _2FA_CUE_RE.pattern, _BASE32_RE.pattern, _GROUP_CUE_RE.pattern,
                  _GROUPS_RE.pattern, _HASH_CUE_RE.pattern)
_B32 = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ234567")


def _line_start(text: str, p: int, lines_back: int = 1) -> int:
    s = p
    for _ in range(lines_back + 1):
        s = text.rfind("\n", 0, max(0, s - 1)) + 1 if s > 0 else 0
        if s == 0:
            break
    return max(s, p - 120)


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


# Speed (issue 34): a _GROUPS_RE match is made of letters, digits, "_", "-" and spaces only, so it
# lies inside one stretch of those; it has at least two separators, and a digit of it sits in a
# group of two or more letters and digits. Only stretches with both can give a match with a digit.
# Found on a byte map of ASCII text (letters "a", digits "1", "_ -" "s", the rest "."), with
# memchr-speed find/rfind instead of trying the lookbehind-led pattern at every place.
_STRETCH_MAP = bytes(ord("1") if chr(i).isdigit() else ord("a") if chr(i).isalpha() else ord("s") if chr(i) in "_ -"
                     else ord(".") for i in range(128)) + b"." * 128
_ALNUM_BYTES = (ord("a"), ord("1"))


def _digit_stretches(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each stretch that can hold a match with a digit: _GROUPS_RE scanned there
    (its lookbehind sees the character before, its lookahead the one after) finds the matches a
    scan of the whole text finds there. Non-ASCII text (byte offsets differ): the whole text."""
    if not text.isascii():
        yield 0, len(text)
        return
    mapped = text.encode("ascii").translate(_STRETCH_MAP)
    n = len(mapped)
    d = mapped.find(b"1")
    while d >= 0:
        if (d > 0 and mapped[d - 1] in _ALNUM_BYTES) or (d + 1 < n and mapped[d + 1] in _ALNUM_BYTES):
            end = mapped.find(b".", d)
            if end < 0:
                end = n
            start = mapped.rfind(b".", 0, d) + 1
            if mapped.count(b"s", start, end) >= 2:
                yield start, min(end + 1, n)
            d = mapped.find(b"1", end)
        else:
            d = mapped.find(b"1", d + 1)  # a digit alone ("step 2 of"): no group of two holds it


def find_groups(text: str, low: str) -> Iterator[Candidate]:
    """A value read out in groups (the detector's gate: a digit; every grouped value has one).
    Runs of groups without a digit (prose) are dropped before any judging."""
    if " " not in text and "-" not in text:
        return
    for s, e in _digit_stretches(text):
        for m in _GROUPS_RE.finditer(text, s, e):
            if _DIGIT_RE.search(text, m.start(), m.end()) is None:
                continue
            found = _grouped(text, low, m.start(), m.end())
            if found:
                yield found


def _switches(g: str) -> int:
    """Changes between letter and digit, and case changes after the first letter, inside a group."""
    def cls(c: str) -> int:
        return 2 if c.isdigit() else 1 if c.isupper() else 0
    body = g[1:] if g[:1].isupper() and g[1:2].islower() else g
    return sum(1 for a, b in zip(body, body[1:]) if cls(a) != cls(b))


def _wordy(g: str) -> bool:
    """A group that reads as a word: letters only with a vowel, lower case or capitalised (all
    capitals of up to 4 letters too: an acronym). ``Cdybb`` and ``zVIFJg`` are not words."""
    return g.isalpha() and (g.islower() or g.istitle() or (g.isupper() and len(g) <= 4)) \
        and not _VOWELS.isdisjoint(g) or g.lower() in ("is", "my", "by")


_VOWELS = frozenset("aeiouAEIOU")
_LINK_WORDS = frozenset("is was are were be to for of the a an in on at and or with ist est es era é è".split())


def _trimmed(text: str, s: int, e: int) -> tuple[int, int, list[str]]:
    """The run without the prose around it ("The setup key is vohw 4pma 5rie m765" is the last
    four groups): from the first to the last group with a digit, extended over neighbours that are
    not words, or are groups of the same length as those (``vohw``), never over a linking word."""
    sep = " " if " " in text[s:e] else "-"
    parts = text[s:e].split(sep)
    dig = [k for k, p in enumerate(parts) if _DIGIT_RE.search(p)]  # ASCII parts: a digit is 0-9
    if not dig:
        return s, s, []
    a, b = dig[0], dig[-1] + 1
    lengths = sorted(len(p) for p in parts[a:b])
    mode = lengths[len(lengths) // 2]

    def fits(p: str) -> bool:
        return p.lower() not in _LINK_WORDS and (not _wordy(p) or len(p) == mode)

    while a > 0 and fits(parts[a - 1]):
        a -= 1
    while b < len(parts) and fits(parts[b]):
        b += 1
    if any(p.lower() in _LINK_WORDS for p in parts[a:b]):
        return s, s, []  # "a1b2c3d and f1e2d3c": words between values, not one value in groups
    start = s + sum(len(p) + 1 for p in parts[:a])
    return start, start + len(sep.join(parts[a:b])), parts[a:b]


_VENDOR_PREFIX_RE = re.compile(r"[a-z]{2,6}[_-]")
_UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def _grouped(text: str, low: str, s: int, e: int) -> Candidate | None:
    s, e, parts = _trimmed(text, s, e)
    if len(parts) < 3:
        return None
    run = text[s:e]
    sep = " " if " " in run else "-"
    prefix = _VENDOR_PREFIX_RE.match(parts[0]) if sep == " " else None  # ghp_, sk-, glpat-
    # a vendor prefix on the first group is not part of its shape
    groups = [p[prefix.end():] if prefix is not None and i == 0 else p for i, p in enumerate(parts)]
    joined = "".join(parts)
    if len(joined) < 12 or _masked(joined) or len(parts) < 3:
        return None
    digits = [_DIGIT_RE.search(g) is not None for g in groups]
    if all(g.isdigit() for g in groups) or not any(c.isalpha() for c in joined):
        return None  # numbers: phone, card and account numbers, ids
    if sep == "-" and (_UUID_RE.fullmatch(run)
                       or len(parts) <= 3 and all(len(p) <= 6 for p in parts)):
        return None  # a UUID; "foo-bar-12"-like names
    n = len(groups)
    wordy = sum(_wordy(g) for g in groups)
    b32 = all(c in _B32 for c in joined) and \
        (all(p.islower() or p.isdigit() for p in parts) or all(p.isupper() or p.isdigit() for p in parts))
    if not b32 and (3 * sum(digits) < n or 3 * wordy > n - 1):
        return None  # what every branch below needs, tested before any cue is looked for
    lo = max(0, s - _CUE_WINDOW)
    cue = _GROUP_CUE_RE.search(low, lo, s) or prefix
    hexrun = all(_HEX_ID_RE.fullmatch(g) or g.isdigit() for g in groups)
    if hexrun and (cue is None or _HASH_CUE_RE.search(low, max(0, s - 120), s)
                   or (len(groups) >= 8 and all(len(g) == 4 for g in groups))):
        return None  # a fingerprint, digest or list of commits shown in groups
    # TOTP setup keys: base32 in groups of one case
    if b32 and sep == " " and len(parts) >= 4 and len({len(p) for p in parts[1:-1]}) <= 1 and any(digits) \
            and shannon(joined) >= 3.0 and (cue is not None or _2FA_CUE_RE.search(low, lo, s)):
        return ("totp-secret", s, e, 0)
    if cue is not None:
        ok = (3 * sum(digits) >= n and 3 * wordy <= n - 1 and shannon(joined) >= 3.0
              and (hexrun or _classes(joined) >= 2) and (len(joined) >= 14 or _token_format(joined)))
        if ok and wordy and not any(c.isupper() for c in joined[1:]) and sum(digits) < n - wordy:
            ok = False  # "key is 5 apples and 3 pears"-like prose
    else:
        ok = (n >= 4 and len(joined) >= 20 and not hexrun and 4 * wordy <= n and 2 * sum(digits) >= n
              and 2 * sum(_switches(g) >= 2 for g in groups) >= n
              and ((_classes(joined) >= 3 and token_shape(joined, 20) and shannon(joined) >= 3.5)
                   or _token_format(joined)))
    if not ok and cue is None:
        # a licence-key shape: 5+ groups of one length (5+), capitals and digits ("63L6Y 4BTTJ …")
        ok = (n >= 5 and len({len(g) for g in groups}) == 1 and len(groups[0]) >= 5 and joined.isupper()
              and 5 * sum(digits) >= 2 * n and sum(_switches(g) >= 2 for g in groups) >= 2
              and shannon(joined) >= 3.5)
    return ("grouped-secret", s, e, 0) if ok else None
