"""The README says what the code does: ranking constants, and the benchmark table
agrees with bench/RESULTS.md."""

from __future__ import annotations

import re
from pathlib import Path

from indexer.core import ranking
from indexer.core import time_hints

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_states_the_shipped_ranking_constants():
    r = ranking.SHIPPED
    expected = [
        f"s/(s+{r.bm25_k:g})",
        f"{r.neighbour_weight:g}·best",
        f"{r.session_weight:.1f}·mean of the session's {r.session_top} best turns) / "
        f"{1 + r.neighbour_weight + r.session_weight:g}",
        f"{1 - r.time_weight:g}·score + {r.time_weight:g}·match",
        f"over {time_hints.MARGIN_DAYS:g} days",
    ]
    flat = " ".join(README.split())
    assert f"`{r.vector_weight:g}·vector + {1 - r.vector_weight:g}·keyword`" in flat
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
