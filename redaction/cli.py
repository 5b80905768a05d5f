"""CLI helpers for ``ledger-indexer redact`` (the lead wires the subcommand).

Plain mode: all of stdin is redacted and written to stdout as-is otherwise.

JSON-lines mode: each input line is ``{"text": ...}``; each output line is
``{"text": <redacted>, "findings": [{"rule", "start", "end"}, ...]}`` with
offsets into the *original* text, counted in Unicode code points (Python
string indices). Only ``text`` and ``findings`` are written: other input
fields are dropped, because they were not redacted.

Malformed lines (bad JSON, not an object, no string ``text``) get an error
on stderr naming the line number and the problem, never the line's content
(it may hold a secret); nothing is written to stdout for them, the rest of
the input is still processed, and the exit status is 2. Blank lines are
skipped silently. Exit status 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from .engine import Redactor
from .known import KnownSecrets

__all__ = ["run_redact", "main"]

EXIT_OK = 0
EXIT_BAD_INPUT = 2


def run_redact(stdin: TextIO, stdout: TextIO, *, jsonl: bool, known: KnownSecrets | None = None,
               stderr: TextIO | None = None) -> int:
    """Redact ``stdin`` to ``stdout``; return the process exit status."""
    redactor = Redactor(known)
    if not jsonl:
        stdout.write(redactor.redact(stdin.read()).text)
        return EXIT_OK
    err = sys.stderr if stderr is None else stderr
    status = EXIT_OK
    for lineno, line in enumerate(stdin, start=1):
        if not line.strip():
            continue
        text, problem = _parse(line)
        if text is None:  # _parse gives a problem exactly when it gives no text
            err.write(f"redact: line {lineno}: {problem}; line skipped\n")
            status = EXIT_BAD_INPUT
            continue
        r = redactor.redact(text)
        out = {"text": r.text, "findings": [{"rule": f.rule, "start": f.start, "end": f.end} for f in r.findings]}
        stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
    return status


def _parse(line: str) -> tuple[str, None] | tuple[None, str]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:  # e.msg/e.colno describe the fault without echoing the line
        return None, f"invalid JSON ({e.msg} at column {e.colno})"
    if not isinstance(obj, dict):
        return None, f"expected a JSON object, got {type(obj).__name__}"
    text = obj.get("text")
    if not isinstance(text, str):
        return None, "missing string field 'text'" if text is None else \
            f"field 'text' must be a string, got {type(text).__name__}"
    return text, None


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point: ``python -m redaction.cli [--jsonl] [--known-secrets FILE]``."""
    ap = argparse.ArgumentParser(prog="redact", description="Redact secrets from stdin.")
    ap.add_argument("--jsonl", action="store_true", help='read and write JSON lines {"text": ...}')
    ap.add_argument("--known-secrets", metavar="FILE", help="file listing literal secrets, one per line")
    ap.add_argument("--known-secrets-env", metavar="VAR", help="environment variable listing secrets, one per line")
    args = ap.parse_args(argv)
    known = KnownSecrets()
    if args.known_secrets:
        known = known | KnownSecrets.from_file(args.known_secrets)
    if args.known_secrets_env:
        known = known | KnownSecrets.from_env(args.known_secrets_env)
    # Undecodable bytes must not abort a redaction pass halfway through.
    stdin = open(sys.stdin.fileno(), encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    return run_redact(stdin, sys.stdout, jsonl=args.jsonl, known=known or None)


if __name__ == "__main__":
    sys.exit(main())
