"""The index's own secret key: keyed digests of what must not be guessable from the state DB.

A digest of a short text (a tool result's first bytes, a weak known secret) stored or shown as is can
be recovered by guessing. Keyed with 32 random bytes kept in a file of their own beside the state DB
(mode 0600), it says nothing to whoever reads the state DB or the status without that file.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from indexer.core.errors import Failure, Problem

KEY_BYTES = 32


class KeyUnreadable(Failure):
    """The key file is there but cannot be read, or is not a key: a set-up error (invalid: exit 2, so
    systemd does not restart into it)."""

    problem = Problem.INVALID


def load_or_create(path: Path) -> bytes:
    """The key in ``path``, made (atomically, 0600) the first time."""
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, secrets.token_bytes(KEY_BYTES))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # never replaces a key another process made meanwhile
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    _fsync_dir(path.parent)  # the link must outlive a crash: digests made with the key get committed
    return _read(path)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read(path: Path) -> bytes:
    try:
        key = path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise KeyUnreadable(f"the index key {path} cannot be read ({exc.strerror}): give the service user "
                            "read access to it (a new key would mean a full rebuild when known secrets are set)"
                            ) from None
    if len(key) != KEY_BYTES:
        raise KeyUnreadable(f"the index key {path} is not a key ({len(key)} bytes, not {KEY_BYTES}): restore "
                            "it from a backup, or move it aside: a new key is made, and the next sync reads the "
                            "ledger's messages again and, when known secrets are set, rebuilds every persona")
    return key


def keyed_digest(key: bytes, text: str, *, length: int = 32) -> str:
    """HMAC-SHA-256 of ``text`` under ``key``, as ``length`` hex characters."""
    return hmac.new(key, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:length]


__all__ = ["KEY_BYTES", "KeyUnreadable", "keyed_digest", "load_or_create"]
