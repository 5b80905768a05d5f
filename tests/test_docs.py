"""The README says what the code does: ranking constants, and the benchmark table
agrees with bench/RESULTS.md."""

from __future__ import annotations

import re
from pathlib import Path

from indexer import ranking, time_hints

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_states_the_shipped_ranking_constants():
    r = ranking
    expected = [
        f"s/(s+{r.BM25_K:g})",
        f"{r.NEIGHBOUR_WEIGHT:g}·best",
        f"{r.SESSION_WEIGHT:.1f}·mean of the session's {r.SESSION_TOP} best turns) / "
        f"{1 + r.NEIGHBOUR_WEIGHT + r.SESSION_WEIGHT:g}",
        f"{1 - r.TIME_WEIGHT:g}·score + {r.TIME_WEIGHT:g}·match",
        f"over {time_hints.MARGIN_DAYS:g} days",
    ]
    flat = " ".join(README.split())
    assert f"`{r.VECTOR_WEIGHT:g}·vector + {1 - r.VECTOR_WEIGHT:g}·keyword`" in flat
    for text in expected:
        assert " ".join(text.split()) in flat, text


def test_readme_benchmark_table_matches_results():
    results = (ROOT / "bench" / "RESULTS.md").read_text(encoding="utf-8")
    row = next(line for line in results.splitlines() if line.startswith("| LoCoMo hybrid recall@10"))
    r10, r5, r25 = re.search(r"\| (\d+\.\d) \(R@5 (\d+\.\d), R@25 (\d+\.\d)\)", row).groups()
    table = README[README.index("<!-- bench-table:start -->"):README.index("<!-- bench-table:end -->")]
    assert f"{r5} / {r10} / {r25}" in table
    met = row.rstrip(" |").endswith("yes")
    assert ("@10 ≥ 70: met" in table) == met
