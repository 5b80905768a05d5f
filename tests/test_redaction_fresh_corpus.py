"""The fresh held-out redaction corpus (issue 34) is well formed and reproducible.

Checks the files only, never the redactor: recall on them is measured by
`python -m bench.redaction_eval`, not asserted here.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from bench import redaction_fresh_gen as gen

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "redaction_eval"


def rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def chat() -> list[dict]:
    return rows(gen.CHAT)


@pytest.fixture(scope="module")
def clean() -> list[dict]:
    return rows(gen.CLEAN)


def test_the_generator_reproduces_both_files_byte_for_byte() -> None:
    for name, text in gen.generate().items():
        assert (DATA / name).read_text(encoding="utf-8") == text, f"{name}: rerun bench/redaction_fresh_gen.py"


def test_a_different_seed_gives_different_values() -> None:
    assert gen.generate(gen.SEED + 1)[gen.CHAT] != (DATA / gen.CHAT).read_text(encoding="utf-8")


def test_credential_rows_have_the_fields_and_the_fresh_split(chat: list[dict]) -> None:
    assert 1200 <= len(chat) <= 1800
    for row in chat:
        assert set(row) == {"family", "template", "split", "secrets", "text", "source"}, row["template"]
        assert row["split"] == "fresh" and row["source"] == gen.SOURCE
        assert row["template"].startswith(row["family"] + ".")


def test_every_secret_occurs_verbatim_and_nowhere_by_accident(chat: list[dict]) -> None:
    for row in chat:
        assert row["secrets"], row["template"]
        assert gen.well_formed(row["text"], row["secrets"]), row["template"]
        assert all(len(s) >= gen.MIN_SECRET for s in row["secrets"]), row["template"]


def test_families_and_templates_are_covered(chat: list[dict]) -> None:
    fams = Counter(row["family"] for row in chat)
    assert len(fams) >= 20 and set(fams) == set(gen.FAMILIES)
    templates = Counter(row["template"] for row in chat)
    for fam in fams:
        assert len({t for t in templates if t.startswith(fam + ".")}) >= 8, fam
    assert set(templates.values()) == {gen.ROWS_PER_TEMPLATE}


def test_split_and_grouped_secrets_list_each_part(chat: list[dict]) -> None:
    for row in chat:
        if row["family"] == "split_secret":
            assert len(row["secrets"]) == 2, row["template"]
        if row["family"] == "grouped_token":
            assert len(row["secrets"]) >= 5
            assert " ".join(row["secrets"]) in row["text"], row["template"]


def test_clean_rows_carry_no_secrets_and_enough_families(clean: list[dict]) -> None:
    assert len(clean) >= 400
    fams = Counter(row["family"] for row in clean)
    assert len(fams) >= 15
    for row in clean:
        assert set(row) == {"family", "template", "split", "text", "source"}
        assert row["split"] == "fresh"
    assert len({row["text"] for row in clean}) == len(clean)


def test_no_clean_line_repeats_a_credential_row_text(chat: list[dict], clean: list[dict]) -> None:
    secrets = {s for row in chat for s in row["secrets"] if len(s) >= 12}
    assert not any(s in row["text"] for row in clean for s in secrets)


def test_the_eval_names_fresh_misses_by_template_and_never_shows_a_text(chat: list[dict],
                                                                       clean: list[dict]) -> None:
    """`--show` must not leak the held-out texts to whoever tunes the redactor: with a redactor
    that misses everything and changes every clean line, the section and its JSON name family and
    template ids only."""
    from types import SimpleNamespace

    from bench.redaction_eval import evaluate, fresh_figures

    keep = evaluate(chat[::15], lambda t: SimpleNamespace(text=t))
    spoil = evaluate(clean[::15], lambda t: SimpleNamespace(text=t + " [changed]"))
    lines, data = fresh_figures(keep, spoil, show=10)
    shown = "\n".join(lines) + json.dumps(data)
    assert all(r["missed"] for r in keep) and all(r["changed"] for r in spoil)
    assert f"0/{len(keep)}" in shown and f"{len(spoil)}/{len(spoil)}" in shown
    assert keep[0]["row"]["template"] in shown and spoil[0]["row"]["template"] in shown
    for r in keep:
        assert not any(s in shown for s in r["row"]["secrets"]), r["row"]["template"]
    for r in keep + spoil:
        assert r["row"]["text"] not in shown
