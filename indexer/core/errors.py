"""What really went wrong: the root cause of an exception chain.

SQLite rolls a transaction back by itself when the disk fills; the
transaction manager's own rollback then fails with "cannot rollback - no
transaction is active", and that is the exception that reaches the top, with
the real cause ("database or disk is full") only in its ``__context__``.
Operators need the latter.
"""

from __future__ import annotations

from enum import StrEnum


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


class Problem(StrEnum):
    """What kind of failure a :class:`Failure` is. Each door maps it to its own terms: the CLI to an
    exit code, the HTTP API to a status, MCP to a tool error (``indexer.cli.common.exit_code``,
    ``indexer.service.api.errors.HTTP_STATUS``)."""

    INVALID = "invalid"          # what was asked or configured is wrong: fix it, retrying will not help
    NOT_FOUND = "not_found"      # what was named does not exist (or is not visible to the caller)
    UNAVAILABLE = "unavailable"  # not possible now (no index yet, storage refusing): retry, or do the step named
    FAILED = "failed"            # the operation failed; the message says why


class Failure(Exception):
    """A failure a user is told about in one line: the message says what happened and what to do,
    ``problem`` what kind it is. Raised anywhere below the doors, which never see a transport code
    here: they map ``problem``."""

    problem: Problem = Problem.FAILED

    def __init__(self, message: str, problem: Problem | None = None):
        super().__init__(message)
        if problem is not None:
            self.problem = problem
