"""What an index stores of its redaction: the ruleset's explicit version, plus a keyed digest of the known secrets."""

from __future__ import annotations

from pathlib import Path

import redaction.rules as rules
from indexer.runtime.config import load_config
from indexer.sync.context import make_redactor
from redaction import REDACTION_VERSION


def test_the_identity_is_the_explicit_version_never_a_digest_of_the_code(tmp_path, monkeypatch):
    """A refactor of redaction/ that masks the same must not rebuild every index: the identity an
    index stores is REDACTION_VERSION alone (tests/test_redaction_golden.py guards its bumps)."""
    monkeypatch.delenv("LEDGER_INDEXER_KNOWN_SECRETS", raising=False)
    assert not hasattr(rules, "ruleset_fingerprint") and not hasattr(rules, "code_digest")
    _redact, version = make_redactor(_config(tmp_path, None), key=lambda: KEY)
    assert version == REDACTION_VERSION


def _config(tmp_path: Path, known: str | None):
    lines = [f'[index]\ndir = "{tmp_path / "idx"}"\n']
    if known is not None:
        f = tmp_path / "known.txt"
        f.write_text(known, encoding="utf-8")
        lines.append(f'[redaction]\nknown_secrets_file = "{f}"\n')
    cfg = tmp_path / "c.toml"
    cfg.write_text("\n".join(lines), encoding="utf-8")
    return load_config(cfg)


KEY = bytes(range(32))


def test_known_secrets_add_to_the_version_not_replace_it(tmp_path, monkeypatch):
    monkeypatch.delenv("LEDGER_INDEXER_KNOWN_SECRETS", raising=False)
    _redact, plain = make_redactor(_config(tmp_path, None), key=lambda: KEY)
    assert plain == REDACTION_VERSION
    _redact, with_known = make_redactor(_config(tmp_path, "correct-horse-battery\n"), key=lambda: KEY)
    assert with_known.startswith(plain + "+known:")
    _redact, other_known = make_redactor(_config(tmp_path, "another-secret-value\n"), key=lambda: KEY)
    assert other_known.startswith(plain + "+known:") and other_known != with_known
    _redact, same_again = make_redactor(_config(tmp_path, "correct-horse-battery\n"), key=lambda: KEY)
    assert same_again == with_known  # stable while the set and the key are


def test_the_known_secrets_digest_cannot_be_checked_without_the_index_key(tmp_path, monkeypatch):
    """The version is shown by /v1/status: a plain digest of a weak known secret could be recovered by
    guessing words. Keyed with the index's own key, the same set gives another digest in another index,
    and no digest of a guess made without the key matches."""
    import hashlib

    monkeypatch.delenv("LEDGER_INDEXER_KNOWN_SECRETS", raising=False)
    cfg = _config(tmp_path, "Summer2024!\n")
    _r, here = make_redactor(cfg, key=lambda: KEY)
    _r, elsewhere = make_redactor(cfg, key=lambda: bytes(32))
    digest = here.rsplit("+known:", 1)[1]
    assert here != elsewhere and len(digest) == 16
    for guess in ("Summer2024!", "summer2024!", "Winter2024!"):
        assert hashlib.sha256(guess.encode()).hexdigest()[:len(digest)] != digest


def test_a_version_bump_with_known_secrets_still_changes_the_version(tmp_path, monkeypatch):
    monkeypatch.delenv("LEDGER_INDEXER_KNOWN_SECRETS", raising=False)
    cfg = _config(tmp_path, "correct-horse-battery\n")
    _r, before = make_redactor(cfg, key=lambda: KEY)
    import redaction

    monkeypatch.setattr(redaction, "REDACTION_VERSION", "99.0.0")
    _r, after = make_redactor(cfg, key=lambda: KEY)
    assert before.startswith(REDACTION_VERSION + "+known:") and after.startswith("99.0.0+known:")
    assert before.split("+", 1)[1] == after.split("+", 1)[1]
