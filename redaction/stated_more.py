"""More credentials stated in chat (issue 34, round 2), each behind a literal gate:

* a PIN given to a command-line flag (``--pin 123456``, ``--new-pin=6420``, ``--puk``);
* the password of a Wi-Fi QR payload (``WIFI:T:WPA;S:Lab;P:secret;;``);
* a Stripe-style webhook signing secret with a base64 body (``whsec_…/…+…``);
* a value stated after a secret or token word in plain prose ("the webhook shared secret is
  <64 hex>", "X-Webhook-Token must be <hex>", "SECRET_KEY is …", "auth token from the
  dashboard: `…`"): only a value credential-shaped on its own, a long hex run, or a generated
  passphrase — never a word, an id, a path, a digest next to a hash word, a cache key;
* a token read out in groups of four ("e9c0 06c6 dd9f …", "GQPK CEHW YETE N7S8 …"): six or
  more groups of exactly four letters and digits in one case, random as a whole, not digits
  alone, not a 40-hex fingerprint, not next to a hash or fingerprint word.

Same conventions as :mod:`redaction.detectors`: pure functions over (text, lowercased text).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .cues import word_passphrase
from .detectors import Candidate, _masked
from .entropy import is_placeholder, shannon
from .value_shape import _id_shaped, shape

__all__ = ["find_pin_flags", "find_wifi_qr", "find_wifi_keys", "find_webhook_secrets", "find_secret_is_values",
           "find_hex_call_keys", "find_split_parts", "find_quad_groups", "detectors"]

# --------------------------------------------------------------------------
# PIN flags, Wi-Fi QR payloads, webhook signing secrets
# --------------------------------------------------------------------------

_PIN_FLAG_RE = re.compile(r"(?<![\w-])--?(?:new-|old-|current-|admin-|user-)?(?:pin|puk|passcode)"
                          r"(?:[ \t]+|=)[\"']?(?P<v>[0-9]{4,12})(?![\w.])", re.IGNORECASE)
# WIFI:T:WPA;S:ssid;P:password;; (the QR code format; ``\`` escapes ; , : and \ in values)
_WIFI_QR_RE = re.compile(r"WIFI:(?:[^\n]{0,200}?;)?P:(?P<v>(?:\\.|[^;\\\n]){1,128});", re.IGNORECASE)
_WHSEC_RE = re.compile(r"(?<![A-Za-z0-9_])whsec_(?P<v>[A-Za-z0-9+/]{24,128}={0,2})(?![A-Za-z0-9+/=])")


def find_pin_flags(text: str, low: str) -> Iterator[Candidate]:
    for m in _PIN_FLAG_RE.finditer(text):
        v = m.group("v")
        if len(set(v)) >= 2 or len(v) >= 6:
            yield ("cli-password", *m.span("v"), 0)


def find_wifi_qr(text: str, low: str) -> Iterator[Candidate]:
    for m in _WIFI_QR_RE.finditer(text):
        v = m.group("v")
        if not _masked(v) and not is_placeholder(v):
            yield ("wifi-password", *m.span("v"), 0)


# a Wi-Fi line naming its key: "WiFi: network Casa-Ruiz, key X"; wpa_passphrase SSID X
_WIFI_KEY_RE = re.compile(
    r"(?im)\b(?:wi-?fi|wlan|ssid|wpa[23]?)\b[^\n]{0,80}?\b(?:key|pass|pwd|pw|psk|code)\b"
    r"(?:[ \t]+(?:for|of|on|at|in|to|the|our|my|your|this|that|office|guest|home|lab|network|wifi|wi-fi|is|was|now)){0,6}"
    r"[ \t]*[:=]?[ \t]*[\"'`]?(?P<v>[^\s\"'`,;]{6,64})|\bwpa_passphrase[ \t]+[^\s]{1,32}[ \t]+[\"']?(?P<w>[^\s\"']{8,63})"
    r"|<keyMaterial>(?P<x>[^<\s]{8,63})</keyMaterial>|^[ \t]*option[ \t]+key[ \t]+[\"']?(?P<o>[^\s\"']{8,63})")
# a Wi-Fi key of capitalised words ("YonderWillowHollowBasalt"): generated, said after a Wi-Fi key cue
_CAMEL_WORDS_RE = re.compile(r"(?:[A-Z][a-z]{2,9}){4,7}")


def find_wifi_keys(text: str, low: str) -> Iterator[Candidate]:
    if " " not in text and "\t" not in text:
        return  # its values follow words: a text with no blank is one token (a blob, a key file)
    for m in _WIFI_KEY_RE.finditer(text):
        g = next(k for k in ("v", "w", "x", "o") if m.group(k))
        v = _value_end(m.group(g))
        if shape(v) is not None or word_passphrase(v) or _CAMEL_WORDS_RE.fullmatch(v):
            yield ("wifi-password", m.start(g), m.start(g) + len(v), 0)


def find_webhook_secrets(text: str, low: str) -> Iterator[Candidate]:
    for m in _WHSEC_RE.finditer(text):
        yield ("webhook-secret", m.start(), m.end(), 0)


# --------------------------------------------------------------------------
# A value stated after a secret / token word
# --------------------------------------------------------------------------

# the cue: a secret or token word, or a key word that names a secret ("secret key", "api key",
# "signing key", "SECRET_KEY"); a header name ending in one ("X-Webhook-Token")
_SECRET_CUE_RE = re.compile(
    r"(?<![A-Za-z0-9_$./\\-])(?:[A-Za-z][A-Za-z0-9]*-)*(?:(?:secret|signing|api|access|private|master|encryption"
    r"|hmac|app|client|auth|bearer)[ _-]?(?:key|token|secret)s?|secrets?|tokens?)(?![A-Za-z0-9_$/\\-])",
    re.IGNORECASE)
# how the value is joined to the cue: a verb, or a colon after a few words ("token from the dashboard:")
_LINK_RE = re.compile(
    r"(?:[ \t]+(?:is|was|=|:|->|→|must[ \t]+be|should[ \t]+be|will[ \t]+be|is[ \t]+now|now[ \t]+is|set[ \t]+to|to|as"
    r"|reads|value[ \t]+is)|[ \t]*[:=](?!=)|,?(?:[ \t]+[A-Za-z][A-Za-z'’-]{0,15}){1,5}(?::|[ \t]+(?:→|->|is|was)))[ \t]+",
    re.IGNORECASE)
_VALUE_RE = re.compile(r"[\"'`]?(?P<v>[^\s\"'`]{12,256})")
# a hex run next to one of these is a digest or an id, not a secret
_HASH_WORDS_RE = re.compile(r"\b(?:sha(?:1|256|512)?|md5|hash(?:es)?|digest|checksum|commit|fingerprint|etag|cache"
                            r"|revision|build id|request id|trace|span|uuid|guid|public)\b", re.IGNORECASE)
_HEX_RE = re.compile(r"[0-9a-f]{32,128}|[0-9A-F]{32,128}")
_TRAIL = ".,;:!?)]}>"
_UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def _value_end(v: str) -> str:
    while v and v[-1] in _TRAIL and (v[-1] not in ")]}>" or v.count(v[-1]) > v.count("([{<"[")]}>".index(v[-1])])):
        v = v[:-1]
    return v


_CUE_CORES = ("key", "token", "secret")
_CUE_CHAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")


def _secret_cues(text: str, low: str) -> Iterator[re.Match[str]]:
    """``_SECRET_CUE_RE.finditer(text)``, scanning only around its key/token/secret words (speed,
    issue 34: the pattern's leading word chain makes sre try it at every place of the text).

    Every match ends in such a word and starts at most one of " _-" and a run of letters, digits
    and "-" before it; the regions from there to two characters past each word, merged where they
    overlap, hold every match, and no attempt between them can match. ASCII text only: under
    IGNORECASE "K" and "ſ" match k and s, and ``low`` lowers ASCII only."""
    if not text.isascii():
        yield from _SECRET_CUE_RE.finditer(text)
        return
    regions = []
    for w in _CUE_CORES:
        i = low.find(w)
        while i >= 0:
            b = i - 1 if i > 0 and text[i - 1] in " _-" else i
            while b > 0 and text[b - 1] in _CUE_CHAIN:
                b -= 1
            regions.append((b, i + len(w) + 2))  # the end: a plural "s", then the lookahead's character
            i = low.find(w, i + 1)
    regions.sort()
    k = 0
    while k < len(regions):
        b, e = regions[k]
        k += 1
        while k < len(regions) and regions[k][0] < e:
            e = max(e, regions[k][1])
            k += 1
        yield from _SECRET_CUE_RE.finditer(text, b, min(e, len(text)))


def find_secret_is_values(text: str, low: str) -> Iterator[Candidate]:
    if " " not in text and "\t" not in text:
        return  # its values follow words: a text with no blank is one token (a blob, a key file)
    for c in _secret_cues(text, low):
        link = _LINK_RE.match(text, c.end())
        if link is None:
            continue
        m = _VALUE_RE.match(text, link.end())
        if m is None:
            continue
        s = m.start("v")
        v = _value_end(m.group("v"))
        if len(v) < 12 or _masked(v) or "[REDACTED" in v or is_placeholder(v) or _UUID_RE.fullmatch(v):
            continue
        ls = text.rfind("\n", max(0, c.start() - 300), c.start()) + 1 or max(0, c.start() - 300)
        le = text.find("\n", s, s + 600)
        line = text[ls:le if le >= 0 else min(len(text), s + 600)]
        if _HEX_RE.fullmatch(v):
            ok = not _HASH_WORDS_RE.search(line)
        else:
            sh = shape(v)
            ok = (sh == "medium" and len(v) >= 16 and not _named(v)) or word_passphrase(v) \
                or _punct_secret(v)
            ok = ok and "cache" not in line.lower()
        if ok:
            yield ("stated-credential", s, s + len(v), 0)


_NAME_PARTS_RE = re.compile(r"[-_.]")
_NAME_PART_RE = re.compile(r"[A-Za-z][a-z]{1,11}|[A-Z]{2,6}[0-9]{0,4}|[vV]?[0-9]{1,4}|[a-z]{2,12}")


def _named(v: str) -> bool:
    """``JWT-RS256-with-kid-v2``: parts that are words, acronyms and versions, a name not a secret."""
    parts = [p for p in _NAME_PARTS_RE.split(v) if p]
    return len(parts) >= 3 and all(_NAME_PART_RE.fullmatch(p)
                                   for p in parts)


def _punct_secret(v: str) -> bool:
    """A generated secret full of punctuation (a Django SECRET_KEY): 30+ characters, letters, digits
    and five or more symbols, high entropy."""
    sym = sum(not c.isalnum() for c in v)
    return len(v) >= 30 and sym >= 5 and any(c.isdigit() for c in v) and any(c.isalpha() for c in v) \
        and shannon(v) >= 4.0 and "/" not in v[:8] and "://" not in v


# --------------------------------------------------------------------------
# A key given as hex to a decoding call
# --------------------------------------------------------------------------

# bytes.fromhex("…"), unhexlify('…'), hex.DecodeString("…"), hex2bin('…'), ['…'].pack('H*')
_HEX_CALL_RE = re.compile(
    r"(?:fromhex|unhexlify|decodestring|decodehex|parsehex|hex2bin|from_hex)[ \t]*\([ \t]*[bB]?[\"'](?P<v>[0-9a-fA-F]{32,128})[\"']"
    r"|\[[ \t]*[\"'](?P<w>[0-9a-fA-F]{32,128})[\"'][ \t]*\]\.pack\([ \t]*[\"']H\*", re.IGNORECASE)
_KEY_LINE_RE = re.compile(r"key|secret|token|salt|hmac|aes|cipher|sign|passw|pepper|jwt|nacl", re.IGNORECASE)
_HEX_CALL_GATES = ("fromhex", "unhexlify", "decodestring", "decodehex", "parsehex", "hex2bin", "from_hex", "pack(")


def find_hex_call_keys(text: str, low: str) -> Iterator[Candidate]:
    for m in _HEX_CALL_RE.finditer(text):
        g = "v" if m.group("v") else "w"
        ls = text.rfind("\n", max(0, m.start() - 300), m.start()) + 1 or max(0, m.start() - 300)
        if _KEY_LINE_RE.search(text, ls, m.start()) and not _HASH_WORDS_RE.search(text, ls, m.start()):
            yield ("bytes-key", *m.span(g), 0)


# --------------------------------------------------------------------------
# A secret given in parts: wrapped onto the next line, or in halves
# --------------------------------------------------------------------------

_TOKENISH = r"[A-Za-z0-9._~+/=-]"
# a credential line ending in a value, the next line only a token-like run (a terminal wrapped it)
_WRAPPED_RE = re.compile(
    r"(?i)(?:bearer|token|key|secret|password|passwd|pwd|authorization)\b[^\n]{0,40}?[:= \t][ \t]*[\"'`]?"
    r"(?P<a>" + _TOKENISH + r"{6,512})[ \t]*\r?\n[ \t>]*[\"'`]?(?P<b>" + _TOKENISH + r"{12,512})[\"'`]?[ \t]*(?=\r?\n|$)")
# "first half: X", "part 2 of the key: Y", "the rest is Y", "starts with X and ends with Y"
_PART_RE = re.compile(
    r"(?i)\b(?:(?:first|second|other|last|remaining|final)[ \t]+(?:half|part|piece|bit|chunk)|part[ \t]*[1-4]"
    r"|(?:the[ \t]+)?rest|starts[ \t]+with|begins[ \t]+with|ends[ \t]+with)\b[^\n:]{0,24}?(?:[ \t]+(?:is|was)|:)?[ \t]+"
    r"[\"'`]?(?P<v>" + _TOKENISH + r"{6,256})")
_CRED_WORD_RE = re.compile(r"(?i)token|key|secret|password|passwd|passphrase|pwd|credential|bearer")
# Prefilters (issue 34: speed), each a necessary condition of a scan above:
# - _WRAPPED_RE's tail, the wrapped line alone: newline-led, so the search runs at memchr speed;
# - the words _PART_RE's match holds, each followed by its \b (or "part" by a digit), searched on the
#   lowercased text, which is the exact lower case only of ASCII text (IGNORECASE also folds "K" and
#   "ſ" into k and s): other text is scanned in full.
_WRAPPED_TAIL_RE = re.compile(r"(?i)\n[ \t>]*[\"'`]?" + _TOKENISH + r"{12,512}[\"'`]?[ \t]*(?=\r?\n|$)")
_PART_WORDS_RE = re.compile(r"(?:half|part|piece|bit|chunk|rest|starts|begins|ends)\b|part[ \t]*[1-4]")
_SPLIT_GATES = ("half", "part", "rest", "starts with", "begins with", "ends with", "bearer", "token", "key", "secret",
                "passw", "pwd", "authorization")


def _randomish(v: str, n: int = 6) -> bool:
    return len(v) >= n and any(c.isdigit() for c in v) and any(c.isalpha() for c in v) and shannon(v) >= 2.5 \
        and "://" not in v and not v.startswith(("/", "./", "~")) and not _masked(v)


def find_split_parts(text: str, low: str) -> Iterator[Candidate]:
    if " " not in text and "\t" not in text:
        return  # its values follow words: a text with no blank is one token (a blob, a key file)
    if "\n" in text and _WRAPPED_TAIL_RE.search(text) is not None:
        for m in _WRAPPED_RE.finditer(text):
            a, b = m.group("a"), m.group("b")
            if _randomish(b, 12) and shannon(b) >= 3.3 and (_randomish(a) or "[REDACTED" in text[m.start():m.start("a")]):
                yield ("split-secret", *m.span("a"), 0)
                yield ("split-secret", *m.span("b"), 0)
    if text.isascii() and _PART_WORDS_RE.search(low) is None:
        return
    for m in _PART_RE.finditer(text):
        v = _value_end(m.group("v"))
        if not _randomish(v, 8) or shannon(v) < 3.0 or is_placeholder(v) or _id_shaped(v):
            continue
        if _CRED_WORD_RE.search(text, max(0, m.start() - 300), m.start()) is None:
            continue
        yield ("split-secret", m.start("v"), m.start("v") + len(v), 0)


# --------------------------------------------------------------------------
# A token read out in groups of four
# --------------------------------------------------------------------------

_QUAD_RE = re.compile(r"(?<![A-Za-z0-9_/+=.:-])(?:[a-z0-9]{4,6}(?: [a-z0-9]{4,6}){5,15}|[A-Z0-9]{4,6}(?: [A-Z0-9]{4,6}){5,15})"
                      r"(?![A-Za-z0-9_/+=-])")
_QUAD_HASH_RE = re.compile(r"\b(?:fingerprint|fpr|gpg|pgp|sha(?:1|256|512)?|md5|checksum|hash|digest|commit|iban|account"
                           r"|card|serial|phone number|tel|hex ?dump|mac|ipv6|uuid|guid|bic|swift|isbn|barcode)\b",
                           re.IGNORECASE)
_QUAD_GATES = tuple(str(d) for d in range(10))
# Five groups after a space, part of every _QUAD_RE match, written out so that the pattern starts
# with a literal space: sre skips to each space at memchr speed (speed, issue 34; the lookbehind-led
# _QUAD_RE is tried at every place of the text).
# Keep it in step with _QUAD_RE's group width (4 to 6).
_QUAD_PRE_RE = re.compile("(?: [A-Za-z0-9]{4,6}){5}")


def find_quad_groups(text: str, low: str) -> Iterator[Candidate]:
    if " " not in text and "\t" not in text:
        return  # its values follow words: a text with no blank is one token (a blob, a key file)
    if _QUAD_PRE_RE.search(text) is None:
        return
    for m in _QUAD_RE.finditer(text):
        groups = m.group().split(" ")
        if len({len(g) for g in groups}) != 1:
            continue  # groups read out from a screen are of one width (4, 5 or 6)
        bare = "".join(groups)
        digit_only = sum(g.isdigit() for g in groups)
        with_digit = sum(any(c.isdigit() for c in g) for g in groups)
        with_alpha = sum(any(c.isalpha() for c in g) for g in groups)
        if 2 * digit_only > len(groups) or with_alpha < len(groups) // 2 or with_digit == 0:
            continue  # numbers (accounts, cards, phone numbers) or words
        if len(bare) == 40 and len(groups[0]) == 4 and re.fullmatch(r"[0-9a-fA-F]+", bare):
            continue  # a GPG fingerprint
        if len(set(groups)) < len(groups) - 1 or shannon(bare) < 3.2:
            continue
        ls = text.rfind("\n", max(0, m.start() - 160), m.start()) + 1
        if _QUAD_HASH_RE.search(text, max(ls, m.start() - 160), m.start()):
            continue
        for g in re.finditer(r"\S+", m.group()):
            yield ("grouped-secret", m.start() + g.start(), m.start() + g.end(), 0)


def detectors(Detector):  # noqa: N803 - the class from rules.py (which imports this module)
    """The detector entries of this module, for ``rules.DETECTORS``."""
    return (
        Detector("pin-flag", find_pin_flags, gates=("-pin", "-puk", "-passcode"), patterns=(_PIN_FLAG_RE.pattern,)),
        Detector("wifi-qr", find_wifi_qr, gates=("wifi:",), patterns=(_WIFI_QR_RE.pattern,)),
        Detector("wifi-key", find_wifi_keys, gates=("wifi", "wi-fi", "wlan", "ssid", "wpa", "<keymaterial>", "option"),
                 patterns=(_WIFI_KEY_RE.pattern,)),
        Detector("webhook-secret", find_webhook_secrets, gates=("whsec_",), patterns=(_WHSEC_RE.pattern,)),
        Detector("secret-is-value", find_secret_is_values, gates=("secret", "token", "key"),
                 patterns=(_SECRET_CUE_RE.pattern, _LINK_RE.pattern, _VALUE_RE.pattern, _HASH_WORDS_RE.pattern)),
        Detector("hex-call-key", find_hex_call_keys, gates=_HEX_CALL_GATES, patterns=(_HEX_CALL_RE.pattern,)),
        Detector("split-parts", find_split_parts, gates=_SPLIT_GATES,
                 patterns=(_WRAPPED_RE.pattern, _PART_RE.pattern, _CRED_WORD_RE.pattern)),
        Detector("quad-groups", find_quad_groups, gates=_QUAD_GATES,
                 patterns=(_QUAD_RE.pattern, _QUAD_HASH_RE.pattern)),
    )
