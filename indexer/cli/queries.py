"""``search``, ``get`` and ``status``: answered by a running daemon's API when one holds the
index (no model, no index opened here: the call costs its start-up), in-process otherwise.

Only the standard library and the config are imported at the top; the search stack is
imported when a call has to run here."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from indexer.cli.common import EXIT_OK, EXIT_USAGE, CliError, ensure_logging, invalid_line
from indexer.cli.common import print_json as _print_json
from indexer.cli.remote import DaemonApi, RequestTooLarge

if TYPE_CHECKING:
    from indexer.runtime.config import Config

ConfigLoader = Callable[[], "Config"]


def _daemon(config_path: str | None, load: ConfigLoader) -> tuple[DaemonApi | None, Config | None]:
    """The running daemon (found from the config file alone: the fast path), else the loaded
    configuration and the daemon it names, if any. A daemon whose API answers only bearer tokens
    (it listens off loopback) is not asked: the call is answered here, as without a daemon."""
    daemon = DaemonApi.located(config_path)
    if daemon is not None and not daemon.tokens_required:
        return daemon, None
    config = load()
    daemon = DaemonApi.running(config)
    return (daemon if daemon is not None and not daemon.tokens_required else None), config


def run_search(config_path: str | None, load: ConfigLoader, args, *, as_json: bool) -> int:
    body = {"query": args.query, "persona": args.persona, "session": args.session, "scope": args.scope,
            "sources": args.sources or ["sessions", "memory"], "max_results": args.max_results,
            "min_score": args.min_score, "mode": args.mode}
    daemon, config = _daemon(config_path, load)
    response = None
    if daemon is not None:  # the daemon validates the request as it validates every API call
        try:
            response = daemon.answer("POST", "/v1/memory_search", {k: v for k, v in body.items() if v is not None})
        except RequestTooLarge:  # a label too long for the daemon's body limit: answered here
            config = config or load()
    if response is None:
        response = _search_here(config, body)
    if as_json:
        _print_json(response)
        return EXIT_OK
    if not response["results"]:
        print("no results")
    for r in response["results"]:
        where = f"{r['session']} · " if r.get("session") else ""
        print(f"{r['score']:.3f}  {where}{r['path']}:{r['start_line']}-{r['end_line']}")
        others = [label for label in r.get("sessions") or [] if label != r.get("session")]
        if others:  # a turn shared by forked sessions is one result
            print(f"       also in: {', '.join(others)}")
        for line in r["snippet"].split("\n"):
            print(f"    {line}")
    return EXIT_OK


def _search_here(config: Config, body: dict) -> dict:
    """No daemon runs: load the model and open the index in this process."""
    ensure_logging()
    from indexer.search.searcher import Searcher, SearchRequest

    try:
        request = SearchRequest(**body)
    except ValueError as exc:  # pydantic's ValidationError included
        raise CliError(invalid_line(exc), EXIT_USAGE) from None
    searcher = Searcher.open(config)  # a SearchError is a Failure: the CLI's door gives it its exit code
    try:
        return searcher.search(request).as_dict()
    finally:
        searcher.close()


def run_get(config_path: str | None, load: ConfigLoader, persona: str, path: str, from_line: int,
            lines: int | None, *, as_json: bool, session: str | None = None) -> int:
    """``session``: the caller's session label: a private session's documents are visible to it."""
    if from_line < 1 or (lines is not None and lines < 1):
        raise CliError("--from and --lines must be positive", EXIT_USAGE)
    daemon, config = _daemon(config_path, load)
    found = None
    if daemon is not None:
        query = {"persona": persona, "path": path, "from": from_line, "lines": lines, "session": session}
        # A body, not a query string: a label has no cap, and a long one does not fit a URL.
        try:
            found = daemon.answer("POST", "/v1/memory_get", {k: v for k, v in query.items() if v is not None})
        except RequestTooLarge:  # a label too long for the daemon's body limit: answered here
            config = config or load()
    if found is None:
        ensure_logging()
        if not config.index.object_store and not config.state_db_path.exists():  # never create an empty one
            raise CliError(f"no index at {config.index.dir}: run `ledger-indexer sync` or start the daemon")
        from indexer.search.retrieval import DocumentNotFound, get_document

        try:
            found = get_document(config, persona, path, from_line=from_line, lines=lines, session=session).as_dict()
        except DocumentNotFound as exc:
            raise CliError(str(exc)) from None
    if as_json:
        _print_json(found)
    else:
        if from_line > max(1, found["total_lines"]):  # nothing to print: say why rather than print nothing
            raise CliError(f"{path} has {found['total_lines']} line(s): --from {from_line} is past its end", EXIT_USAGE)
        text = found["text"]
        sys.stdout.write(text + ("\n" if not text.endswith("\n") else ""))
    return EXIT_OK


def run_status(config_path: str | None, load: ConfigLoader, *, as_json: bool = False) -> int:
    daemon, config = _daemon(config_path, load)
    if daemon is not None:
        report = daemon.answer("GET", "/v1/status")
    else:
        ensure_logging()
        if config.index.object_store and not config.state_db_path.exists():
            from indexer.service.serve import published_status  # a reader machine: what the writer published

            report = published_status(config)
            if as_json:
                _print_json(report)
            else:
                _print_published(report)
            return EXIT_OK
        if not config.state_db_path.exists():
            raise CliError(f"no index at {config.index.dir}: run `ledger-indexer sync` or start the daemon")
        from indexer.service.status import status_report
        from indexer.state.db import StateDB

        state = StateDB(config.state_db_path)
        try:
            report = status_report(config, state)
        finally:
            state.close()
    if as_json:
        _print_json(report)
    else:
        print_status(report)
    return EXIT_OK


def print_status(report: dict) -> None:
    """The status report as text: the ledger, the daemon when one answered (its failing passes
    first: a stalled index must not look merely behind), then each persona."""
    print(f"ledger {report['ledger']['path']}: head {report['ledger']['head']}"
          + (f" ({report['ledger']['error']})" if report["ledger"].get("error") else ""))
    daemon = report.get("daemon")
    if daemon:
        readiness = "ready" if daemon.get("ready") else "not ready"
        if not daemon.get("ready") and daemon.get("not_ready_reason"):  # e.g. a full disk, its folder and fix
            readiness += f" ({daemon['not_ready_reason']})"
        line = (f"daemon pid {daemon.get('pid')}: {readiness}, "
                f"{daemon.get('syncs', 0)} passes, {daemon.get('errors', 0)} failed")
        if daemon.get("consecutive_errors"):
            line += (f"; the last {daemon['consecutive_errors']} in a row, the latest: {daemon.get('last_error')} "
                     "— fix the cause (see `journalctl -u ledger-indexer`); search serves what is indexed")
        print(line)
        if daemon.get("progress"):  # a pass running now: "backfill 1,234/5,000 documents, 52/s, ETA 1 min 12 s"
            print(f"  running: {daemon['progress']['text']}")
    running = ((daemon or {}).get("progress") or {}).get("personas") or {}
    for persona, p in report["personas"].items():
        counted = running.get(persona)
        pass_note = f" (this pass: {counted['done']:,}/{counted['total']:,} documents)" if counted else ""
        print(f"  {persona}: cursor {p['cursor']}{pass_note}, lag {p['lag']}, {p['documents']} documents, "
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


STATUS_BAD_SHOWN = 5  # bad turns listed by the text status; --json lists the newest 50




def _print_published(report: dict) -> None:
    index = report["index"]
    print(f"index {index['uri']} (reader: no ledger here): scope state published "
          f"{index.get('published_at') or 'never'}" + (f" ({index['error']})" if index.get("error") else ""))
    writer = report.get("writer") or {}
    if writer:
        print(f"  writer: {writer.get('describe')}")
    for persona, p in report["personas"].items():
        print(f"  {persona}: table {p.get('table')}, {p.get('chunks')} chunks, {p.get('private_sessions')} private "
              f"and {p.get('deleted_sessions')} deleted sessions")
