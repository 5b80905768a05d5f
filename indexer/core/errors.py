"""What really went wrong: the root cause of an exception chain.

SQLite rolls a transaction back by itself when the disk fills; the
transaction manager's own rollback then fails with "cannot rollback - no
transaction is active", and that is the exception that reaches the top, with
the real cause ("database or disk is full") only in its ``__context__``.
Operators need the latter.
"""

from __future__ import annotations


def root_cause(exc: BaseException) -> BaseException:
    """The innermost exception of the ``__cause__``/``__context__`` chain."""
    seen = {id(exc)}
    while True:
        nxt = exc.__cause__ or exc.__context__
        if nxt is None or id(nxt) in seen:
            return exc
        seen.add(id(nxt))
        exc = nxt


def describe(exc: BaseException) -> str:
    """``Type: message``, naming the root cause first when it differs."""
    top = f"{type(exc).__name__}: {exc}"
    root = root_cause(exc)
    if root is exc:
        return top
    return f"{type(root).__name__}: {root} (surfaced as {top})"


def first_invalid(exc: BaseException) -> tuple[str, str, str, int] | None:
    """A pydantic ``ValidationError`` as (field, message, error type, how many more errors) of its
    first error — the one line every door (API, CLI, MCP) shows; None for another exception."""
    errors = getattr(exc, "errors", None)
    found = errors(include_url=False, include_input=False) if callable(errors) else None
    if not found:
        return None
    head = found[0]
    field = ".".join(str(p) for p in head.get("loc", ()))
    return field, str(head.get("msg", "invalid")).removeprefix("Value error, "), str(head.get("type", "")), \
        len(found) - 1


EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class CliError(Exception):
    """A user-facing failure: the message says what to do, ``code`` is the exit code.

    Lives in the core so that every layer (the daemon's start-up included) can
    raise it without importing the CLI."""

    def __init__(self, message: str, code: int = EXIT_FAIL):
        super().__init__(message)
        self.code = code
