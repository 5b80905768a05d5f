"""Values that look generated but are public by what they are (issue 34, precision).

``public_spans(text, low)`` yields spans the context detectors must leave
alone; the engine drops a context candidate lying inside one (known secrets
and values found elsewhere in the text are still masked). Each kind is
recognised by its own shape *and* its cue, never by shape alone:

* GPG key ids and fingerprints (8, 16 or 40 hex digits, also ``0x``-led or in
  groups of four) in a text that talks about GPG keys (``gpg``, ``pgp``,
  ``keyserver``, ``--recv-keys``, ``apt-key``, ``fingerprint``);
* CI cache keys: the value of a ``key:`` / ``restore-keys:`` line that reads
  as words joined by ``-`` (``Linux-node-<hash>``, ``v1-deps-<checksum>``);
* Kubernetes service-account token Secret *names* (``robot-token-66z81``);
* a base64 PEM certificate (``ca.crt``/``tls.crt`` in a TLS Secret) that
  holds no private key;
* Markdown-emphasised placeholder words (``**_actualpassword_**``).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator

_GPG_CUES = ("gpg", "pgp", "keyserver", "recv-key", "recv_key", "apt-key", "fingerprint", "keyring", "signing key",
             "key id", "keyid", "gnupg")
_HEX_ID_RE = re.compile(
    r"(?<![A-Za-z0-9])(?:0x)?(?:[0-9A-Fa-f]{40}|[0-9A-Fa-f]{16}|[0-9A-Fa-f]{8}"
    r"|[0-9A-Fa-f]{4}(?: {1,2}[0-9A-Fa-f]{4}){9})(?![A-Za-z0-9])")

# "key: <value>" lines of CI configs (GitHub Actions, CircleCI, GitLab, Travis).
_CACHE_KEY_RE = re.compile(
    r"(?m)^[ \t]*(?:-[ \t]+)?(?:[0-9TZ:.-]{20,40}[ \t]+)?(?:key|restore-keys|restore_keys|cache-key|cache_key)"
    r"[ \t]*:[ \t]*[\"']?(?P<v>[A-Za-z0-9][^\s\"']{0,300})")
_WORD_SEGMENT_RE = re.compile(r"(?:^|-)(?:[A-Za-z]{3,}|v[0-9]{1,3}|[A-Za-z]{2,}[0-9]{1,3})(?=-|$)")

_SA_SECRET_NAME_RE = re.compile(r"(?<![A-Za-z0-9_.-])[a-z0-9](?:[a-z0-9-]{0,200}[a-z0-9])?-token-[a-z0-9]{5}"
                                r"(?![A-Za-z0-9_-])")

_B64_CERT_RE = re.compile(r"LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t[A-Za-z0-9+/=\r\n \t]{0,65536}")

_EMPHASIS_RE = re.compile(r"(?<![A-Za-z0-9])[*_]{1,3}(?P<w>[a-z][a-z_]{3,40}[a-z])[*_]{1,3}(?![A-Za-z0-9])")
_PLACEHOLDER_WORDS = ("password", "passwd", "secret", "token", "your", "actual", "example", "placeholder", "here")


def public_spans(text: str, low: str) -> Iterator[tuple[int, int]]:
    if any(c in low for c in _GPG_CUES):
        for m in _HEX_ID_RE.finditer(text):
            yield m.span()
    if "key" in low:
        for m in _CACHE_KEY_RE.finditer(text):
            v = m.group("v")
            if v.count("-") >= 2 and _WORD_SEGMENT_RE.match(v):
                yield m.span("v")
    if "-token-" in text:
        for m in _SA_SECRET_NAME_RE.finditer(text):
            yield m.span()
    if "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t" in text:
        for m in _B64_CERT_RE.finditer(text):
            if _certificate_only(m.group()):
                yield m.span()
    if "*" in text or "__" in text:
        for m in _EMPHASIS_RE.finditer(text):
            w = m.group("w")
            if any(p in w for p in _PLACEHOLDER_WORDS):
                yield m.span()


def _certificate_only(blob: str) -> bool:
    data = "".join(blob.split())
    try:
        raw = base64.b64decode(data[: len(data) - len(data) % 4], validate=False)
    except (binascii.Error, ValueError):
        return False
    return b"PRIVATE" not in raw and b"-----BEGIN CERTIFICATE" in raw


def drop_public(cands: list, spans: list[tuple[int, int]], keep_prio: frozenset[int]) -> list:
    """Candidates ``(start, end, rule, keep, prio, order)`` minus those inside a public span."""
    if not spans:
        return cands
    return [c for c in cands if c[4] in keep_prio or not any(s <= c[0] and c[1] <= e for s, e in spans)]
