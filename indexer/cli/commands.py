"""What the CLI commands do, separated from argument parsing (``indexer.cli``)."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Sequence

import peewee
import structlog

from exporters.base import SinkError
from indexer.cli.common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, CliError
from indexer.cli.common import print_json as _print_json
from indexer.runtime.config import Config
from indexer.service.status import status_report
from indexer.state.db import StateDB
from indexer.state.lock import LockHeldError, acquire, read_holder
from ledger.connection import LedgerUnavailable

log = structlog.get_logger("indexer.cli")


def _writer_lock(config: Config, role: str):
    config.index.dir.mkdir(parents=True, exist_ok=True)
    try:
        return acquire(config.index.dir, role)
    except LockHeldError as exc:
        raise CliError(str(exc)) from None


def _tqdm_progress():
    from tqdm import tqdm

    bars: dict[str, tqdm] = {}

    def progress(persona: str, done: int, total: int) -> None:
        if done < 0:  # a heartbeat, not a position
            return
        bar = bars.get(persona)
        if bar is None:
            bar = bars[persona] = tqdm(total=total, desc=f"reindex {persona}", unit="session", file=sys.stderr,
                                       disable=not sys.stderr.isatty())
        bar.n = done
        bar.refresh()
        if done >= total:
            bar.close()

    return progress


def run_sync(config: Config, *, force: bool = False, personas: Sequence[str] | None = None,
             as_json: bool = False, progress=None, retry_bad: bool = False) -> int:
    from indexer.sync.context import open_indexer
    from indexer.sync.engine import sync_once

    with _writer_lock(config, "reindex" if force else "sync"):
        ix = open_indexer(config)
        try:
            summary = sync_once(ix, force=force, personas=personas, progress=progress, retry_bad=retry_bad)
        except LedgerUnavailable as exc:
            raise CliError(str(exc)) from None
        except SinkError as exc:
            raise CliError(f"{exc} — nothing was lost: cursor and hashes are unchanged; rerun sync") from None
        except (OSError, sqlite3.Error, peewee.PeeweeException) as exc:
            from indexer.core.errors import describe

            raise CliError(f"sync failed: {describe(exc)} — the last committed batch is intact; fix the cause "
                           "(disk space, permissions) and rerun sync") from None
        finally:
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
    return run_sync(config, force=True, personas=personas, as_json=as_json, progress=_tqdm_progress())


def run_status(config: Config, *, as_json: bool = False) -> int:
    holder = read_holder(config.index.dir) if config.index.dir.exists() else None
    if holder is not None and holder.role == "run":
        from indexer.cli.client import daemon_status

        report = daemon_status(config)
    else:
        if not config.state_db_path.exists():
            raise CliError(f"no index at {config.index.dir}: run `ledger-indexer sync` or start the daemon")
        state = StateDB(config.state_db_path)
        try:
            report = status_report(config, state)
        finally:
            state.close()
    if as_json:
        _print_json(report)
    else:
        print(f"ledger {report['ledger']['path']}: head {report['ledger']['head']}"
              + (f" ({report['ledger']['error']})" if report["ledger"].get("error") else ""))
        for persona, p in report["personas"].items():
            print(f"  {persona}: cursor {p['cursor']}, lag {p['lag']}, {p['documents']} documents, "
                  f"{p['bad_rows_skipped']} bad rows skipped, {p['pending_turns']} pending turns, "
                  f"{p.get('truncated_documents', 0)} truncated documents")
            bad = p.get("bad_turns") or []
            for item in bad[:STATUS_BAD_SHOWN]:
                print(f"    bad: session {item['session']!r} turn {item['turn_id']}: {item['reason']}"
                      + (f" ({item['detail']})" if item.get("detail") else ""))
            if bad:
                more = p["bad_rows_skipped"] - min(len(bad), STATUS_BAD_SHOWN)
                print(("    … and %d more (status --json lists 50); " % more if more > 0 else "    ")
                      + "retried when their rows change, on a rebuild, or now with `sync --retry-bad`")
    return EXIT_OK


STATUS_BAD_SHOWN = 5  # bad turns listed by the text status; --json lists the newest 50


def _state(config: Config) -> StateDB:
    config.index.dir.mkdir(parents=True, exist_ok=True)
    return StateDB(config.state_db_path)


def run_project(config: Config, args) -> int:
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


def run_visibility(config: Config, label: str, visibility: str) -> int:
    from indexer.cli.visibility import apply_visibility

    config.index.dir.mkdir(parents=True, exist_ok=True)
    change = apply_visibility(config, label, visibility)
    where = " (applied by the running daemon)" if change.via_daemon else ""
    export = f"; export: {change.removed} removed, {change.restored} restored" if (change.removed or
                                                                                     change.restored) else ""
    print(f"{label}: {visibility}{where}{export}")
    return EXIT_OK


def run_get(config: Config, persona: str, path: str, from_line: int, lines: int | None, *, as_json: bool) -> int:
    from indexer.search.retrieval import DocumentNotFound, get_document

    if from_line < 1 or (lines is not None and lines < 1):
        raise CliError("--from and --lines must be positive", EXIT_USAGE)
    try:
        result = get_document(config, persona, path, from_line=from_line, lines=lines)
    except DocumentNotFound as exc:
        raise CliError(str(exc)) from None
    if as_json:
        _print_json(result.as_dict())
    else:
        sys.stdout.write(result.text + ("\n" if not result.text.endswith("\n") else ""))
    return EXIT_OK


def run_search(config: Config, args, *, as_json: bool) -> int:
    from indexer.search.searcher import Searcher, SearchError, SearchRequest

    try:
        request = SearchRequest(query=args.query, persona=args.persona, session=args.session, scope=args.scope,
                                sources=args.sources or ["sessions", "memory"], max_results=args.max_results,
                                min_score=args.min_score, mode=args.mode)
    except ValueError as exc:
        raise CliError(f"invalid search request: {exc}", EXIT_USAGE) from None
    searcher = Searcher.open(config)
    try:
        response = searcher.search(request)
    except SearchError as exc:
        raise CliError(str(exc), exc.code) from None
    finally:
        searcher.close()
    if as_json:
        _print_json(response.as_dict())
    else:
        if not response.results:
            print("no results")
        for r in response.results:
            where = f"{r.session} · " if r.session else ""
            print(f"{r.score:.3f}  {where}{r.path}:{r.start_line}-{r.end_line}")
            for line in r.snippet.split("\n"):
                print(f"    {line}")
    return EXIT_OK


def run_search_batch(config: Config, source: str, *, as_json: bool = True) -> int:
    """One request per line in, one response per line out, in order; the model loads once."""
    from pydantic import ValidationError

    from indexer.search.searcher import Searcher, SearchError, SearchRequest

    stream = sys.stdin if source == "-" else open(source, encoding="utf-8")
    searcher = Searcher.open(config)
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
                response = {"error": f"line {number}: {exc}"}
            if request_id is not None:
                response = {"id": request_id, **response}
            _print_json(response)
    finally:
        searcher.close()
        if stream is not sys.stdin:
            stream.close()
    return EXIT_OK if failures == 0 else EXIT_FAIL
