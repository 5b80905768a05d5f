"""The README and docs/ say what the code does: the configuration tables list every key with its
default, the ranking constants are the shipped ones, the LoCoMo figures are those of
bench/RESULTS.md, links lead to files that exist, and the README stays short."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from indexer.core import ranking, time_hints
from indexer.runtime.config import Config

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
GUIDES = sorted((ROOT / "docs").glob("*.md"))
SEARCH = (ROOT / "docs" / "search.md").read_text(encoding="utf-8")
CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")


def test_the_readme_is_short():
    lines = README.count("\n")
    assert lines < 200, f"README.md has {lines} lines: keep it under 200, move the details to docs/"


# -- configuration -------------------------------------------------------------------------------------

#: Keys whose default is derived from another key, or a table of its own: the text the table shows.
DERIVED = {"index.uri": '""', "qmd.export_dir": "<index.dir>/qmd", "index.storage_options": "{}"}


def toml_literal(value) -> str:
    """A default as the tables write it: TOML's spelling (paths and names bare, strings quoted where
    a TOML string is expected)."""
    if value is None:
        return '""'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(f'"{v}"' for v in value) + "]"
    if isinstance(value, Path):
        return str(value)
    return str(value)


def config_defaults() -> dict[str, str]:
    keys: dict[str, str] = {}
    for section, field in Config.model_fields.items():
        model = field.annotation
        if isinstance(model, type) and issubclass(model, BaseModel):
            for name, sub in model.model_fields.items():
                key = f"{section}.{name}"
                keys[key] = DERIVED.get(key, toml_literal(sub.default))
        else:
            keys[f"{section}.<persona>"] = "–"  # [memory]: one key per persona, no default
    return keys


def config_table(markdown: str) -> dict[str, str]:
    """key → the default cell's first code span (or the cell itself), from the table headed `| key |`."""
    rows: dict[str, str] = {}
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| key | default |"))
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        key = cells[0].strip("`[]")
        code = re.match(r"`([^`]*)`", cells[1])
        rows[key] = code.group(1) if code else cells[1]
    return rows


@pytest.mark.parametrize("name, text", [("README.md", README), ("docs/configuration.md", CONFIGURATION)])
def test_the_configuration_table_lists_every_key_with_its_default(name, text):
    expected, table = config_defaults(), config_table(text)
    assert sorted(table) == sorted(expected), (f"{name}: keys missing {sorted(set(expected) - set(table))}, "
                                               f"not in the config {sorted(set(table) - set(expected))}")
    wrong = {key: (table[key], default) for key, default in expected.items()
             if table[key].strip('"') != default.strip('"')}
    assert not wrong, f"{name}: defaults that differ from indexer/runtime/config.py (table, code): {wrong}"


def test_toml_literal_spells_defaults_as_the_tables_do():
    assert [toml_literal(v) for v in (("lancedb",), (), 2.0, 0.5, True, None, Path("/x"))] == [
        '["lancedb"]', "[]", "2", "0.5", "true", '""', "/x"]


# -- search ---------------------------------------------------------------------------------------------

def test_search_guide_states_the_shipped_ranking_constants():
    from indexer.core import calibration

    r = ranking.SHIPPED
    session = ("the session's best turn" if r.session_top == 1 else
               f"mean of the session's {r.session_top} best turns")
    c = calibration.SHIPPED_CALIBRATION
    power = str(int(c.power)).translate(str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹"))
    assert c.power == int(c.power)
    expected = [
        "s/(s+K)" if r.bm25_k is None else f"s/(s+{r.bm25_k:g})",
        f"(f + gate·({r.neighbour_weight:g}·best neighbouring turn + {r.session_weight:.1f}·{session})) / "
        f"{1 + r.neighbour_weight + r.session_weight:g}",
        f"min(1, f/{r.context_gate:g})",
        f"{1 - r.time_weight:g}·score + {r.time_weight:g}·match",
        f"over {time_hints.MARGIN_DAYS:g} days",
        f"x{power} / (x{power} + {c.half:g}{power})",
    ]
    if r.bm25_k is None:
        expected.append("K = ln(1 + N)")
    flat = " ".join(SEARCH.split())
    assert f"`{r.vector_weight:g}·vector + {1 - r.vector_weight:g}·keyword`" in flat
    for text in expected:
        assert " ".join(text.split()) in flat, text


def test_search_guide_quotes_the_locomo_figures_of_the_results():
    results = (ROOT / "bench" / "RESULTS.md").read_text(encoding="utf-8")
    # the figure of the shipped document format (doc-v3's context line), not the older locomo record's
    row = next(line for line in results.splitlines() if "| LoCoMo hybrid recall@10 with the context line" in line)
    loco, r10 = re.search(r"\| (\d+\.\d) leave-one-conversation-out; in-sample (\d+\.\d) ", row).groups()
    flat = " ".join(SEARCH.split())
    assert f"{loco} recall@10" in flat and f"in-sample, measured on the questions they were chosen on: {r10}" in flat


# -- links ----------------------------------------------------------------------------------------------

LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("doc", [ROOT / "README.md", *GUIDES, ROOT / "bench" / "README.md",
                                 ROOT / "bench" / "RESULTS.md", ROOT / "CHANGELOG.md"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_lead_to_files_that_exist(doc):
    text = doc.read_text(encoding="utf-8")
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, fragment = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        if not path.exists() or (fragment and path.suffix == ".md" and fragment not in anchors(path)):
            broken.append(target)
    assert not broken, f"{doc.relative_to(ROOT)}: links to nothing: {broken}"


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of a markdown file (lower case, punctuation dropped,
    spaces as hyphens; a repeated heading gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            if n:
                seen[f"{slug}-{n}"] = 1
    return set(seen)
