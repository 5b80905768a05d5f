"""Every benchmark module imports: `make bench` runs each as its own process, and a stale
import (a renamed helper) would fail only there, an hour into the run."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
MODULES = sorted(p.stem for p in BENCH.glob("*.py") if p.stem != "__init__")


def test_the_benchmarks_are_found() -> None:
    assert {"run_all", "latency", "daemon_bench", "mcp_latency", "locomo", "ann"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_benchmark_module_imports(name: str) -> None:
    module = importlib.import_module(f"bench.{name}")
    assert module.__name__ == f"bench.{name}"
