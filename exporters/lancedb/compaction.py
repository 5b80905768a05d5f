"""The writer's ``optimize`` of a live table: compaction that rewrites what is new, not the table.

lancedb's ``Table.optimize`` runs Lance's compaction with its default options, removes old
versions, then updates every index (each scalar and full-text index merged with the new rows).
Measured on the S3-compatible server (100k rows, 1,000 new documents, ``bench/objectstore_maint.py``):
the index update dominated (15 of 22 s, 1,110 of 1,600 requests), almost all of it the merge of
the ``session`` BITMAP index with the new rows (10.6 s, 1,026 requests: lancedb's ``optimize``
merges every scalar index whole; the full-text merge 1.3 s, every other index < 0.5 s), then the
removal of old versions (5 s, 470 requests: every kept manifest is read); the compaction itself
1-2 s, because Lance 13 keeps fragments under different index segments apart, until the vector
index is re-trained into one segment: then Lance's default target (1M rows a fragment) merges
every fragment of the table and remaps every index. Lance takes the options that avoid both only
through ``pylance`` (its Python API, the version of the Lance lancedb bundles; lancedb 0.40's
``optimize`` takes none); with it the sink runs the steps itself:

- **compaction**, size-tiered: from the newest fragment back, a fragment joins the run while its
  rows are at most the rows of the newer fragments already in it (``TIER_RATIO``); older ones are
  excluded (``excluded_fragment_ids``: Lance merges only within the run), and the run is
  compacted once it has ``MIN_FRAGMENTS`` fragments: a row is rewritten about log2(table /
  batch) times over its life instead of once per re-train of the vector index, and fragments
  under one index segment stay a logarithmic number (simulated: 500 batches of 1,000 rows on a 100k table,
  ~4,200 rows rewritten per batch, at most 10 fragments). A fragment with deleted rows is
  rewritten without them (``DELETED_SHARE``: any; Lance's default waits for 10 %), so the text of
  a deleted or re-masked document leaves the store with the old versions.
- **index update** (:func:`fold`): a scalar index's new rows go into a new segment
  (``num_indices_to_merge=0``: the old segments are not read), merged into one at
  ``MERGE_SEGMENTS``; the full-text and vector indexes are updated as ``optimize`` did.
- **old versions**: removed at most once per ``cleanup_older_than`` per table in a process (every
  optimize before): a version younger than that is kept anyway.

Without pylance (an install that lacks it) the sink calls ``optimize`` as before, logged once.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

log = logging.getLogger("exporters.lancedb")

#: A fragment joins the compaction run while its rows are at most this times the rows of the
#: newer fragments in the run (1: a binary counter; a row is rewritten ~log2(n) times).
TIER_RATIO = 1.0
#: Compact once the run has this many fragments (fewer: left for a later maintenance).
MIN_FRAGMENTS = 4
#: Merge a scalar index's segments into one once it has this many: a filter looks up every
#: segment, a merge reads and writes the index whole (the session BITMAP at 100k: 10.6 s, 1,026
#: requests on S3 against 0.3 s, 12 requests for a new segment).
MERGE_SEGMENTS = 8
#: lancedb's ``index_type`` of the indexes folded as segments
SCALAR_TYPES = ("btree", "bitmap", "labellist")
#: A fragment with more than this share of its rows deleted is rewritten without them. 0: any
#: deleted row. A deleted or updated document's old text (a secret masked later, a session turned
#: private) must leave the store once old versions are removed (tests/test_recurring_secrets.py);
#: Lance's default, 10 %, keeps it in a big fragment for good.
DELETED_SHARE = 0.0
#: The pylance dataset's index cache while folding new rows in (the writer's, kept small).
INDEX_CACHE_BYTES = 256 << 20

_warned_no_pylance = False
#: table URI -> when its old versions were last removed by this process (monotonic seconds)
_last_cleanup: dict[str, float] = {}


@dataclass(frozen=True, slots=True)
class Fragment:
    id: int
    rows: int  # physical rows (deleted ones included: what a rewrite reads)
    deleted: int = 0

    @property
    def live(self) -> int:
        return self.rows - self.deleted


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """Which fragments a compaction may touch; ``run`` empty: nothing to compact now."""

    run: tuple[int, ...] = ()
    excluded: tuple[int, ...] = ()
    rows: int = 0
    #: fragments rewritten only to drop their deleted rows
    purged: tuple[int, ...] = ()

    @property
    def due(self) -> bool:
        return bool(self.run or self.purged)


def plan(fragments: list[Fragment], *, ratio: float = TIER_RATIO, min_fragments: int = MIN_FRAGMENTS,
         deleted_share: float = DELETED_SHARE) -> CompactionPlan:
    """The size-tiered run of the newest fragments (``fragments`` oldest first), see the module doc."""
    run: list[Fragment] = []
    tail = 0
    for f in reversed(fragments):
        if run and f.live > ratio * tail:
            break
        run.append(f)
        tail += f.live
    if len(run) < max(2, min_fragments):
        run = []
    purged = [f for f in fragments if f not in run and f.rows and f.deleted and f.deleted / f.rows > deleted_share]
    keep = {f.id for f in run} | {f.id for f in purged}
    return CompactionPlan(run=tuple(sorted(f.id for f in run)),
                          excluded=tuple(f.id for f in fragments if f.id not in keep),
                          rows=sum(f.rows for f in run) + sum(f.rows for f in purged),
                          purged=tuple(f.id for f in purged))


@dataclass(slots=True)
class OptimizeReport:
    """What one optimize did (logged; the benchmark reads it)."""

    table: str
    how: str  # "steps" (pylance) | "optimize" (lancedb's one call)
    compacted_rows: int = 0
    fragments_before: int = 0
    fragments_after: int = 0
    seconds: dict[str, float] = field(default_factory=dict)


def _fragments(ds) -> list[Fragment]:
    """From the manifest alone (no data file read)."""
    out = []
    for frag in ds.get_fragments():
        m = frag.metadata
        out.append(Fragment(int(m.id), int(m.physical_rows or 0), int(m.num_deletions or 0)))
    return out


def have_pylance() -> bool:
    try:
        import lance  # noqa: F401
    except ImportError:
        return False
    return True


def optimize(tbl, cleanup_older_than: timedelta, *, fence=None, **plan_args: Any) -> OptimizeReport:
    """Compact (size-tiered), fold new rows into the indexes, remove old versions; ``fence`` is
    called before each commit (the writer lease). Without pylance: lancedb's ``optimize``."""
    global _warned_no_pylance
    fence = fence or (lambda: None)
    if not have_pylance():
        if not _warned_no_pylance:
            _warned_no_pylance = True
            log.warning("lancedb: pylance is not installed: maintenance compacts with lancedb's optimize "
                        "(every fragment under 1M rows rewritten); install the project's dependencies")
        started = time.perf_counter()
        fence()
        tbl.optimize(cleanup_older_than=cleanup_older_than)
        return OptimizeReport(tbl.name, "optimize", seconds={"optimize": time.perf_counter() - started})
    import lance

    tbl.checkout_latest()
    ds = tbl.to_lance(index_cache_size_bytes=INDEX_CACHE_BYTES)
    frags = _fragments(ds)
    rep = OptimizeReport(tbl.name, "steps", fragments_before=len(frags))
    p = plan(frags, **plan_args)
    t0 = time.perf_counter()
    if p.due:
        fence()
        ds.optimize.compact_files(excluded_fragment_ids=list(p.excluded), materialize_deletions_threshold=DELETED_SHARE)
        rep.compacted_rows = p.rows
    t1 = time.perf_counter()
    ds = lance.dataset(ds.uri, storage_options=_options(tbl), index_cache_size_bytes=INDEX_CACHE_BYTES)
    fold(tbl, ds, fence)
    t2 = time.perf_counter()
    last = _last_cleanup.get(ds.uri)
    if last is None or time.monotonic() - last >= cleanup_older_than.total_seconds():
        fence()
        ds.cleanup_old_versions(older_than=cleanup_older_than)
        _last_cleanup[ds.uri] = time.monotonic()
    t3 = time.perf_counter()
    tbl.checkout_latest()
    rep.fragments_after = len(ds.get_fragments())
    rep.seconds = {"compaction": t1 - t0, "index update": t2 - t1, "old versions": t3 - t2}
    log.info("lancedb: optimized %s: compacted %d rows (%d -> %d fragments), %s", tbl.name, rep.compacted_rows,
             rep.fragments_before, rep.fragments_after,
             ", ".join(f"{k} {v:.2f} s" for k, v in rep.seconds.items()))
    return rep


def fold(tbl, ds, fence) -> dict[str, str]:
    """Fold new rows into the indexes that leave rows out: a scalar index (BTREE, BITMAP) gets a new
    segment, merged into one once it has ``MERGE_SEGMENTS``; the full-text and vector indexes are
    updated as lancedb's ``optimize`` does (the full-text index merged: its BM25 statistics stay
    one index's; the vector index a delta until a re-train). {index: "delta"|"merge"|"update"}."""
    tbl.checkout_latest()
    done: dict[str, str] = {}
    for ix in tbl.list_indices():
        segments = int(getattr(ix, "num_segments", 1) or 1)
        scalar = str(ix.index_type).lower() in SCALAR_TYPES
        if scalar and segments >= MERGE_SEGMENTS:
            done[ix.name] = "merge"
        elif int(getattr(ix, "num_unindexed_rows", 0) or 0) > 0:
            done[ix.name] = "delta" if scalar else "update"
    delta = [n for n, how in done.items() if how == "delta"]
    if delta:
        fence()
        ds.optimize.optimize_indices(index_names=delta, num_indices_to_merge=0)
    update = [n for n, how in done.items() if how == "update"]
    if update:
        fence()
        ds.optimize.optimize_indices(index_names=update)
    for name in (n for n, how in done.items() if how == "merge"):  # with the new rows
        fence()
        ds.optimize.optimize_indices(index_names=[name], num_indices_to_merge=MERGE_SEGMENTS + 1)
    return done


def _options(tbl) -> dict[str, str] | None:
    conn = getattr(tbl, "_conn", None)
    opts = getattr(conn, "storage_options", None)
    return dict(opts) if opts else None
