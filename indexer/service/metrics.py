"""Prometheus metrics for the daemon and its HTTP API.

One :class:`Metrics` object per daemon (or per test), each with its own
``CollectorRegistry`` — never the process-global default registry, so tests
can build several apps side by side and a second daemon object in the same
process does not fail with "Duplicated timeseries".

The daemon feeds the sync side (:meth:`Metrics.observe_sync`,
:meth:`Metrics.set_lag`, :meth:`Metrics.set_documents`, …); the API feeds the
query side (:meth:`Metrics.observe_query`, :meth:`Metrics.observe_request`)
and serves :meth:`Metrics.render` at ``GET /metrics``.

Label values are bounded on purpose: ``persona`` comes from the configured
personas, ``route`` is the route *template* (``/v1/memory_get``, never the raw
path or query string), ``mode`` is one of the search modes. Nothing a client
sends can create a new time series except through those closed sets.
All prometheus_client objects are thread-safe.

Process figures: prometheus_client's process collector, registered in this
registry (``process_resident_memory_bytes``, ``process_virtual_memory_bytes``,
``process_cpu_seconds_total``, ``process_open_fds``, …), plus
``ledger_indexer_process_peak_resident_memory_bytes`` (VmHWM: the most the
process has ever held, e.g. during a backfill). Memory figures are read when scraped. ``ledger_indexer_build_info``
(always 1) carries what the process runs as labels: package, Python, LanceDB and
fastembed versions, its role (``run``/``serve``), the embedding model, document
format, redaction ruleset and how its searcher reads the index (``index_reads``).
"""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from indexer.embedding import native_memory

__all__ = ["CLIENT_CLOSED_REQUEST", "CONTENT_TYPE", "Metrics"]

CONTENT_TYPE = CONTENT_TYPE_LATEST

#: ``status`` of a request whose client closed the connection before any answer (nginx's "client
#: closed request"): the client's doing, kept out of the 5xx an alert watches.
CLIENT_CLOSED_REQUEST = 499

# Syncs: a tail batch is ~10 ms .. seconds; a backfill of a big persona is minutes.
_SYNC_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 1800)
# Queries: fastembed query embedding + LanceDB, a few ms .. a few hundred ms on a small box.
_QUERY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


def software_versions() -> dict[str, str]:
    """Installed versions, read from package metadata (no import of the packages)."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for key, dist in (("version", "ledger-indexer"), ("lancedb", "lancedb"), ("fastembed", "fastembed")):
        try:
            out[key] = version(dist)
        except PackageNotFoundError:
            out[key] = "unknown"
    return out


class _RankCacheRows:
    """``ledger_indexer_rank_cache_rows_total{source="memory"|"table"}``: counters kept by the cache."""

    def __init__(self, caches) -> None:
        self._caches = caches

    def describe(self):
        return []

    def collect(self):
        family = CounterMetricFamily("ledger_indexer_rank_cache_rows", "Search candidates whose rank columns "
                                     "came from memory or had to be read from the table.", labels=["source"])
        family.add_metric(["memory"], self._caches.hits)
        family.add_metric(["table"], self._caches.misses)
        yield family


class Metrics:
    """The metric objects of one daemon, registered in their own registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        # prometheus_client appends "_total" to counter names in the exposition.
        self.syncs = Counter("ledger_indexer_syncs", "Sync batches run (successful or not).", registry=r)
        self.sync_errors = Counter("ledger_indexer_sync_errors", "Sync batches that failed.", registry=r)
        self.sync_duration = Histogram("ledger_indexer_sync_duration_seconds", "Wall time of one sync batch.",
                                       buckets=_SYNC_BUCKETS, registry=r)
        self.documents_written = Counter("ledger_indexer_documents_written",
                                         "Documents written to the sinks (changed hashes only).", registry=r)
        self.bad_rows_skipped = Counter("ledger_indexer_bad_rows_skipped",
                                        "Ledger rows or documents skipped as bad data.", ["persona"], registry=r)
        self.last_success = Gauge("ledger_indexer_last_successful_sync_timestamp_seconds",
                                  "Unix time of the last successful sync batch (0: none yet).", registry=r)
        self.lag_rows = Gauge("ledger_indexer_lag_rows",
                              "session_history rows in the ledger after the persona's cursor.", ["persona"],
                              registry=r)
        self.documents = Gauge("ledger_indexer_documents", "Documents in the index.", ["persona"], registry=r)
        self.ready = Gauge("ledger_indexer_ready", "1 when the index is open and the first sync is done.",
                           registry=r)
        self.query_duration = Histogram("ledger_indexer_query_duration_seconds",
                                        "memory_search latency, by search mode.", ["mode"],
                                        buckets=_QUERY_BUCKETS, registry=r)
        self.http_requests = Counter("ledger_indexer_http_requests",
                                     "HTTP requests, by route template and status code (499: the client "
                                     "closed the connection before the answer).",
                                     ["route", "status"], registry=r)
        self.search_warnings = Counter("ledger_indexer_search_warnings",
                                       "memory_search answers that came with a warning (a stage failed), "
                                       "by warning code.", ["code"], registry=r)
        # process_* (resident and virtual memory, CPU, fds, start time): this registry, not the global one
        self.process = ProcessCollector(registry=r)
        self.peak_rss = Gauge("ledger_indexer_process_peak_resident_memory_bytes",
                              "The most resident memory the process has had (VmHWM), e.g. during a backfill.",
                              registry=r)
        self.peak_rss.set_function(native_memory.peak_rss_bytes)
        self.build = Info("ledger_indexer_build", "What this process runs: package version, Python, LanceDB, "
                          "and (once the index is open) the embedding model, document format and redaction "
                          "ruleset the index is built with.", registry=r)
        self._build_labels = software_versions()
        self.build.info(self._build_labels)

    def watch_rank_cache(self, caches) -> None:
        """Export a searcher's in-memory rank columns (``exporters.lancedb.rank_cache.RankCaches``):
        their bytes, and the candidate rows served from memory or read from the tables."""
        Gauge("ledger_indexer_rank_cache_bytes", "Memory held by the rank columns of live tables "
              "([index] rank_cache_mb bounds it).", registry=self.registry).set_function(lambda: caches.nbytes)
        self.registry.register(_RankCacheRows(caches))

    def set_build_info(self, **labels: str) -> None:
        """Add to ``ledger_indexer_build_info`` (e.g. ``role``, ``model``, ``redaction``)."""
        self._build_labels = {**self._build_labels, **{k: str(v) for k, v in labels.items()}}
        self.build.info(self._build_labels)

    # -- sync side (the daemon) -----------------------------------------------------------

    def observe_sync(self, seconds: float, written: int, ok: bool) -> None:
        """One sync batch: its duration, the documents it wrote, and whether it succeeded."""
        self.syncs.inc()
        self.sync_duration.observe(max(0.0, float(seconds)))
        if written > 0:
            self.documents_written.inc(written)
        if ok:
            self.last_success.set(time.time())
        else:
            self.sync_errors.inc()

    def set_lag(self, persona: str, rows: int) -> None:
        self.lag_rows.labels(persona=persona).set(max(0, int(rows)))

    def set_documents(self, persona: str, count: int) -> None:
        self.documents.labels(persona=persona).set(max(0, int(count)))

    def add_bad_rows(self, persona: str, count: int = 1) -> None:
        if count > 0:
            self.bad_rows_skipped.labels(persona=persona).inc(count)

    def set_ready(self, ready: bool) -> None:
        self.ready.set(1 if ready else 0)

    # -- query side (the API) ---------------------------------------------------------------

    def observe_query(self, mode: str, seconds: float) -> None:
        self.query_duration.labels(mode=mode).observe(max(0.0, float(seconds)))

    def observe_warnings(self, codes) -> None:
        for code in codes:
            self.search_warnings.labels(code=code).inc()

    def observe_request(self, route: str, status: int) -> None:
        self.http_requests.labels(route=route, status=str(status)).inc()

    # -- exposition ---------------------------------------------------------------------------

    def render(self) -> bytes:
        """The Prometheus text exposition format (``CONTENT_TYPE``)."""
        return generate_latest(self.registry)
