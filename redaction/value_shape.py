"""What a value stated after a cue looks like: ``shape(value)`` says whether it reads as a credential
(``"medium"``: credential-shaped on its own; ``"weak"``: a digit, symbol or inner capital and no id
shape) or not (None: a word, URL, e-mail, IP, host, path, UUID, version, date, hex or digest, setting,
flag, code, product name). Used by :mod:`redaction.stated` and :mod:`redaction.stated_cli`.
"""

from __future__ import annotations

import functools
import re

from .detectors import BLANK, _masked
from .entropy import is_code_reference, is_placeholder, shannon

_PW_SYMBOLS = frozenset("!@#$%^&*+=?~|")
_URLISH_RE = re.compile(r"[a-z][a-z0-9+.-]*://|www\.|mailto:", re.IGNORECASE)
_EMAIL_RE = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_IP_RE = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?(?:/\d{1,2})?")
_HOST_RE = re.compile(r"(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}(?::\d{1,5})?")
_UUID_RE = re.compile(r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}")
_VERSION_RE = re.compile(r"(?:[A-Za-z][A-Za-z-]*[-@/]?)?[vV]?\d+(?:\.\d+)+(?:[-+._][A-Za-z0-9.-]+)?")
_DATE_RE = re.compile(r"\d{2,4}[-/.]\d{1,2}[-/.]\d{1,4}(?:[T ]\S*)?|\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?[ap]?m?")
_HEX_RE = re.compile(r"(?:0x)?[0-9a-f]{7,}|(?:0x)?[0-9A-F]{7,}")
_DIGEST_RE = re.compile(r"(?i)(?:sha\d{1,3}|md5|blake2b?|sha|h1)[:=~-]")
_PARAMS_RE = re.compile(r"\w+=[^,=]*(?:,\w+=[^,=]*)+")  # m=65536,t=3,p=4
_FLAG_RE = re.compile(r"--?[A-Za-z]")  # --gcflags=-N: a command-line flag, not a value
_HEX_GROUPS_RE = re.compile(r"[0-9A-Fa-f]{1,16}(?:[:-][0-9A-Fa-f]{1,16}){2,}")
_B64_RE = re.compile(r"[A-Za-z0-9+/]{16,}={0,2}")
# snake/kebab/dotted lowercase identifiers with numbers: "staging-db-02", "utf8mb4_unicode_ci", "python3"
_LOWER_IDENT_RE = re.compile(r"[a-z0-9]+(?:[-_.][a-z0-9]+)*")
_UPPER_IDENT_RE = re.compile(r"[A-Z0-9]+(?:[-_.][A-Z0-9]+)*")
# KEY=value with a word key: a setting, not a password ("sslmode=require", "Configuration=Release")
_KV_RE = re.compile(r"(?:[a-z_][a-z_.-]{2,40}|[A-Z_][A-Z_.-]{2,40}|(?:[A-Z][a-z]{2,}){1,4})[=:](?!=)")
_PATH_RE = re.compile(r"(?:[A-Za-z]:)?[\\/~]|\.{1,2}/|.*/[A-Za-z0-9_.-]+/|.*\.(?:pem|key|json|txt|p12|pfx|crt|env"
                      r"|ya?ml|toml|ini|conf|cfg|py|js|ts|sh|go|rs|md|log|sql|zip|gz|tar|jks)$")
_CODE_RE = re.compile(r"[(){}\[\]<>]|->|::|\$\{|\$\(|^\$(?:[A-Z0-9_]+|[a-z0-9_]+|[a-z]+(?:[A-Z][a-z0-9]+)+)$|(?:^|[\\/;=:])%[A-Za-z_]+%(?:$|[\\/;.])|^%[sdqv]$")
_PASSPHRASE_RE = re.compile(r"[A-Za-z]{3,12}(?P<sep>[-_.])(?:[A-Za-z]{3,12}|\d{1,6})(?:(?P=sep)(?:[A-Za-z]{3,12}|\d{1,6})){1,6}")
_LEET_RE = re.compile(r"[A-Za-z][013457@$][a-z]")  # Z3phyr, F0ssil, Gr@nit (not Argon2id, utf8mb4)
# "Ember2020-", "Cinder1974_", "Quartz1976*": a name, a number and a symbol after it (identifiers end
# in a letter or digit)
_CAPWORD_NUM_SYM_RE = re.compile(r"[A-Za-z][a-z]{2,}[0-9]{2,4}[^A-Za-z0-9.\s]{1,2}")
_HOSTISH_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*(?:\.[A-Za-z0-9-]+)+|localhost|[a-z][a-z0-9-]*")


_ASCII_DIGIT_RE = re.compile(r"[0-9]")


def _classes(v: str) -> tuple[bool, bool, bool, bool]:
    """(has upper case, lower case, digit, anything else). ASCII text (nearly every value) in a few
    C-level passes: there case mapping changes exactly the letters of the other case, digits are
    0-9 and isalnum() means letters and digits only."""
    if v.isascii():
        return (v.lower() != v, v.upper() != v, _ASCII_DIGIT_RE.search(v) is not None,
                bool(v) and not v.isalnum())
    up = lo = dg = sy = False
    for c in v:
        if c.isupper():
            up = True
        elif c.islower():
            lo = True
        elif c.isdigit():
            dg = True
        else:
            sy = True
    return up, lo, dg, sy


def _id_shaped(v: str) -> bool:
    """A value that names or points at something: URL, e-mail, IP, host, path, UUID, version,
    date, hash, digest, code, a setting. Never a credential stated in prose."""
    return bool(_URLISH_RE.match(v) or _EMAIL_RE.fullmatch(v) or _IP_RE.fullmatch(v)
                or (_HOST_RE.fullmatch(v) and not any(c.isupper() for c in v))
                or _UUID_RE.fullmatch(v) or _VERSION_RE.fullmatch(v) or _DATE_RE.fullmatch(v)
                or _HEX_RE.fullmatch(v) or _DIGEST_RE.search(v) or _PATH_RE.match(v) or _CODE_RE.search(v)
                or _HEX_GROUPS_RE.fullmatch(v) or ("/" in v and _path_like(v))
                or _setting(v) or _PARAMS_RE.fullmatch(v) or _FLAG_RE.match(v)
                or is_code_reference(v))


# what a setting's value is made of ("Release", "require", "/var/lib", "utf-8"): "Wva=cyb=6G~.d-uXH"
# and "EtyyHec=Iv^!4n2" are passwords with "=" in them, not settings
_SETTING_VALUE_RE = re.compile(r"[\w.,:/@-]*")


def _setting(v: str) -> bool:
    m = _KV_RE.match(v)
    return m is not None and (_SETTING_VALUE_RE.fullmatch(v, m.end()) is not None or v[m.end():m.end() + 1] in "\"'`")


_SEGMENT_RE = re.compile(r"[a-z0-9._@~:+-]*|[A-Z][a-z0-9._-]*|[A-Z0-9._-]+")


def _path_like(v: str) -> bool:
    """``aquasec/trivy``, ``org/repo@v2``, ``src/Main.java``: segments that are names, not random."""
    parts = v.split("/")
    return all(_SEGMENT_RE.fullmatch(p) for p in parts) and not _B64_RE.fullmatch(v) or \
        sum(1 for p in parts if len(p) >= 2 and p.isalpha()) >= 2


# Compiled once (speed: an inline re.findall/fullmatch looks its pattern up in re's cache per call).
_LETTER_RUN_RE = re.compile(r"[A-Za-z]{3,}")
_CAMEL_RE = re.compile(r"[a-z]*(?:[A-Z][a-z]{2,})+|[A-Z]{2,}[a-z]{3,}(?:[A-Z][a-z]{2,})*")
_ACRONYM_WORDS_RE = re.compile(r"(?:[A-Z]{2,}(?![a-z])|[A-Z][a-z]{2,}|[a-z]{2,})+|[A-Z]{2,4}[a-z]")
_DIGIT_RUN_RE = re.compile(r"[0-9]+")


def _random_case(v: str) -> bool:
    """Letters whose case changes inside a word the way identifiers never do: ``oxdWelD``,
    ``sFOPrNc``, ``LHdai`` (not ``Sparrow``, ``SHA``, ``camelCase``, ``HTTPServer``)."""
    for run in _LETTER_RUN_RE.findall(v):
        if run.islower() or run.isupper() or (run[0].isupper() and run[1:].islower()):
            continue
        # camelCase / PascalCase words: every capital starts a lowercase word of 2+
        if _CAMEL_RE.fullmatch(run) or _ACRONYM_WORDS_RE.fullmatch(run):
            continue  # words and acronyms: "withRSA", "HTTPServer", "getApiKey"
        return True
    return False


def _switch_ratio(v: str) -> float:
    def cls(c: str) -> int:
        return 0 if c.isupper() else 1 if c.islower() else 2 if c.isdigit() else 3
    if len(v) < 2:
        return 0.0
    return sum(1 for a, b in zip(v, v[1:]) if cls(a) != cls(b)) / (len(v) - 1)


def shape(v: str) -> str | None:
    """``"medium"``: credential-shaped on its own; ``"weak"``: a password only if stated
    as one; ``None``: not a credential (a word, an id, a name, code)."""
    n = len(v)
    if n < 4 or n > 128 or _masked(v) or BLANK in v or "[REDACTED:" in v:
        return None
    # The two class tests below come before the placeholder and id checks (about fifteen regexes)
    # on purpose: they answer None for most tokens of a sentence, which is what those checks would
    # answer too (every other outcome needs both to pass), at the cost of one pass over the value.
    up, lo, dg, sy = _classes(v)
    letters = up or lo
    if not letters and not (dg and n >= 6 and not sy):
        return None
    inner_sym = sy and any(c in _PW_SYMBOLS for c in v[:-1].rstrip("!?"))  # symbols are "anything else"
    if letters and not (dg or inner_sym or (up and lo and any(c.isupper() for c in v[1:]))):
        return None  # a plain word or identifier ("Thanks!", "required")
    if not v.isascii() or (is_placeholder(v) and not (v[0] == "$" and all(_classes(v[1:])[:3]))) or _id_shaped(v):
        return None
    if not letters:
        return "weak"  # "password: 84736251"
    pw_sym = any(c in _PW_SYMBOLS for c in v)
    if pw_sym and "@" in v[1:-1] and not any(c in _PW_SYMBOLS for c in v.replace("@", "")) \
            and _HOSTISH_RE.fullmatch(v.rpartition("@")[2]):
        pw_sym = False  # user@host, not a password symbol
    if n >= 8 and dg:
        if pw_sym and not v.startswith(("@", "#")):
            return "medium"
        if pw_sym:
            return "medium" if sum(c in _PW_SYMBOLS for c in v) >= 2 or _random_case(v) else "weak"
        if _CAPWORD_NUM_SYM_RE.fullmatch(v):
            return "medium"
        if up and lo and _switch_ratio(v) >= 0.5 and len(_DIGIT_RUN_RE.findall(v)) >= 2:
            return "medium"  # "eEgz2Ip31": case and digits alternate
        if _random_case(v) and shannon(v) >= 2.8:
            return "medium"
        if _LEET_RE.search(v) and up and lo:
            return "medium"
        m = _PASSPHRASE_RE.fullmatch(v)
        if m is not None:
            return "medium" if up and lo else "weak"
        if not (up and lo) and n >= 10 and v.isalnum() and _switch_ratio(v) >= 0.35 and shannon(v) >= 3.0 \
                and sum(c.isdigit() for c in v) >= 2 and sum(c.isalpha() for c in v) >= 3:
            return "medium"  # one case, letters and digits switching often: "j6pyhuykzv", "X7K9M2P4Q8"
    elif n >= 8 and pw_sym and up and lo and _random_case(v):
        return "medium"
    if _LOWER_IDENT_RE.fullmatch(v) or _UPPER_IDENT_RE.fullmatch(v):
        return "weak" if dg and _PASSPHRASE_RE.fullmatch(v) else None
    return "weak"


# shape() is pure and one redact() asks it about the same values again and again: the re-scans
# after masking (a text with a finding is scanned up to four times) and the other detectors
# judging the same token (CLI flags, user:password, the next message of the turn). A small cache
# serves those repeats (3 in 4 calls on chat turns stating credentials); it is kept small on
# purpose: it holds recent values only (in process memory, like the texts being redacted), and
# a benchmark pass over a few hundred texts never finds the previous pass's values still in it.
shape = functools.lru_cache(maxsize=32)(shape)
