"""The redaction evaluation corpora (issue 34) are well-formed.

Checks the data only — the recall and false-positive figures are the benchmark's
(`python -m bench.redaction_eval`), not asserted here."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "redaction_eval"
FIELDS = {"text", "secrets", "family", "template", "split", "source"}


def load(name: str) -> list[dict]:
    with (DATA / name).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="module")
def chat() -> list[dict]:
    return load("chat.jsonl")


@pytest.fixture(scope="module")
def catalog() -> list[dict]:
    return load("catalog.jsonl")


@pytest.fixture(scope="module")
def clean_dev() -> list[dict]:
    return load("clean_dev.jsonl")


@pytest.mark.parametrize("name", ["chat.jsonl", "catalog.jsonl", "clean_dev.jsonl"])
def test_every_line_has_the_fields(name: str) -> None:
    for i, row in enumerate(load(name)):
        assert FIELDS <= row.keys(), (name, i)
        assert isinstance(row["text"], str) and row["text"].strip(), (name, i)
        assert isinstance(row["secrets"], list) and all(isinstance(s, str) and s for s in row["secrets"]), (name, i)
        assert row["split"] in ("tune", "heldout"), (name, i)
        assert row["family"] and row["template"] and row["source"], (name, i)


@pytest.mark.parametrize("name", ["chat.jsonl", "catalog.jsonl"])
def test_every_secret_and_keep_occurs_in_its_text(name: str) -> None:
    for row in load(name):
        assert row["secrets"], row["template"]
        for s in row["secrets"]:
            assert s in row["text"], (row["template"], s)
        for k in row.get("keep", []):
            assert k in row["text"], (row["template"], k)
            assert not any(k in s for s in row["secrets"]), (row["template"], k)


def test_chat_sizes_families_and_splits(chat) -> None:
    assert len(chat) >= 1500
    templates: dict[str, set[str]] = defaultdict(set)
    splits: dict[str, set[str]] = defaultdict(set)
    for row in chat:
        templates[row["family"]].add(row["template"])
        splits[row["family"]].add(row["split"])
    assert all(len(t) >= 8 for t in templates.values()), {f: len(t) for f, t in templates.items() if len(t) < 8}
    heldout_families = [f for f, s in splits.items() if s == {"heldout"}]
    assert len(heldout_families) >= 2
    assert sum(1 for s in splits.values() if s == {"tune", "heldout"}) >= 10   # whole templates held out too
    by_template: dict[str, set[str]] = defaultdict(set)
    for row in chat:
        by_template[row["template"]].add(row["split"])
    assert all(len(s) == 1 for s in by_template.values()), "a template is split between tune and heldout"
    families = set(templates)
    for needed in ("pw_sentence", "pw_cue_after", "pw_temp", "user_colon_pw", "pw_i18n", "pw_answer", "totp",
                   "recovery_codes", "table_kv", "split_code", "aws_prose", "passphrase_after_key", "odd_case",
                   "grouped_token", "b64_pipe", "urlenc_redirect", "php_define", "pgpass", "cli_pw_flags",
                   "secret_set_cli", "bytes_key", "url_token_user"):
        assert needed in families, needed


def test_chat_languages_and_turns(chat) -> None:
    i18n = {row["template"].split(".")[1].rstrip("0123456789") for row in chat if row["family"] == "pw_i18n"}
    assert {"de", "fr", "es", "pt", "it", "nl"} <= i18n
    answers = [row for row in chat if row["family"] == "pw_answer"]
    assert all("\n\nAssistant: " in row["text"] or "\n\nUser: " in row["text"] for row in answers)
    keep_rows = [row for row in chat if row.get("keep")]
    assert keep_rows and all(row["family"] == "url_token_user" for row in keep_rows)


def test_catalog_sizes_vendors_and_splits(catalog) -> None:
    assert len(catalog) >= 400
    vendors = {row["vendor"] for row in catalog}
    assert len(vendors) >= 150
    by_vendor: dict[str, set[str]] = defaultdict(set)
    for row in catalog:
        by_vendor[row["vendor"]].add(row["split"])
    assert all(len(s) == 1 for s in by_vendor.values()), "a vendor is split between tune and heldout"
    assert {row["split"] for row in catalog} == {"tune", "heldout"}
    sources = {row["catalog"] for row in catalog}
    assert {"gitleaks", "trufflehog", "noseyparker", "kingfisher", "gitguardian"} <= sources
    gitleaks = [row for row in catalog if row["catalog"] == "gitleaks"]
    assert len(gitleaks) >= 100 and {row["split"] for row in gitleaks} == {"tune", "heldout"}


def test_clean_dev_is_real_prose_without_secrets(clean_dev, chat, catalog) -> None:
    assert len(clean_dev) >= 350
    assert {row["split"] for row in clean_dev} == {"tune", "heldout"}
    assert len({row["text"] for row in clean_dev}) == len(clean_dev)
    for row in clean_dev:
        assert row["secrets"] == [], row["source"]
        assert re.match(r"https?://", row["source"]), row["source"]
    categories = {row["family"] for row in clean_dev}
    assert {"gpg_key", "ci_cache_key", "public_cert", "oauth_client", "commit_sha", "image_digest", "request_id",
            "version", "url"} <= categories
    texts = "\n".join(row["text"] for row in clean_dev)
    generated = {s for row in chat + catalog for s in row["secrets"] if len(s) >= 8}
    assert not [s for s in generated if s in texts]


def test_generated_files_are_reproducible() -> None:
    from bench.redaction_eval_gen import generate

    for name, text in generate().items():
        assert (DATA / name).read_text(encoding="utf-8") == text, f"{name}: rerun bench/redaction_eval_gen.py"


def test_data_stays_small() -> None:
    # Five corpora (own, catalog, gitleaks, two independent chat sets) fit in a few MB of a clone.
    assert sum(p.stat().st_size for p in DATA.glob("*.jsonl")) < 3_000_000
