"""Value heuristics: entropy, placeholders, and "does this look like a secret".

Format rules alone would catch ordinary words (``password: required``,
``api_key=api_key``), so contextual rules ask these functions whether the
captured value is plausibly a credential. All functions are pure and cheap.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from .cues import word_passphrase

__all__ = [
    "shannon",
    "is_placeholder",
    "is_token_placeholder",
    "looks_like_token",
    "looks_like_password",
    "is_code_reference",
]


def shannon(value: str) -> float:
    """Shannon entropy in bits per character (0.0 for the empty string)."""
    n = len(value)
    if n == 0:
        return 0.0
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


# Exact values (case-insensitive) that documentation and config templates use
# in place of a real secret.
_PLACEHOLDER_WORDS = frozenset(
    """
    password passwd pass pwd secret secrets token key apikey api_key api-key
    changeme change_me change-me changeit example examples sample test testing
    none null nil true false undefined todo tbd fixme dummy fake placeholder
    redacted hidden masked default empty string str value your_token
    mypassword mysecret mytoken secret123 password123 xxx
    """.split()
)

# Substrings that mark a template value rather than a literal secret.
_PLACEHOLDER_MARKS = ("xxxx", "****", "...", "\u2026", "<", ">", "${", "{{", "}}", "[redacted:")
_PLACEHOLDER_MARKS_NOT_X = tuple(m for m in _PLACEHOLDER_MARKS if m != "xxxx")
# Words that mark one, but only in word-like values: a random token can
# contain "todo" or "your" by chance (…hecTODOq…), and must still be masked.
_PLACEHOLDER_WORDS_IN = ("your", "example", "placeholder", "redacted", "changeme", "change_me", "change-me",
                         "replace", "insert", "dummy", "sample", "todo", "fixme", "abcdefghij")

# A whole-value reference to something else: $VAR, %VAR%, {var}, @VAR@,
# $(cmd), `cmd`, or a printf verb.
_REFERENCE_RE = re.compile(
    r"""\$[A-Za-z_][A-Za-z0-9_]*\}?|\$\{.*|\$\(.*|%[A-Za-z_][A-Za-z0-9_]*%|
        \{[A-Za-z_][A-Za-z0-9_.()\[\]'" ]*\}|@[A-Za-z_][A-Za-z0-9_]*@|`.*|
        %[+\-# 0]?[bcdeEfFgGoOpqstTUvxX]|\{\d{0,2}\}""",
    re.VERBOSE,
)

_SAME_CHAR_RE = re.compile(r"(.)\1*", re.DOTALL)


def is_placeholder(value: str) -> bool:
    """True if a contextual value is a template, reference or stand-in."""
    v = value.strip()
    if len(v) < 1:
        return True
    low = v.lower()
    if low in _PLACEHOLDER_WORDS or _SAME_CHAR_RE.fullmatch(v):
        return True
    # "xxxx" marks a template ("sk-xxxx…") but occurs by chance in a random token (…89ABXXXx…)
    looks_random = _looks_random(v)
    if (_MARKS_NOT_X_RE if looks_random else _MARKS_RE).search(low):
        return True
    if not looks_random and _WORDS_IN_RE.search(low):
        return True
    return _REFERENCE_RE.fullmatch(v) is not None


# The substring tests of is_placeholder as one search each: it runs on every candidate value
# of the context rules, and a Python loop over two dozen words cost more than the rest of it.
_MARKS_RE = re.compile("|".join(map(re.escape, _PLACEHOLDER_MARKS)))
_MARKS_NOT_X_RE = re.compile("|".join(map(re.escape, _PLACEHOLDER_MARKS_NOT_X)))
_WORDS_IN_RE = re.compile("|".join(map(re.escape, _PLACEHOLDER_WORDS_IN)))


def _looks_random(v: str) -> bool:
    """Mixed case with several digits: machine-generated, not a phrase."""
    return (sum(c.isdigit() for c in v) >= 2 and any(c.isupper() for c in v)
            and any(c.islower() for c in v))


# Token formats are structurally strict, so only obvious fillers count as
# placeholders there (``ghp_xxxx…``, ``sk-...``, ``AKIA…EXAMPLE``); a word
# check like ``is_placeholder`` would drop real tokens containing "test".
_TOKEN_FILLER_RE = re.compile(r"(?i)x{5,}|\*{3,}|#{4,}|\.{3}|\u2026|<|>")


def is_token_placeholder(value: str) -> bool:
    return _TOKEN_FILLER_RE.search(value) is not None


_CAMEL_RE = re.compile(r"[a-z]+(?:[A-Z][a-z0-9]+)+|(?:[A-Z][a-z0-9]+){2,}")
_WORDS_RE = re.compile(r"[a-z]+(?:[_\-. ][a-z]+)*|[A-Z]+(?:[_\-.][A-Z0-9]+)*")
_PATHLIKE_RE = re.compile(
    r"(?:[A-Za-z]:)?[\\/~.]|.*\.(?:pem|key|json|txt|p12|pfx|crt|cer|env|ya?ml|toml|ini|conf|cfg)$", re.IGNORECASE)
_EMAIL_RE = re.compile(r"[^@\s]+@[^@\s]+\.[A-Za-z]{2,}")


def looks_like_token(value: str, min_len: int = 8, min_entropy: float | None = None,
                     need_digit: bool = False) -> bool:
    """True if ``value`` has the shape of a machine-generated credential.

    Used where a *name* says "secret" but the value could still be a word,
    an identifier, a path or a reference.
    """
    n = len(value)
    if n < min_len or n > 4096 or is_placeholder(value):
        return False
    if any(c.isspace() for c in value):
        return False  # prose, prompts, command substitutions: not one token
    if "://" in value or _EMAIL_RE.fullmatch(value):
        return False
    if _PATHLIKE_RE.match(value) and not _looks_base64(value):
        return False
    has_digit = any(c.isdigit() for c in value)
    has_alpha = any(c.isalpha() for c in value)
    if not has_alpha and not (n >= 16 and has_digit and _hexish(value)):
        return False  # numbers, ports, counts; all-digit hex-like blobs of 16+ are allowed
    if need_digit and not has_digit:
        return False
    if not has_digit:
        # Letters only: words, identifiers and camelCase are not tokens;
        # random mixed case (Hugging Face style) is.
        if n < 16 or _WORDS_RE.fullmatch(value) or _CAMEL_RE.fullmatch(value):
            return False
    elif _CODE_PATH_RE.fullmatch(value):
        return False
    if min_entropy is None:
        min_entropy = 2.5 if n < 16 else 3.0
    return shannon(value) >= min_entropy


def _hexish(value: str) -> bool:
    return all(c in "0123456789abcdefABCDEF-" for c in value)


_BASE64_RE = re.compile(r"[A-Za-z0-9+/]+={0,2}")


def _looks_base64(value: str) -> bool:
    return len(value) >= 20 and _BASE64_RE.fullmatch(value) is not None and shannon(value) > 4.0


def looks_like_password(value: str, *, quoted: bool, env_style: bool = False) -> bool:
    """True if ``value``, assigned to a password-named key, is a literal password.

    Quoted values are string literals, so anything that is not a placeholder
    counts. Unquoted values may be code (``password = pw``), so they need a
    digit, a symbol or mixed case, unless the line is shell/env style
    (``DB_PASSWORD=hunter``) where a bare word is a literal.
    """
    v = value
    if len(v) < 4 or len(v) > 1024 or is_placeholder(v):
        return False
    if any(c.isspace() for c in v):
        return False
    if quoted:
        return not _is_env_name(v)
    if env_style and word_passphrase(v):
        return True  # DB_PASSWORD=thunder.pepper.granite: words, not an attribute path
    if is_code_reference(v):
        return False
    if _PATHLIKE_RE.match(v) and "/" in v:
        return False
    has_digit = any(c.isdigit() for c in v)
    has_symbol = any(not c.isalnum() and c not in "_-." for c in v)
    mixed = any(c.isupper() for c in v[1:]) and any(c.islower() for c in v)
    if has_digit or has_symbol or mixed:
        return not v.isdigit() or len(v) >= 6
    return env_style and len(v) >= 6


_ENV_NAME_RE = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")


def _is_env_name(value: str) -> bool:
    """``"GITHUB_TOKEN"`` names an environment variable; it is not the token."""
    return _ENV_NAME_RE.fullmatch(value) is not None


_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z_]*")


# os.environ, self.api_key, settings.SECRET_KEY, process.env.TOKEN, cfg.v2:
# dotted identifiers whose parts are words (at most a short numeric suffix).
_CODE_PATH_RE = re.compile(r"[A-Za-z_][A-Za-z_]{0,40}[0-9]{0,2}(?:\.[A-Za-z_][A-Za-z_]{0,40}[0-9]{0,2})+")


def is_code_reference(value: str) -> bool:
    """True if an unquoted value reads as code: a variable, attribute or constant."""
    if _is_env_name(value) or _CODE_PATH_RE.fullmatch(value):
        return True
    # snake_case or lower identifiers without digits: ``api_key=api_key``.
    return _IDENT_RE.fullmatch(value) is not None and ("_" in value or (value.islower() and len(value) < 6))
