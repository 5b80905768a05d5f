"""``ledger-indexer [--config FILE] COMMAND`` — one entry point.

Exit codes: 0 success, 1 operational failure (the message says what to do),
2 usage or config error. ``--json`` output is one JSON object on stdout; logs
go to stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from indexer.cli.common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, CliError, defer_logging, ensure_logging, exit_code
from indexer.core.errors import Failure

if TYPE_CHECKING:
    from indexer.core.names import TextRule

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
# `search` leaves out what scores below this unless told otherwise: a calibrated 0.000 shares nothing
# with the query (no term, no nearby meaning), and a person reading the list has no use for it.
# (The API and MCP keep 0.0: a program asks for the threshold it wants.)
DEFAULT_MIN_SCORE = 0.001
# Answered by a running daemon when one holds the index: logging is set up only if
# the command ends up working in-process.
FAST_COMMANDS = frozenset({"search", "get", "status"})
# Set up logging themselves, once their first output (sync's progress bar) is on the screen.
OWN_LOGGING = frozenset({"sync"})


def _log_level(value: str) -> str:
    if value.strip().lower() not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"invalid log level {value!r}: choose one of {', '.join(LOG_LEVELS)}")
    return value.strip().lower()


class _Version(argparse.Action):
    """``--version``: the installed package's version (looked up only when asked)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("ledger-indexer")
        except PackageNotFoundError:
            found = "unknown (not installed)"
        print(f"ledger-indexer {found}")
        parser.exit(0)


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line (the full usage is one ``--help`` away)."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="ledger-indexer", description="Cross-session memory for AI agents.")
    p.add_argument("--config", "-c", default=os.environ.get("LEDGER_INDEXER_CONFIG"),
                   help="TOML config file (env LEDGER_INDEXER_CONFIG)")
    p.add_argument("--log-level", default=os.environ.get("LEDGER_INDEXER_LOG_LEVEL_CLI", "info"), type=_log_level,
                   metavar="{debug,info,warning,error,critical}",
                   help="how much to log on stderr (default info; env LEDGER_INDEXER_LOG_LEVEL_CLI)")
    p.add_argument("--version", action=_Version, help="print the version and exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", help="what to do (`COMMAND --help`)")

    run = sub.add_parser("run", help="run the daemon: tail the ledger, serve the HTTP API")
    run.add_argument("--demo-hints", action="store_true", help=argparse.SUPPRESS)

    sub.add_parser("serve", help="the HTTP API without sync: a reader machine of an index on object storage")

    sync = sub.add_parser("sync", help="run one sync pass and print a summary")
    sync.add_argument("--force", action="store_true", help="rebuild every persona beside the live index")
    sync.add_argument("--persona", action="append", help="only this persona (repeatable)")
    sync.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    sync.add_argument("--retry-bad", action="store_true",
                      help="build every turn recorded as bad again now (status lists them)")

    reindex = sub.add_parser("reindex", help="forced reindex (delegated to a running daemon)")
    reindex.add_argument("--persona", action="append", help="only this persona (repeatable; default: all)")
    reindex.add_argument("--json", action="store_true", help="print the summary as one JSON object")

    search = sub.add_parser("search", help="memory_search from the command line")
    search.add_argument("query", nargs="?", help="what to look for, in plain words (at most 2,000 characters)")
    search.add_argument("--persona", help="the ledger's persona_id to search (required without --batch)")
    search.add_argument("--session", help="the caller's session label: its private session becomes visible, and "
                                          "the project and session scopes are relative to it")
    search.add_argument("--scope", choices=["persona", "project", "session"], default="persona",
                        help="persona (default): every shared session; project: the sessions of --session's "
                             "projects; session: --session only")
    search.add_argument("--source", action="append", choices=["sessions", "memory"], dest="sources",
                        help="search only this source (repeatable; default: both)")
    search.add_argument("-n", "--max-results", type=int, default=6, help="at most this many results (default 6)")
    search.add_argument("--min-score", type=float, default=DEFAULT_MIN_SCORE,
                        help=f"leave out results scoring below this, 0..1 (default {DEFAULT_MIN_SCORE}: "
                             "hides matches that share nothing with the query)")
    search.add_argument("--mode", choices=["hybrid", "vector", "keyword"], default="hybrid",
                        help="hybrid (default): vector and keyword fused; vector or keyword alone")
    search.add_argument("--batch", metavar="FILE|-", help="one JSON request per line; one response per line")
    search.add_argument("--json", action="store_true", help="print the response as one JSON object")

    get = sub.add_parser("get", help="print a stored document")
    get.add_argument("path", help="a document path from a search result (sessions/<label>/turns/<turn>.md)")
    get.add_argument("--persona", required=True, help="the ledger's persona_id the document belongs to")
    get.add_argument("--session", help="the caller's session label: the documents of its private session are "
                                       "visible to it (as to `search --session`)")
    get.add_argument("--from", dest="from_line", type=int, default=1, help="first line to print, 1-based")
    get.add_argument("--lines", type=int, default=None, help="how many lines to print (default: to the end)")
    get.add_argument("--json", action="store_true", help="print the document as one JSON object")

    status = sub.add_parser("status", help="cursor, lag, documents per persona")
    status.add_argument("--json", action="store_true", help="print the report as one JSON object")

    redact = sub.add_parser("redact", help="redact stdin to stdout")
    redact.add_argument("--jsonl", action="store_true", help='JSON lines {"text": ...} in, text+findings out')

    project = sub.add_parser("project", help="project membership (scope 'project')")
    psub = project.add_subparsers(dest="action", required=True, metavar="ACTION", help="add, remove or list")
    for action, what in (("add", "add sessions to a project (created when new)"),
                         ("remove", "remove sessions from a project")):
        pa = psub.add_parser(action, help=what)
        pa.add_argument("name", help="the project's name")
        pa.add_argument("labels", nargs="+", metavar="SESSION_LABEL", help="a session label (one or more)")
    psub.add_parser("list", help="every project and its sessions") \
        .add_argument("--json", action="store_true", help="print the projects as one JSON object")

    session = sub.add_parser("session", help="session settings")
    ssub = session.add_subparsers(dest="action", required=True, metavar="ACTION", help="visibility")
    vis = ssub.add_parser("visibility", help="make a session private (searchable only with --session LABEL) "
                                             "or shared again")
    vis.add_argument("label", help="the session's label")
    vis.add_argument("visibility", choices=["private", "shared"], help="private or shared")

    config_cmd = sub.add_parser("config", help="configuration: `config check` tests that it is ready to run")
    csub = config_cmd.add_subparsers(dest="action", required=True, metavar="ACTION", help="check")
    csub.add_parser("check", help="check the ledger, index folder, model, tokens and sinks (reads only)") \
        .add_argument("--json", action="store_true", help="print the checks as one JSON object")
    mcp = sub.add_parser("mcp", help="serve memory_search and memory_get over MCP (stdio) for one agent process",
                         description="MCP over stdio. The persona, the session and the widest scope are fixed "
                                     "here, never by a tool call. A running daemon answers the calls when there "
                                     "is one; otherwise this process opens the index itself.")
    mcp.add_argument("--persona", required=True, help="the agent's persona_id (the only persona it can search)")
    mcp.add_argument("--session", help="the agent's session label: its private session becomes visible, and the "
                                       "project and session scopes are relative to it")
    mcp.add_argument("--scope", choices=["persona", "project", "session"], default="persona",
                     help="the widest scope a tool call may search (a call may only narrow it; default persona)")

    demo = sub.add_parser("demo", help="write a demo ledger and a config for it")
    demo.add_argument("--dir", required=True, type=Path, help="the folder to write the demo into (created)")
    return p


# File names: a POSIX name is bytes, and one that is not UTF-8 still opens (Python hands its bytes back).
_FILE_ARGUMENTS = frozenset({"config", "dir", "batch"})


def _is_utf8(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: Python's stand-in for a byte of argv that is not UTF-8
        return False
    return True


def _argument_names(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, str]:
    """dest → the name usage errors give it (``--persona``, ``SESSION_LABEL``), through the chosen subcommands."""
    names: dict[str, str] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(args, action.dest, None))
            if chosen is not None:
                names.update({k: v for k, v in _argument_names(chosen, args).items() if k not in names})
        else:
            names.setdefault(action.dest, "/".join(action.option_strings) or action.metavar or action.dest)
    return names


def _not_utf8(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str | None:
    """The usage error for the first argument that is not UTF-8 text (a persona, a label, a query, a
    document path: they are stored, sent and logged as UTF-8), None when every one is."""
    names = _argument_names(parser, args)
    for dest, value in vars(args).items():
        if dest in _FILE_ARGUMENTS:
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and not _is_utf8(item):
                return f"argument {names.get(dest, dest)}: not valid UTF-8 ({_shown(item)}): give it as UTF-8 text"
    return None


def _shown(value: str) -> str:
    """The bytes the argument had (``b'a\\xff'``), ASCII-escaped: safe on any terminal."""
    try:
        return repr(value.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:  # a surrogate no byte stands for (not from argv)
        return ascii(value)


def _config(args):
    from indexer.runtime.config import ConfigError, load_config

    try:
        return load_config(args.config)
    except ConfigError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


# -- commands --------------------------------------------------------------------------


def cmd_demo(args) -> int:
    from indexer.cli.demo import write_demo

    try:
        config, kept = write_demo(args.dir)
    except OSError as exc:
        raise CliError(f"cannot write the demo into {args.dir}: {exc.strerror or exc}; choose a writable --dir") from None
    if kept:
        print(f"kept as they were: {', '.join(kept)} (delete them for fresh demo files)")
    print(f"demo ledger and config: {config}")
    # Both ways on: `make run` starts the daemon right after this, and a `sync` is refused while it
    # holds the index (it syncs by itself).
    print(f"next: ledger-indexer --config {config} sync   (index it once, with no daemon running)")
    print(f"  or: ledger-indexer --config {config} run    (the daemon: it indexes and keeps up by itself; "
          "then use status and search)")
    return EXIT_OK


def cmd_redact(args) -> int:
    from indexer.sync.context import known_secrets
    from redaction.cli import run_redact

    config = _config(args) if args.config else None
    sys.stdin.reconfigure(errors="replace")  # one undecodable byte must not abort an audit run
    return run_redact(sys.stdin, sys.stdout, jsonl=args.jsonl, known=known_secrets(config) if config else None)


def cmd_sync(args) -> int:
    from indexer.cli.progress_bar import ProgressBar

    bar = ProgressBar("reindex" if args.force else "sync")  # on a terminal: drawn now, the total comes later
    try:
        ensure_logging()
        from indexer.cli.commands import run_sync

        return run_sync(_config(args), force=args.force, personas=args.persona, as_json=args.json,
                        retry_bad=args.retry_bad, bar=bar)
    finally:
        bar.close()


def cmd_reindex(args) -> int:
    from indexer.cli.commands import run_reindex

    return run_reindex(_config(args), personas=args.persona, as_json=args.json)


def cmd_status(args) -> int:
    from indexer.cli.queries import run_status

    return run_status(args.config, lambda: _config(args), as_json=args.json)


def cmd_search(args) -> int:
    if args.batch:
        from indexer.cli.commands import run_search_batch

        if args.query or args.persona:  # each line carries its own query and persona: never ignore these
            raise CliError("search --batch takes every query and persona from its lines: drop QUERY and --persona",
                           EXIT_USAGE)

        return run_search_batch(_config(args), args.batch, as_json=True)
    from indexer.cli.queries import run_search

    if not args.query or not args.persona:
        raise CliError("search needs QUERY and --persona (or --batch FILE)", EXIT_USAGE)
    return run_search(args.config, lambda: _config(args), args, as_json=args.json)


def cmd_get(args) -> int:
    from indexer.cli.queries import run_get

    return run_get(args.config, lambda: _config(args), args.persona, args.path, args.from_line, args.lines,
                   as_json=args.json, session=args.session)


def _check_names(*checks: tuple[TextRule, str]) -> None:
    """Each (rule, value) by the HTTP API's own rule (``indexer.core.names.TextRule``): the
    same names are refused here as there, before the config is read or anything changes."""
    for rule, value in checks:
        refusal = rule.refusal(value)
        if refusal is not None:
            raise CliError(refusal, EXIT_USAGE)


def cmd_project(args) -> int:
    from indexer.cli.commands import run_project

    if args.action != "list":
        from indexer.core.names import LABEL, PROJECT_NAME

        _check_names((PROJECT_NAME, args.name), *((LABEL, label) for label in args.labels))
    return run_project(_config(args), args)


def cmd_session(args) -> int:
    from indexer.cli.commands import run_visibility
    from indexer.core.names import LABEL

    _check_names((LABEL, args.label))
    return run_visibility(_config(args), args.label, args.visibility)


def cmd_config(args) -> int:
    from indexer.cli.config_check import run_config_check

    return run_config_check(_config(args), as_json=args.json)
def cmd_mcp(args) -> int:
    from indexer.cli.mcp import run_mcp

    return run_mcp(_config(args), persona=args.persona, session=args.session, scope=args.scope)


def cmd_serve(args) -> int:
    from indexer.service.serve import run_serve

    return run_serve(_config(args))


def cmd_run(args) -> int:
    from indexer.service.daemon import run_daemon

    return run_daemon(_config(args), demo_hints=args.demo_hints)


COMMANDS = {
    "demo": cmd_demo, "redact": cmd_redact, "sync": cmd_sync, "reindex": cmd_reindex, "status": cmd_status,
    "search": cmd_search, "get": cmd_get, "project": cmd_project, "session": cmd_session, "run": cmd_run,
    "serve": cmd_serve,
    "config": cmd_config,
    "mcp": cmd_mcp,
}


#: A reader closed the pipe early (``| head -1``): the exit status of a program killed by SIGPIPE.
EXIT_PIPE_CLOSED = 128 + 13


def _stdout_closed() -> int:
    """Quiet from here: what is still buffered for stdout goes nowhere instead of raising again at
    exit ("Exception ignored ... BrokenPipeError")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout with no descriptor (a test's StringIO)
        pass
    return EXIT_PIPE_CLOSED


def _storage_refusal(args, exc: BaseException) -> CliError | None:
    """``exc`` named by its storage cause (``indexer.cli.storage_door``), read through the folders
    the config names when it loads; None when it has no storage cause."""
    from indexer.cli.storage_door import command_places, storage_refusal

    try:
        places = command_places(_config(args))
    except Exception:  # the config is not what failed here: classify without its folders
        places = []
    return storage_refusal(exc, places, " ".join(filter(None, (args.command, getattr(args, "action", None)))))


def main(argv: list[str] | None = None) -> int:
    # Lance's Rust logger warns on every vector query without `_distance` and on
    # every new table; our own structured events say what matters.
    os.environ.setdefault("LANCEDB_LOG", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    parser = _parser()
    args = parser.parse_args(argv)
    not_utf8 = _not_utf8(parser, args)
    if not_utf8 is not None:
        parser.error(not_utf8)
    stream = sys.stdout if args.command in ("run", "serve") else sys.stderr

    def setup_logging() -> None:
        from indexer.runtime.logs import configure_logging

        # CLI commands log to stderr so that --json stdout stays one object; the daemon logs to stdout.
        configure_logging(level=args.log_level, stream=stream)

    defer_logging(setup_logging)
    if args.command not in FAST_COMMANDS | OWN_LOGGING or getattr(args, "batch", None):
        ensure_logging()
    try:
        return COMMANDS[args.command](args)
    except Failure as exc:  # CliError included: one line, the exit code its kind maps to
        print(f"ledger-indexer: {exc}", file=sys.stderr)
        return exit_code(exc)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `search ... | head -1`: the reader has what it wanted; nothing to report
        return _stdout_closed()
    except Exception as exc:  # a bug or an unforeseen failure: one line, the traceback only at debug level
        config_module = sys.modules.get("indexer.runtime.config")  # loaded by whatever raised it
        if config_module is not None and isinstance(exc, config_module.ConfigError):
            print(f"ledger-indexer: {exc}", file=sys.stderr)  # a file the config names, found bad past loading
            return EXIT_USAGE
        from indexer.core.errors import describe

        ensure_logging()
        import structlog

        structlog.get_logger("indexer.cli").debug("cli.unexpected_error", command=args.command, exc_info=exc)
        named = _storage_refusal(args, exc)
        if named is not None:  # a full disk, a read-only file system, permission: not a bug, and its fix
            print(f"ledger-indexer: {named}", file=sys.stderr)
            return named.code
        print(f"ledger-indexer: {args.command} failed: {describe(exc)} "
              "(run with --log-level debug for the traceback; please report it)", file=sys.stderr)
        return EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
