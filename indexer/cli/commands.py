"""What the CLI commands do, separated from argument parsing (``indexer.cli``)."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Sequence

import peewee
import structlog

from exporters.base import SinkError
from indexer.cli.common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, CliError, invalid_line
from indexer.cli.common import print_json as _print_json
from indexer.cli.progress_bar import ProgressBar
from indexer.cli.storage_door import command_places, named_storage, storage_refusal
from indexer.runtime.config import Config
from indexer.state.db import StateDB
from indexer.state.lock import LockHeldError, acquire, read_holder
from indexer.sync.progress import Progress
from ledger.connection import LedgerUnavailable

log = structlog.get_logger("indexer.cli")


def _index_dir(config: Config) -> None:
    """The index folder exists (created when missing), or a one-line error saying why not."""
    try:
        config.index.dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        named = storage_refusal(exc, [config.index.dir], f"creating the index folder {config.index.dir}")
        raise named or CliError(f"cannot create the index folder {config.index.dir}: {exc.strerror or exc}; "
                                "set [index] dir to a writable folder") from None


def _writer_lock(config: Config, role: str):
    _index_dir(config)
    try:
        return acquire(config.index.dir, role)
    except LockHeldError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:  # the lock file cannot be written: a read-only file system, permission
        named = storage_refusal(exc, [config.index.dir], f"{role} (taking the writer lock)")
        if named is None:
            raise
        raise named from None


def run_sync(config: Config, *, force: bool = False, personas: Sequence[str] | None = None,
             as_json: bool = False, progress: Progress | None = None, retry_bad: bool = False,
             bar: ProgressBar | None = None) -> int:
    """One sync pass here, under the writer lock. ``progress``: where the counts go (default:
    ``bar``, or a new one: a bar in documents on a terminal, ``sync.progress`` log events
    elsewhere). A bar is closed here."""
    from indexer.sync.context import open_indexer
    from indexer.sync.engine import UnknownPersonas, sync_once

    with _writer_lock(config, "reindex" if force else "sync"):
        with named_storage(command_places(config), "reindex" if force else "sync"):
            ix = open_indexer(config, role="reindex" if force else "sync")
        if bar is None and progress is None:
            bar = ProgressBar("reindex" if force else "sync")
        try:
            summary = sync_once(ix, force=force, personas=personas, progress=progress or bar,
                                retry_bad=retry_bad)
        except LedgerUnavailable as exc:
            raise CliError(str(exc)) from None
        except UnknownPersonas as exc:
            raise CliError(str(exc), EXIT_USAGE) from None
        except SinkError as exc:
            raise CliError(f"{exc} — nothing was lost: cursor and hashes are unchanged; rerun sync") from None
        except (OSError, sqlite3.Error, peewee.PeeweeException) as exc:
            from indexer.core.errors import describe

            named = storage_refusal(exc, command_places(config), "reindex" if force else "sync")
            if named is not None:
                raise CliError(f"{named} — the last committed batch is intact; rerun sync after the fix") from None
            raise CliError(f"sync failed: {describe(exc)} — the last committed batch is intact; fix the cause "
                           "(disk space, permissions) and rerun sync") from None
        finally:
            if bar is not None:
                bar.close()
            ix.close()
    data = summary.as_dict()
    if as_json:
        _print_json(data)
    else:
        for persona, ps in summary.personas.items():
            print(f"{persona}: {ps.mode}, {ps.documents_written} written, {ps.documents_unchanged} unchanged, "
                  f"{ps.documents_skipped_bad} skipped (bad rows), {ps.documents_deleted} deleted, "
                  f"cursor {ps.cursor}")
        print(f"{data['documents_written']} documents written in {data['seconds']:.2f} s")
    return EXIT_OK


def run_reindex(config: Config, *, personas: Sequence[str] | None = None, as_json: bool = False) -> int:
    """Ask a running daemon to reindex and follow it; run it here when no daemon runs."""
    holder = read_holder(config.index.dir) if config.index.dir.exists() else None
    if holder is not None and holder.role == "run":
        from indexer.cli.client import follow_reindex

        return follow_reindex(config, personas=personas, as_json=as_json)
    return run_sync(config, force=True, personas=personas, as_json=as_json)


def _state(config: Config) -> StateDB:
    _index_dir(config)
    try:
        return StateDB(config.state_db_path)
    except (OSError, sqlite3.Error, peewee.PeeweeException) as exc:
        from indexer.core.errors import describe

        named = storage_refusal(exc, [config.index.dir], f"opening the state database {config.state_db_path}")
        if named is not None:
            raise named from None
        raise CliError(f"cannot open the state database {config.state_db_path}: {describe(exc)}; check that "
                       "the index folder is writable") from None


def run_project(config: Config, args) -> int:
    if args.action != "list" and config.index.object_store and "lancedb" in config.index.sinks:
        return _project_published(config, args)
    state = _state(config)
    try:
        if args.action == "list":
            projects = state.projects()
            if getattr(args, "json", False):
                _print_json({"projects": projects})
            else:
                for name, labels in projects.items():
                    print(f"{name}: {', '.join(labels)}")
            return EXIT_OK
        if args.action == "add":
            unknown = [lbl for lbl in args.labels if state.session(lbl) is None]
            state.project_add(args.name, args.labels)
            for lbl in unknown:
                print(f"note: session {lbl!r} is not indexed yet; it joins {args.name!r} when it is",
                      file=sys.stderr)
            print(f"{args.name}: added {len(args.labels)} session(s)")
        else:
            removed = state.project_remove(args.name, args.labels)
            print(f"{args.name}: removed {removed} session(s)")
        return EXIT_OK
    finally:
        state.close()


def _project_published(config: Config, args) -> int:
    """Object storage: a project change must reach readers on other machines at once, so the
    one writer makes it: the running daemon (through its admin API), or this process holding
    the writer lock and lease, publishing before the state DB commits."""
    from indexer.cli.visibility import scope_publisher

    holder = read_holder(config.index.dir) if config.index.dir.exists() else None
    if holder is not None and holder.role == "run":
        return _project_through_daemon(config, args)
    with _writer_lock(config, "change a project"):
        publisher = scope_publisher(config, "change a project")
        state = _state(config)
        try:
            unknown = [lbl for lbl in args.labels if state.session(lbl) is None]
            try:
                with publisher.change(state):
                    if args.action == "add":
                        state.project_add(args.name, args.labels)
                    else:
                        removed = state.project_remove(args.name, args.labels)
            except SinkError as exc:
                raise CliError(f"{exc} — the change was not made") from None
        finally:
            state.close()
            publisher.close()
    if args.action == "add":
        for lbl in unknown:
            print(f"note: session {lbl!r} is not indexed yet; it joins {args.name!r} when it is", file=sys.stderr)
        print(f"{args.name}: added {len(args.labels)} session(s) (published)")
    else:
        print(f"{args.name}: removed {removed} session(s) (published)")
    return EXIT_OK


def _project_through_daemon(config: Config, args) -> int:
    import httpx

    from indexer.cli.client import _base_url, _token

    base = _base_url(config)
    from urllib.parse import quote

    path = f"/v1/admin/projects/{quote(args.name, safe='')}/sessions" + ("" if args.action == "add" else "/remove")
    token = _token(config, f"project {args.action}")
    try:
        response = httpx.post(base + path, json={"labels": list(args.labels)},
                              headers={"Authorization": f"Bearer {token}"}, timeout=30)
    except httpx.HTTPError as exc:
        raise CliError(f"a daemon holds the index but its API did not answer ({exc}); "
                       "check `journalctl -u ledger-indexer`") from None
    if response.status_code >= 400:
        raise CliError(f"the daemon refused the change ({response.status_code}): {response.text}")
    data = response.json()
    if args.action == "add":
        for lbl in data.get("unknown", []):
            print(f"note: session {lbl!r} is not indexed yet; it joins {args.name!r} when it is", file=sys.stderr)
        print(f"{args.name}: added {len(args.labels)} session(s) (applied by the running daemon)")
    else:
        print(f"{args.name}: removed {data.get('removed', 0)} session(s) (applied by the running daemon)")
    return EXIT_OK


def run_visibility(config: Config, label: str, visibility: str) -> int:
    from indexer.cli.visibility import apply_visibility

    _index_dir(config)
    change = apply_visibility(config, label, visibility)
    where = " (applied by the running daemon)" if change.via_daemon else ""
    export = f"; export: {change.removed} removed, {change.restored} restored" if (change.removed or
                                                                                     change.restored) else ""
    print(f"{label}: {visibility}{where}{export}")
    return EXIT_OK


def run_search_batch(config: Config, source: str, *, as_json: bool = True) -> int:
    """One request per line in, one response per line out, in order; the model loads once."""
    from pydantic import ValidationError

    from indexer.search.searcher import Searcher, SearchError, SearchRequest

    try:
        stream = sys.stdin if source == "-" else open(source, encoding="utf-8", errors="replace")
    except OSError as exc:
        raise CliError(f"cannot read --batch {source}: {exc.strerror or exc} (a file of JSON lines, or - for stdin)",
                       EXIT_USAGE) from None
    try:
        searcher = Searcher.open(config)
    except SearchError:
        if stream is not sys.stdin:
            stream.close()
        raise  # a Failure: the CLI's door gives it its exit code
    failures = 0
    try:
        for number, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            request_id = None
            try:
                data = json.loads(line)
                if not isinstance(data, dict):
                    raise ValueError("each line must be a JSON object")
                request_id = data.pop("id", None)
                response = searcher.search(SearchRequest.model_validate(data)).as_dict()
            except (json.JSONDecodeError, ValueError, ValidationError, SearchError) as exc:
                failures += 1
                response = {"error": f"line {number}: {invalid_line(exc)}"}
            if request_id is not None:
                response = {"id": request_id, **response}
            _print_json(response)
    finally:
        searcher.close()
        if stream is not sys.stdin:
            stream.close()
    return EXIT_OK if failures == 0 else EXIT_FAIL
