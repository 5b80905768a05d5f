"""Map arbitrary ledger strings (session labels, persona ids) to safe path segments.

A label can be any string: ``dm:+1 555/123``, ``../x``, unicode, NUL, 300
characters. The safe form is one path segment of ``[A-Za-z0-9._-]``, never
``.`` or ``..``, at most :data:`MAX_LEN` characters, and unique: whenever the
label had to be changed, a short hash of the original is appended, so two
different labels never share a folder (``a/b`` and ``a_b`` differ).
"""

from __future__ import annotations

import hashlib
import re

MAX_LEN = 80
_HASH_LEN = 10
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_SAFE_EXACT = re.compile(r"[A-Za-z0-9._-]+")
# Hashed outputs end in "-<10 hex>"; a raw label of that shape is hashed too, so
# an identity-mapped label can never collide with another label's hashed form.
_HASHED_SHAPE = re.compile(r".*-[0-9a-f]{10}")
# Folder names QMD never indexes (and "." prefixes, hidden): hash them so an
# exported session or persona with such a name stays searchable.
_RESERVED = {"build", "dist", "vendor", "node_modules"}


def _digest(raw: str) -> str:
    # surrogatepass: labels decoded with errors=surrogateescape must still hash.
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_LEN]


def is_safe_segment(segment: str) -> bool:
    return (
        0 < len(segment) <= MAX_LEN
        and segment not in (".", "..")
        and not segment.startswith(".")
        and _SAFE_EXACT.fullmatch(segment) is not None
    )


def _maps_to_itself(raw: str) -> bool:
    return is_safe_segment(raw) and _HASHED_SHAPE.fullmatch(raw) is None and raw.lower() not in _RESERVED


def safe_segment(raw: str) -> str:
    """Return the safe, unique path segment for ``raw``.

    Labels that are already safe (and do not start with a dot, which QMD and
    most tools treat as hidden, nor end like a hashed form) map to themselves;
    every other label maps to a sanitised prefix plus ``-`` and a 10-hex-digit
    hash of the original.
    """
    if _maps_to_itself(raw):
        return raw
    cleaned = _UNSAFE.sub("_", raw).strip("._-")
    cleaned = cleaned[: MAX_LEN - _HASH_LEN - 1]
    digest = _digest(raw)
    return f"{cleaned}-{digest}" if cleaned else f"x-{digest}"


def turn_path(safe_label: str, turn_id: str, *, compaction: bool = False) -> str:
    """Index path of a turn or compaction document (ARCHITECTURE.md contract)."""
    folder = "compactions" if compaction else "turns"
    return f"sessions/{safe_label}/{folder}/{safe_segment(turn_id)}.md"
