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

from .detectors import _MARKER, _masked, classify_name, word_before
from .entropy import is_placeholder, looks_like_token

Candidate = tuple[str, int, int, int]

__all__ = ["find_credential_phrases", "find_yaml_secret_lists", "find_credential_headers", "PHRASE_PATTERNS"]

_CRED = r"(?:api[ \t_-]?)?(?:token|key|secret|password|passphrase|credential|pat)s?"
_VALUE = r"""[ \t]*(?:(?:is|was|=|:|->)[ \t]*)?:?[ \t]*["'`]?(?P<v>[A-Za-z0-9_\-./+=~]{16,512})"""
# "<product> [api] token|key|secret ... X"
_PRODUCT_FIRST_RE = re.compile(r"(?P<w>[a-z][a-z0-9]{2,23})[ \t]+" + _CRED + r"(?![a-z0-9_-])" + _VALUE)
# "token|key|secret for|of|from <product>[:] X"
_PRODUCT_AFTER_RE = re.compile(_CRED + r"[ \t]+(?:for|of|from)[ \t]+(?P<w>[a-z][a-z0-9]{2,23})" + _VALUE)
# "my api key is X", "the token was: X" (the verb is required here)
_POSSESSIVE_RE = re.compile(r"(?P<w>my|our|your|the|this|new)[ \t]+" + _CRED + r"[ \t]+(?:is|was|is now)[ \t]*:?"
                            r"""[ \t]*["'`]?(?P<v>[A-Za-z0-9_\-./+=~]{16,512})""")
PHRASE_PATTERNS = (_PRODUCT_FIRST_RE.pattern, _PRODUCT_AFTER_RE.pattern, _POSSESSIVE_RE.pattern)

# Words before "key"/"token" that name something public or structural, not a product.
_NOT_PRODUCT = frozenset("""
the a an my your our their his her its this that these those new old same another other
public pub ssh gpg pgp rsa ed25519 host commit hash sort primary foreign partition cache index
map dict lookup idempotency request session csrf xsrf page next continuation cursor sync refresh
license product activation serial registry deploy signing encryption verification test example dummy fake
and or with without is was be use set get your any some no
""".split())


def _value_ok(text: str, s: int, e: int) -> bool:
    while e > s and text[e - 1] in ".,:;!?)":
        e -= 1
    v = text[s:e]
    return (not _masked(v) and not text.startswith(_MARKER, e) and not is_placeholder(v)
            and looks_like_token(v, min_len=16, min_entropy=3.0, need_digit=True))


def find_credential_phrases(text: str, low: str) -> Iterator[Candidate]:
    for rx in (_PRODUCT_FIRST_RE, _PRODUCT_AFTER_RE, _POSSESSIVE_RE):
        for m in rx.finditer(low):
            if (rx is not _POSSESSIVE_RE and m.group("w") in _NOT_PRODUCT) or word_before(text, m.start()):
                continue
            s, e = m.span("v")
            while e > s and text[e - 1] in ".,:;!?)":
                e -= 1
            if _value_ok(text, s, e):
                yield ("credential-phrase", s, e, 0)


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


# A header (or JSON/curl header map entry) whose name ends in a credential word.
_CRED_HEADER_RE = re.compile(
    r"""(?P<name>(?:[a-z0-9]+-){0,4}(?:token|api-?key|key|secret|auth|access-token|session|signature|password))"""
    r"""(?:\\?["'])?[ \t]*:[ \t]*(?:\\?["'])?[ \t]*(?P<v>[^\s"'`,;<>\\{}]{8,4096})""")


def find_credential_headers(text: str, low: str) -> Iterator[Candidate]:
    for m in _CRED_HEADER_RE.finditer(low):
        start = m.start("name")
        # A header name starts a line, follows a quote (-H '...', JSON), or a brace/comma in a map.
        before = text[start - 1] if start else "\n"
        if before not in "\n\"'{, \t" or word_before(text, start, "-_"):
            continue
        name = low[m.start("name"):m.end("name")]
        if "-" not in name and name not in ("token", "authorization", "apikey", "api-key"):
            continue  # bare "key:"/"secret:" are assignments: find_assignments judges those
        s, e = m.span("v")
        v = text[s:e]
        if not _masked(v) and not text.startswith(_MARKER, e) and not is_placeholder(v) \
                and looks_like_token(v, min_len=8, min_entropy=2.5):
            yield ("credential-header", s, e, 0)
