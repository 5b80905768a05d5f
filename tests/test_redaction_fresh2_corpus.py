"""The second fresh redaction corpus (issue 34) is what its generator writes, and is shaped as promised."""

from __future__ import annotations

import json
import re
from collections import defaultdict

from bench import redaction_fresh2_gen as gen


def test_generator_reproduces_committed_files_byte_for_byte() -> None:
    expected = gen.files()
    assert len(expected) == 4
    for path, text in expected.items():
        assert path.exists(), f"{path.name} missing: run python -m bench.redaction_fresh2_gen"
        assert path.read_bytes() == text.encode("utf-8"), f"{path.name} is stale"
    assert gen.main(["--check"]) == 0


def _rows(stem: str) -> list[dict]:
    return [json.loads(line) for split in ("tune", "heldout")
            for line in (gen.DATA / f"{stem}_{split}.jsonl").read_text(encoding="utf-8").splitlines()]


def test_chat_corpus_breadth_and_split_by_template_parity() -> None:
    rows = _rows("chat_fresh2")
    templates: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        templates[row["family"]].add(row["template"])
        number = int(row["template"].rsplit(".", 1)[1])
        assert row["split"] == ("fresh2_tune" if number % 2 == 0 else "fresh2_heldout")
        assert row["secrets"], row["template"]
        for secret in row["secrets"]:
            assert secret in row["text"], (row["template"], secret)
    assert len(templates) >= 25
    assert min(len(t) for t in templates.values()) >= 10
    assert len({row["text"] for row in rows}) == len(rows)


def test_clean_corpus_breadth_and_no_secrets() -> None:
    rows = _rows("clean_chat_fresh2")
    assert len(rows) >= 300
    assert len({row["family"] for row in rows}) >= 15
    assert all(row["secrets"] == [] for row in rows)
    assert len({row["text"] for row in rows}) == len(rows)
    assert not any(re.search("⟦|⟧", row["text"]) for row in rows)


def test_secret_never_occurs_in_the_surrounding_text() -> None:
    # the check "every occurrence masked" is exact only if a secret is not also part of the prose
    for row in _rows("chat_fresh2"):
        skeleton = row["text"]
        for secret in sorted(row["secrets"], key=len, reverse=True):
            skeleton = skeleton.replace(secret, "\x00")
        leftover = [s for s in row["secrets"] if s in skeleton]
        assert not leftover, (row["template"], leftover)
