"""A domain failure says what kind it is; each door (CLI, HTTP, MCP) maps the kind to its own terms."""

from __future__ import annotations

import pytest

from indexer.cli.common import EXIT_FAIL, EXIT_USAGE, CliError, exit_code
from indexer.core.errors import Failure, Problem
from indexer.search.searcher import SearchError
from indexer.service.api.errors import HTTP_STATUS, _call, _Refused


def test_every_kind_has_an_exit_code_and_an_http_status():
    assert {p: (exit_code(Failure("x", p)), HTTP_STATUS[p]) for p in Problem} == {
        Problem.INVALID: (2, 422), Problem.NOT_FOUND: (1, 404), Problem.UNAVAILABLE: (1, 503),
        Problem.FAILED: (1, 503)}


def test_a_cli_error_keeps_its_own_exit_code_and_names_its_kind():
    assert [(e.code, e.problem, exit_code(e)) for e in (CliError("a"), CliError("b", EXIT_USAGE))] == [
        (EXIT_FAIL, Problem.FAILED, 1), (EXIT_USAGE, Problem.INVALID, 2)]


@pytest.mark.parametrize("problem, status", [(Problem.INVALID, 422), (Problem.NOT_FOUND, 404)])
def test_the_api_answers_a_search_failure_with_its_kinds_status(problem, status):
    def fail():
        raise SearchError("unknown persona 'x'", problem)

    with pytest.raises(_Refused) as refused:
        _call("/v1/memory_search", fail)
    assert (refused.value.status, refused.value.message) == (status, "unknown persona 'x'")


def test_a_search_error_is_unavailable_unless_said():
    assert SearchError("no index yet").problem is Problem.UNAVAILABLE
