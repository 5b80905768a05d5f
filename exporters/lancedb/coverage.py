"""How much of a table its indexes cover, and when a writer folds new rows in.

Rows a write appends are searched flat beside every index (full text, scalar,
vector) until an ``optimize`` folds them in. The daemon's maintenance does that
on a schedule, but a writer driven by the CLI (cron, a one-shot backfill before
``serve``) has no schedule: at the end of each pass that wrote, the sink folds a
table in when its unindexed rows are a large share (:func:`fold_due`), so a
backfill leaves an indexed table and a tail pass of a few turns stays a write.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Fold when more than this share of a table's rows is outside an index: at most 5 % of a
#: table is ever searched flat after a pass (the coverage the issue asks: >= 95 %).
FOLD_SHARE = 0.05
#: ... and at least this many rows: a flat scan of a few hundred rows costs less than a fold.
FOLD_MIN_ROWS = 256


@dataclass(frozen=True, slots=True)
class Coverage:
    """A table's rows, and the most rows any one of its indexes leaves out."""

    rows: int
    unindexed: int
    #: the index leaving the most out (None when every index covers every row)
    worst: str | None = None

    @property
    def share(self) -> float:
        return self.unindexed / self.rows if self.rows else 0.0


def coverage(tbl) -> Coverage:
    """One ``list_indices`` (index metadata, no data read) and a row count from the manifest."""
    worst, unindexed = None, 0
    for ix in tbl.list_indices():
        n = int(getattr(ix, "num_unindexed_rows", 0) or 0)
        if n > unindexed:
            worst, unindexed = ix.name, n
    return Coverage(int(tbl.count_rows()), unindexed, worst)


def fold_due(cov: Coverage, *, share: float = FOLD_SHARE, min_rows: int = FOLD_MIN_ROWS) -> bool:
    return cov.unindexed >= max(min_rows, share * cov.rows)


def fold_written(sink, written: list[tuple[str, str]]) -> None:
    """The end of a writer's pass (``LanceSink.after_batch``, under its lock): fold each written
    live table's new rows into its indexes when :func:`fold_due`, and build its vector index once
    big enough. Never raises: a table not folded is searched flat until maintenance folds it."""
    import logging
    import time

    log = logging.getLogger("exporters.lancedb")
    for persona, name in written:
        entry = sink._active["personas"].get(persona)
        if entry is None or entry.get("table") != name:
            continue  # swapped out by a rebuild (which folded its table before the switch)
        started = time.perf_counter()
        try:
            tbl = sink._open(name)
            before = coverage(tbl)
            if not fold_due(before):
                continue
            sink._optimize(tbl)
            built = sink._maintain_vector_index(tbl, persona, entry)
        except Exception as e:  # the data is intact; searched flat until maintenance folds it
            log.warning("lancedb: cannot fold new rows of %s into its indexes: %s", name, e)
            continue
        log.info("lancedb: folded %d unindexed rows of %s (%d rows) into its indexes in %.2f s%s",
                 before.unindexed, name, before.rows, time.perf_counter() - started,
                 f"; vector index built ({built['reason']})" if built else "")
