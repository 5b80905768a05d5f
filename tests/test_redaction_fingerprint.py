"""The ruleset fingerprint changes whenever redaction behaviour can change."""

from __future__ import annotations

from pathlib import Path

import redaction.rules as rules
from indexer.runtime.config import load_config
from indexer.sync.context import make_redactor
from redaction import REDACTION_VERSION, ruleset_fingerprint


def test_code_digest_ignores_comments_and_layout():
    a = "def f(x):\n    return x + 1\n"
    b = "# why\ndef f(x):  # note\n\n    return x + 1\n"
    assert rules.code_digest(a) == rules.code_digest(b)


def test_code_digest_sees_a_changed_function_body():
    a = "def f(x):\n    return x + 1\n"
    b = "def f(x):\n    return x + 2\n"
    assert rules.code_digest(a) != rules.code_digest(b)


def test_fingerprint_covers_every_behaviour_module():
    names = {p.name for p in rules._code_files()}
    assert {"engine.py", "detectors.py", "entropy.py", "known.py", "rules.py"} <= names
    assert "cli.py" not in names


def test_a_detector_body_edit_changes_the_fingerprint(tmp_path, monkeypatch):
    # A copy of the package with one detector body changed: same rule data,
    # different behaviour, so the fingerprint must differ.
    src = Path(rules.__file__).resolve().parent
    before = ruleset_fingerprint()
    copy = tmp_path / "redaction"
    copy.mkdir()
    for p in src.rglob("*.py"):
        target = copy / p.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(p.read_text(encoding="utf-8"), encoding="utf-8")
    det = copy / "detectors.py"
    text = det.read_text(encoding="utf-8")
    assert "def find_cookies(" in text
    det.write_text(text.replace("def find_cookies(text: str, low: str)",
                                "def find_cookies(text: str, low: str, _edited=1)", 1), encoding="utf-8")
    monkeypatch.setattr(rules, "__file__", str(copy / "rules.py"))
    assert ruleset_fingerprint() != before


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


def test_known_secrets_add_to_the_fingerprint_not_replace_it(tmp_path, monkeypatch):
    monkeypatch.delenv("LEDGER_INDEXER_KNOWN_SECRETS", raising=False)
    _redact, plain = make_redactor(_config(tmp_path, None), key=lambda: KEY)
    assert plain == f"{REDACTION_VERSION}+{ruleset_fingerprint()}"
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


def test_a_rule_change_with_known_secrets_still_changes_the_version(tmp_path, monkeypatch):
    monkeypatch.delenv("LEDGER_INDEXER_KNOWN_SECRETS", raising=False)
    cfg = _config(tmp_path, "correct-horse-battery\n")
    _r, before = make_redactor(cfg, key=lambda: KEY)
    monkeypatch.setattr(rules, "TOKEN_RULES", rules.TOKEN_RULES[:-1])
    _r, after = make_redactor(cfg, key=lambda: KEY)
    assert before != after
