"""Benchmarks (issue 4). Run everything with ``make bench`` (``python -m bench.run_all``).

Each module runs on its own (``python -m bench.<name> [--quick]``) and writes
its markdown section to ``bench/out/<name>.md`` plus raw numbers to
``bench/out/<name>.json``. ``bench/out/`` is git-ignored.
"""
