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
    flat = " ".join(README.split())
    assert f"`{r.vector_weight:g}·vector + {1 - r.vector_weight:g}·keyword`" in flat
    for text in expected:
        assert " ".join(text.split()) in flat, text


def test_readme_benchmark_table_matches_results():
    results = (ROOT / "bench" / "RESULTS.md").read_text(encoding="utf-8")
    row = next(line for line in results.splitlines() if line.startswith("| LoCoMo hybrid recall@10"))
    loco, r10, r5, r25 = re.search(
        r"\| (\d+\.\d) leave-one-conversation-out; in-sample (\d+\.\d) \(R@5 (\d+\.\d), R@25 (\d+\.\d)\)",
        row).groups()
    table = README[README.index("<!-- bench-table:start -->"):README.index("<!-- bench-table:end -->")]
    assert f"**{loco} leave-one-conversation-out**" in table
    assert f"{r5} / {r10} / {r25}" in table
    met = row.rstrip(" |").endswith("yes")
    assert ("@10 ≥ 70: met" in table) == met
    flat = " ".join(README.split())
    assert f"{loco} recall@10" in flat and f"in-sample, measured on the questions they were chosen on: {r10}" in flat
