"""The index on object storage: how the writer and the readers open it.

The writer (:func:`open_remote_writer`, called by :class:`LanceSink`) takes the
writer lease, then reads the table pointer ``_active`` and publishes the scope
state ``_scopes`` — every commit it makes is preceded by the lease check.
Processes that only change scope state (``session visibility`` or ``project``
from the CLI with no daemon running) take the lease for that change alone
(:func:`open_publisher`). Readers (:func:`open_remote_reader`) need nothing but
the URI and its storage options.
"""

from __future__ import annotations

import socket
from pathlib import Path

from exporters.base import SinkError
from exporters.lancedb.lease import LeaseHeld, WriterLease
from exporters.lancedb.location import IndexLocation
from exporters.lancedb.pointer import TablePointer
from exporters.lancedb.published import PublishedScopes, ScopePublisher
from exporters.lancedb.store import _connect


def _connect_checked(location: IndexLocation, *, reader: bool, session=None):
    try:
        return _connect(location, reader=reader, session=session)
    except Exception as e:
        raise SinkError(f"lancedb: cannot open {location.describe()}: {e}. Check index.uri and "
                        "[index.storage_options] (credentials, aws_endpoint, aws_region, allow_http)") from e


def open_remote_writer(location: IndexLocation, *, role: str, writer_dir: Path | None):
    """(connection, lease, pointer, publisher) of the one writer of an object-store index.
    Raises :class:`LeaseHeld` when another writer holds it."""
    db = _connect_checked(location, reader=False)
    lease = WriterLease.acquire(db, where=location.describe(), ttl=location.lease, role=role,
                                writer_dir=writer_dir, holds_local_lock=writer_dir is not None,
                                reconnect=lambda: location.connect(reader=True))
    try:
        pointer = TablePointer(db, reader=False, where=f"{location.describe()}/_active", before_commit=lease.check)
        publisher = ScopePublisher(db, location.describe(), before_commit=lease.check,
                                   writer={"hostname": socket.gethostname(), "epoch": lease.epoch,
                                           "index_dir": str(writer_dir) if writer_dir else None})
    except BaseException:
        lease.release()
        raise
    return db, lease, pointer, publisher


def open_publisher(location: IndexLocation, *, role: str, writer_dir: Path | None) -> ScopePublisher:
    """A publisher holding its own lease (released by ``close()``), for a scope change made
    while no writer runs."""
    db = _connect_checked(location, reader=False)
    lease = WriterLease.acquire(db, where=location.describe(), ttl=location.lease, role=role,
                                writer_dir=writer_dir, holds_local_lock=writer_dir is not None,
                                reconnect=lambda: location.connect(reader=True))
    return ScopePublisher(db, location.describe(), before_commit=lease.check, on_close=lease.release,
                          writer={"hostname": socket.gethostname(), "epoch": lease.epoch,
                                  "index_dir": str(writer_dir) if writer_dir else None})


def open_remote_reader(location: IndexLocation, session=None):
    """(connection, pointer, published scopes) for a reader: refreshed at most every ``location.refresh``.
    ``session``: the LanceDB session (caches) to share with the reader's local copies."""
    db = _connect_checked(location, reader=True, session=session)
    refresh = location.refresh.total_seconds()
    pointer = TablePointer(db, reader=True, refresh_s=refresh, where=f"{location.describe()}/_active")
    return db, pointer, PublishedScopes(db, location.describe(), refresh_s=refresh)


__all__ = ["LeaseHeld", "open_publisher", "open_remote_reader", "open_remote_writer"]
