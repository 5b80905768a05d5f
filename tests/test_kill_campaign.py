"""The kill -9 campaign of issue 10 as a test (slow: `make test-slow`, also run by `make bench`)."""

from __future__ import annotations

import pytest

from bench.kill_campaign import run_campaign


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_twenty_kills_at_random_points_lose_and_duplicate_nothing_in_either_sink(tmp_path):
    r = run_campaign(tmp_path, kills=20, turns=1500, seed=20261122, append_turns=300)
    assert len(r.kills) == 20
    mid = [k for k in r.kills if k.mode == "mid-write"]
    assert mid and all(k.evidence == "sink.write_started" for k in mid)
    assert r.expected > 1500
    assert (r.lost_lancedb, r.lost_qmd, r.duplicated_chunks) == (0, 0, 0)
    assert (r.stale_lancedb, r.stale_qmd, r.tmp_files) == (0, 0, 0)
