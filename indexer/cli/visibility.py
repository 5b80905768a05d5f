"""Changing a session's visibility, applied to every sink at once.

The state DB is the source of truth for scopes (LanceDB queries read it at
query time); a sink without scopes (the QMD export) must also lose a private
session's files, and get them back when the session is shared again.
``apply_visibility`` does both. Only the writer may touch the export: when a
daemon holds the index, the change is handed to it over its admin API.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from indexer.cli.common import CliError
from indexer.runtime.config import Config
from indexer.state.lock import LockHeldError, acquire


@dataclass(frozen=True)
class VisibilityChange:
    label: str
    visibility: str
    removed: int      # documents taken out of sinks without scopes
    restored: int     # documents put back into them
    via_daemon: bool  # applied by the running daemon


def apply_visibility(config: Config, label: str, visibility: str) -> VisibilityChange:
    """Set ``label`` private or shared and bring every sink in line.

    Raises CliError for an unknown session, or when a running daemon cannot
    be reached (the message says what to do).
    """
    try:
        lock = acquire(config.index.dir, "change visibility")
    except LockHeldError as exc:
        if exc.holder is None or exc.holder.role != "run":
            raise CliError(str(exc)) from None  # a one-off sync or reindex: retry when it is done
        return _through_daemon(config, label, visibility)
    try:
        return _apply_here(config, label, visibility)
    finally:
        lock.release()


def _apply_here(config: Config, label: str, visibility: str) -> VisibilityChange:
    """No daemon runs: the same ``apply_visibility`` the daemon calls, over the
    sinks without scopes only (LanceDB applies visibility at query time)."""
    from indexer.sync.context import Indexer, build_sinks
    from indexer.sync.visibility import apply_visibility as apply_to_sinks

    unscoped = [name for name in config.index.sinks if name == "qmd"]
    only_unscoped = config.model_copy(update={"index": config.index.model_copy(update={"sinks": unscoped})})
    publisher = scope_publisher(config, "change visibility")
    ix = Indexer(config, sinks=build_sinks(only_unscoped), publisher=publisher)
    try:
        applied = apply_to_sinks(ix, label, visibility)
    finally:
        ix.close()
    if applied is None:
        raise CliError(f"unknown session {label!r}: sync first, or check the label (it is case-sensitive)")
    return VisibilityChange(label, visibility, applied.removed, applied.restored, via_daemon=False)


def scope_publisher(config: Config, role: str):
    """Object storage: a publisher of the scope state holding the writer lease for this one
    change (the caller holds the local writer lock); None for a local index."""
    if not (config.index.object_store and "lancedb" in config.index.sinks):
        return None
    from exporters.base import SinkError
    from exporters.lancedb.location import IndexLocation
    from exporters.lancedb.objectstore import open_publisher

    try:
        return open_publisher(IndexLocation.from_config(config), role=role, writer_dir=config.index.dir)
    except SinkError as exc:
        raise CliError(str(exc)) from None


def _through_daemon(config: Config, label: str, visibility: str) -> VisibilityChange:
    from indexer.cli.client import _base_url, _token

    base = _base_url(config)
    token = _token(config, "session visibility")
    try:
        response = httpx.put(base + "/v1/admin/sessions/visibility", json={"label": label, "visibility": visibility},
                             headers={"Authorization": f"Bearer {token}"}, timeout=30)
    except httpx.HTTPError as exc:
        raise CliError(f"a daemon holds the index but its API did not answer ({exc}); "
                       "check `journalctl -u ledger-indexer`") from None
    if response.status_code == 404:
        raise CliError(f"unknown session {label!r}: sync first, or check the label (it is case-sensitive)")
    if response.status_code >= 400:
        raise CliError(f"the daemon refused the change ({response.status_code}): {response.text}")
    # The API answers with the new visibility only; the daemon has applied it
    # to the export before answering.
    return VisibilityChange(label, visibility, 0, 0, via_daemon=True)
