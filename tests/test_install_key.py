"""The index's secret key: made once (0600), read back the same, a clear error when it is not a key."""

from __future__ import annotations

import stat

import pytest

from indexer.cli.common import exit_code
from indexer.core.errors import Problem
from indexer.state.db import StateDB
from indexer.state.install_key import KeyUnreadable, keyed_digest, load_or_create


def test_the_key_is_made_once_private_to_its_owner_and_read_back_the_same(tmp_path):
    state = StateDB(tmp_path / "index" / "state.sqlite")
    try:
        key = state.key()
    finally:
        state.close()
    path = tmp_path / "index" / "state.sqlite.key"
    assert len(key) == 32 and path.read_bytes() == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create(path) == key
    assert sorted(p.name for p in path.parent.iterdir() if p.name.startswith(".")) == []  # no temp file left


def test_a_digest_depends_on_the_key(tmp_path):
    one, two = load_or_create(tmp_path / "a.key"), load_or_create(tmp_path / "b.key")
    assert one != two
    assert keyed_digest(one, "code 730519") != keyed_digest(two, "code 730519")
    assert keyed_digest(one, "code 730519") == keyed_digest(one, "code 730519")
    assert len(keyed_digest(one, "x")) == 32


def test_a_file_that_is_not_a_key_is_a_clear_error(tmp_path):
    path = tmp_path / "state.sqlite.key"
    path.write_bytes(b"short")
    with pytest.raises(KeyUnreadable) as err:
        load_or_create(path)
    assert str(err.value) == (f"the index key {path} is not a key (5 bytes, not 32): restore it from a backup, "
                              "or move it aside: a new key is made, and the next sync reads the ledger's messages "
                              "again and, when known secrets are set, rebuilds every persona")
    assert err.value.problem is Problem.INVALID and exit_code(err.value) == 2  # systemd does not retry


def test_an_indexer_without_known_secrets_does_not_need_the_key(tmp_path, monkeypatch, config_factory):
    """A visibility change from the CLI opens an indexer but never a digest: an unreadable key file
    must not stop it (the key is read when a pass or the known secrets need it)."""
    from indexer.sync.context import Indexer

    monkeypatch.delenv("LEDGER_INDEXER_KNOWN_SECRETS", raising=False)
    config = config_factory(sinks=("qmd",))
    key = config.state_db_path.with_name(config.state_db_path.name + ".key")
    key.parent.mkdir(parents=True, exist_ok=True)
    key.write_bytes(b"broken")
    ix = Indexer(config, sinks=[])
    try:
        assert ix.redaction_version.count("+known:") == 0
    finally:
        ix.close()
    assert key.read_bytes() == b"broken"
