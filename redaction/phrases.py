"""Context rules for secrets named in prose or lists rather than assigned.

* ``beamer token X``, ``the launchdarkly api key is X``, ``token for
  launchdarkly: X``: a credential word next to a vendor (or any product
  word), then a value with a machine-generated shape.
* YAML lists under a secret-named key (``api_keys:`` then ``  - X`` lines).
* Headers whose *name* says credential (``X-Api-Key:``, ``Foo-Token:``,
  ``X-Client-Secret:``), in raw HTTP, ``curl -H`` and JSON header maps.

Pure functions over (text, ascii-lowercased text), like ``detectors``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ahocorasick_rs import AhoCorasick, Implementation

from .assignments import VENDORS, classify_name
from .detectors import LINE_END, NEXT_LINE, _masked, word_before
from .entropy import is_placeholder, looks_like_token

Candidate = tuple[str, int, int, int]

__all__ = ["find_credential_phrases", "find_stated_credentials", "find_yaml_secret_lists", "find_credential_headers",
           "PHRASE_PATTERNS", "STATED_PATTERNS"]

_VALUE = r"""[ \t]*(?:(?P<verb>is|was|=|:|->)[ \t]*)?:?[ \t]*["'`]?(?P<v>[A-Za-z0-9_\-./+=~]{16,512})"""
# Every form is anchored on a credential word found by one literal scan, then
# checked with small anchored matches: first the value after the word (rarely
# there in prose), only then the word before it. A leading character-class
# scan over every word cost more than the rest of the redactor together.
_CRED_WORDS = ("token", "key", "secret", "passphrase", "password", "credential", "pat")
_CRED_WORDS_PATTERN = "|".join(_CRED_WORDS)  # what the str.find scan looks for (part of the fingerprint)
# After "<product> token" / "my token is": the value, a verb or operator first.
_AFTER_RE = re.compile(r"s?(?![a-z0-9_-])" + _VALUE)
# "token for <product>[:] X"
_AFTER_FOR_RE = re.compile(r"s?[ \t]+(?:for|of|from)[ \t]+(?P<w>[a-z][a-z0-9]{2,23})" + _VALUE)
PHRASE_PATTERNS = (_CRED_WORDS_PATTERN, _AFTER_RE.pattern, _AFTER_FOR_RE.pattern)
_POSSESSIVES = frozenset({"my", "our", "your", "the", "this", "new"})
_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")

# Words before "key"/"token" that name something public or structural, not a product.
_NOT_PRODUCT = frozenset("""
the a an my your our their his her its this that these those new old same another other
public pub ssh gpg pgp rsa ed25519 host commit hash sort primary foreign partition cache index
map dict lookup idempotency request session csrf xsrf page next continuation cursor sync refresh
license product activation serial registry deploy signing encryption verification test example dummy fake
and or with without is was be use set get any some no
""".split())


_MATCHERS: dict[tuple[str, ...], AhoCorasick | None] = {}


def word_hits(low: str, words: tuple[str, ...]) -> list[tuple[int, int]]:
    """Spans of every occurrence of each word, in text order: one overlapping Aho–Corasick scan
    for the whole tuple (an automaton kept per tuple: callers pass module constants). A str.find
    loop per word cost ~1 us a word even where none occurs, and prose holds "key", "pass", "auth"
    many times (speed, issue 34)."""
    matcher = _MATCHERS.get(words)
    if matcher is None and words not in _MATCHERS:
        distinct = len(set(words)) == len(words) and all(words)  # else: the loops below, duplicates and all
        matcher = _MATCHERS[words] = AhoCorasick(list(words), implementation=Implementation.DFA) if distinct else None
    if matcher is not None:
        try:
            hits = [(s, e) for _w, s, e in matcher.find_matches_as_indexes(low, overlapping=True)]
        except UnicodeEncodeError:  # a lone surrogate (the automaton takes UTF-8 only): the loops below
            pass
        else:
            hits.sort()
            return hits
    out = []
    for w in words:
        i = low.find(w)
        while i >= 0:
            out.append((i, i + len(w)))
            i = low.find(w, i + 1)
    out.sort()
    return out


_HASH_RE = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def _value_ok(text: str, s: int, e: int, word: str | None = None, min_len: int = 16) -> bool:
    v = text[s:e]
    if text.startswith("(", e):
        return False  # "secret = Convert.FromBase64String(…)": a call, not a value
    if _HASH_RE.fullmatch(v) and word not in VENDORS:
        return False  # a commit SHA or content digest next to "token"/"key" in prose
    return (not _masked(v) and not is_placeholder(v)
            and looks_like_token(v, min_len=min_len, min_entropy=3.0, need_digit=True))


def _value_span(text: str, m: re.Match[str]) -> tuple[int, int]:
    s, e = m.span("v")
    while e > s and text[e - 1] in ".,:;!?)":
        e -= 1
    return s, e


def _word_before(low: str, ws: int) -> str | None:
    """The word before a credential word: ``<word> [api[ _-]]<credential>``."""
    j = ws
    if low.endswith(("api ", "api_", "api-", "api\t"), max(0, j - 4), j):
        j -= 4
    elif low.endswith("api", max(0, j - 3), j):
        j -= 3
    k = j
    while k > 0 and low[k - 1] in " \t":
        k -= 1
    if k == j:
        return None  # glued to the word before: "monkey", "bypass"
    i = k
    while i > 0 and k - i < 24 and low[i - 1] in _WORD_CHARS:
        i -= 1
    if i == k or (i > 0 and (low[i - 1] in _WORD_CHARS or low[i - 1] == "_")):
        return None
    return low[i:k]


def find_credential_phrases(text: str, low: str) -> Iterator[Candidate]:
    for ws, we in word_hits(low, _CRED_WORDS):
        if "cache" in low[max(low.rfind("\n", max(0, ws - 40), ws) + 1, ws - 40):ws]:
            continue  # "Cache restored from key: node-cache-…": a CI cache key, not a credential
        m = _AFTER_RE.match(low, we)
        w = None
        if m is not None:
            w = _word_before(low, ws)
            if w is None or (w in _POSSESSIVES and m.group("verb") not in ("is", "was")) or \
                    (w not in _POSSESSIVES and (len(w) < 3 or w in _NOT_PRODUCT)):
                m = None
        if m is None and (ws == 0 or low[ws - 1] in " \t\n"):
            m = _AFTER_FOR_RE.match(low, we)
            if m is not None and m.group("w") in _NOT_PRODUCT:
                m = None
            w = m.group("w") if m is not None else None
        if m is not None:
            s, e = _value_span(text, m)
            if _value_ok(text, s, e, w):
                yield ("credential-phrase", s, e, 0)


# "the api key is X", "our token was X", "my secret is X": a sentence stating
# a credential. The value needs only 8 characters (credential-phrase asks 16
# of a value merely next to the word) but must look generated: a digit, a
# letter, entropy. It may stand alone on the next line ("the token is" and
# the next message of the turn).
_STATED_WORDS = ("key", "token", "secret", "credential", "passphrase", "pat")
_STATED_VERB_RE = re.compile(r"s?[ \t]+(?:is|was)[ \t]*:?")
_STATED_VALUE = r"[\"'`]?(?P<v>[A-Za-z0-9_\-./+=~]{8,512})"
_STATED_SAME_RE = re.compile(r"[ \t]*" + _STATED_VALUE)
_STATED_NEXT_RE = re.compile(NEXT_LINE + _STATED_VALUE + r"[.,;!?\"'`]?" + LINE_END)
STATED_PATTERNS = ("|".join(_STATED_WORDS), _STATED_VERB_RE.pattern, _STATED_SAME_RE.pattern, _STATED_NEXT_RE.pattern)


def find_stated_credentials(text: str, low: str) -> Iterator[Candidate]:
    for ws, we in word_hits(low, _STATED_WORDS):
        m = _STATED_VERB_RE.match(low, we)
        if m is None or not _stated_subject(low, ws):
            continue
        v = _STATED_SAME_RE.match(low, m.end()) or _STATED_NEXT_RE.match(low, m.end())
        if v is None:
            continue
        s, e = _value_span(text, v)
        if (not _VERSION_RE.fullmatch(text, s, e) and _looks_generated(text[s:e])
                and _value_ok(text, s, e, None, min_len=8)):
            yield ("credential-phrase", s, e, 0)


def _class(c: str) -> str:
    return "u" if c.isupper() else "l" if c.islower() else "d" if c.isdigit() else "o"


def _looks_generated(value: str) -> bool:
    """A stated value is a credential only when it reads as generated, switching often between
    letters and digits (and cases): ``Zq8pX2mN4v``, or in one case ``x7k9m2p4q8r1w3`` (then 10
    characters at least, letters and digits only, not a short lowercase hex id). Not an identifier or a name with a number
    (``Python3.12``, ``camelCase2Var``, ``SHA256withRSA``, ``user_id2``, ``expired2024``), and no short
    dotted name."""
    classes = [_class(c) for c in value]
    kinds = set(classes)
    if "d" not in kinds or ("." in value and len(value) < 20) or _HEXISH_RE.fullmatch(value):
        return False
    switches = sum(1 for a, b in zip(classes, classes[1:]) if a != b)
    if {"u", "l"} <= kinds:
        return switches >= 0.45 * (len(value) - 1)
    # one case: random letters and digits switch class on ~40 % of characters; identifiers rarely
    return (len(value) >= 10 and kinds in ({"u", "d"}, {"l", "d"}) and classes.count("d") >= 3
            and len(value) - classes.count("d") >= 3 and switches >= 0.3 * (len(value) - 1))


# what reads as an id in prose, not a credential: an abbreviated commit (lowercase hex up to 12), a
# 0x… constant or key id in lowercase hex (0xBA5493C11 stated as a key reads as one: masked, as 1.4.0 did)
_HEXISH_RE = re.compile(r"[0-9a-f]{1,12}|0x[0-9a-f]{1,38}")


# "the key is v1.2.3-beta4": a version, not a credential.
_VERSION_RE = re.compile(r"[vV]?[0-9]+(?:\.[0-9]+)+(?:[-+.][A-Za-z0-9.]+)?")


def _stated_subject(low: str, ws: int) -> bool:
    """"the/my/our … key is", or "<product> key is": not "monkey is", not "hash key is"."""
    w = _word_before(low, ws)
    return w is not None and (w in _POSSESSIVES or (len(w) >= 3 and w not in _NOT_PRODUCT))


# "api_keys:" at the end of a line, then "- value" items indented below it.
_LIST_KEY_RE = re.compile(r"(?m)^(?P<ind>[ \t]*)(?:-[ \t]+)?(?P<name>[A-Za-z0-9_.-]{2,64})[ \t]*:[ \t]*\r?$")
_LIST_ITEM_RE = re.compile(r"""(?P<ind>[ \t]*)-[ \t]+(?:"(?P<dq>[^"\n]{1,512})"|'(?P<sq>[^'\n]{1,512})'|(?P<uq>[^\s#]{1,512}))[ \t]*\r?$""")


def find_yaml_secret_lists(text: str, low: str) -> Iterator[Candidate]:
    for m in _LIST_KEY_RE.finditer(text):
        name = m.group("name")
        # A list key is usually plural ("api_keys", "secrets").
        cls = classify_name(name) or (classify_name(name[:-1]) if name.endswith("s") else None)
        if cls is None or cls[0] not in ("strong", "password", "weak"):
            continue
        strength, rule = cls
        pos = m.end() + 1
        indent = len(m.group("ind"))
        while pos < len(text):
            nl = text.find("\n", pos)
            end = len(text) if nl < 0 else nl
            item = _LIST_ITEM_RE.fullmatch(text, pos, end)
            if item is None or len(item.group("ind")) < indent:
                break
            g = next(k for k in ("dq", "sq", "uq") if item.group(k) is not None)
            s, e = item.span(g)
            v = text[s:e]
            if strength == "password":
                ok = not is_placeholder(v) and len(v) >= 4
            else:
                ok = looks_like_token(v, min_len=8 if strength == "strong" else 16)
            if ok and not _masked(v):
                yield (rule, s, e, 0)
            pos = end + 1


# A header (or JSON/curl header map entry) whose name ends in a credential word:
# found by a literal scan for the word, then the name around it and the value.
_HEADER_WORDS = ("token", "key", "secret", "auth", "session", "signature", "password")

_HEADER_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
_HEADER_VALUE_RE = re.compile(r"""(?:\\?["'])?[ \t]*:[ \t]*(?:\\?["'])?[ \t]*(?P<v>[^\s"'`,;<>\\{}]{8,4096})""")
HEADER_PATTERNS = ("|".join(_HEADER_WORDS), _HEADER_VALUE_RE.pattern)


def find_credential_headers(text: str, low: str) -> Iterator[Candidate]:
    for start, end in word_hits(low, _HEADER_WORDS):
        m = _HEADER_VALUE_RE.match(low, end)
        if m is None:
            continue
        lo = max(0, start - 64)
        while start > lo and low[start - 1] in _HEADER_NAME_CHARS:
            start -= 1
        name = low[start:end]
        # A header name starts a line, follows a quote (-H '...', JSON), or a brace/comma in a map.
        before = text[start - 1] if start else "\n"
        if before not in "\n\"'{, \t" or word_before(text, start, "-_"):
            continue
        if "-" not in name and name not in ("token", "authorization", "apikey"):
            continue  # bare "key:"/"secret:" are assignments: find_assignments judges those
        s, e = m.span("v")
        v = text[s:e]
        if not _masked(v) and not is_placeholder(v) \
                and looks_like_token(v, min_len=8, min_entropy=2.5):
            yield ("credential-header", s, e, 0)
