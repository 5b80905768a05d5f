"""The fresh redaction corpus (issue 34) is well formed, reproducible and split by template.

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
    return rows(gen.CHAT_TUNE) + rows(gen.CHAT_HELDOUT)


@pytest.fixture(scope="module")
def clean() -> list[dict]:
    return rows(gen.CLEAN_TUNE) + rows(gen.CLEAN_HELDOUT)


def test_the_generator_reproduces_all_four_files_byte_for_byte() -> None:
    files = gen.generate()
    assert set(files) == {gen.CHAT_TUNE, gen.CHAT_HELDOUT, gen.CLEAN_TUNE, gen.CLEAN_HELDOUT}
    for name, text in files.items():
        assert (DATA / name).read_text(encoding="utf-8") == text, f"{name}: rerun bench/redaction_fresh_gen.py"
    assert not (DATA / "chat_fresh.jsonl").exists() and not (DATA / "clean_chat_fresh.jsonl").exists()


def test_a_different_seed_gives_different_values() -> None:
    assert gen.generate(gen.SEED + 1)[gen.CHAT_HELDOUT] != (DATA / gen.CHAT_HELDOUT).read_text(encoding="utf-8")


def test_credential_rows_have_the_fields_and_a_fresh_split(chat: list[dict]) -> None:
    assert 1200 <= len(chat) <= 1800
    for row in chat:
        assert set(row) == {"family", "template", "split", "secrets", "text", "source"}, row["template"]
        assert row["split"] in (gen.TUNE, gen.HELDOUT) and row["source"] == gen.SOURCE
        assert row["template"].startswith(row["family"] + ".")


@pytest.mark.parametrize(("tune", "heldout"), [(gen.CHAT_TUNE, gen.CHAT_HELDOUT), (gen.CLEAN_TUNE, gen.CLEAN_HELDOUT)])
def test_even_templates_are_for_tuning_and_odd_ones_held_out(tune: str, heldout: str) -> None:
    for name, split, parity in ((tune, gen.TUNE, 0), (heldout, gen.HELDOUT, 1)):
        got = rows(name)
        assert got, name
        for row in got:
            assert row["split"] == split and int(row["template"].rsplit(".", 1)[1]) % 2 == parity, row["template"]
    tune_t, held_t = {r["template"] for r in rows(tune)}, {r["template"] for r in rows(heldout)}
    assert not tune_t & held_t
    assert {r["family"] for r in rows(tune)} == {r["family"] for r in rows(heldout)}


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
        assert row["split"] in (gen.TUNE, gen.HELDOUT)
    assert len({row["text"] for row in clean}) == len(clean)


def test_no_clean_line_repeats_a_credential_row_text(chat: list[dict], clean: list[dict]) -> None:
    secrets = {s for row in chat for s in row["secrets"] if len(s) >= 12}
    assert not any(s in row["text"] for row in clean for s in secrets)


def test_the_eval_names_heldout_misses_by_template_and_never_shows_their_text(chat: list[dict],
                                                                           clean: list[dict]) -> None:
    """`--show` must not leak the held-out texts to whoever tunes the redactor: with a redactor
    that misses everything and changes every clean line, held-out rows appear as family and
    template ids only, while fresh_tune misses and false positives are shown with their text."""
    from types import SimpleNamespace

    from bench.redaction_eval import evaluate, fresh_figures

    keep = evaluate(chat[::15], lambda t: SimpleNamespace(text=t))
    spoil = evaluate(clean[::15], lambda t: SimpleNamespace(text=t + " [changed]"))
    lines, data = fresh_figures(keep, spoil, show=1000)
    shown = "\n".join(lines) + json.dumps(data)
    held = [r for r in keep + spoil if r["row"]["split"] == gen.HELDOUT]
    tune = [r for r in keep + spoil if r["row"]["split"] == gen.TUNE]
    assert held and tune
    assert all(r["missed"] for r in keep) and all(r["changed"] for r in spoil)
    n_held = sum(r["row"]["split"] == gen.HELDOUT for r in keep)
    assert f"0/{n_held}" in shown
    # failures name template ids only, so a failing run cannot print a held-out text either
    unnamed = [r["row"]["template"] for r in held if r["row"]["template"] not in shown]
    leaked = [r["row"]["template"] for r in held
              if r["row"]["text"][:60] in shown or any(s in shown for s in r["row"].get("secrets", []))]
    assert not unnamed and not leaked, (unnamed, leaked)
    tune_miss = next(r for r in keep if r["row"]["split"] == gen.TUNE)
    assert tune_miss["row"]["secrets"][0] in shown
