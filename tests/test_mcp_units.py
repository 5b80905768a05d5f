"""MCP pieces without a model: the principal and its scope rules, argument checks, the token file,
``/mcp`` when no token file is configured, the ``[mcp]`` config key."""

from __future__ import annotations

import pytest

from indexer.core.scopes import Scope
from indexer.runtime.config import load_config
from indexer.service.mcp_http import DISABLED, TokenFileError, load_configured_tokens, load_token_file
from indexer.service.mcp_tools import GetArgs, McpPrincipal, SearchArgs, ToolFailure, parse_args, search_request

TOKEN = "t0k3n-0123456789abcdef"


# -- principal and scopes --


def test_a_scope_argument_may_only_narrow():
    persona = McpPrincipal("atlas", "main")
    assert [persona.scope_for(s) for s in (None, "persona", "project", "session")] == [
        Scope.PERSONA, Scope.PERSONA, Scope.PROJECT, Scope.SESSION]
    project = McpPrincipal("atlas", "main", "project")
    assert project.scope_for(None) is Scope.PROJECT and project.scope_for("session") is Scope.SESSION
    with pytest.raises(ToolFailure, match="scope 'persona' is wider than this server allows"):
        project.scope_for("persona")
    session = McpPrincipal("atlas", "main", Scope.SESSION)
    for wider in ("project", "persona"):
        with pytest.raises(ToolFailure, match=f"scope '{wider}' is wider"):
            session.scope_for(wider)


@pytest.mark.parametrize("kwargs, message", [
    ({"persona": ""}, "persona must be"),
    ({"persona": "a\x00b"}, "persona must be"),
    ({"persona": "atlas", "session": ""}, "session must be"),
    ({"persona": "atlas", "max_scope": "session"}, "needs a session"),
    ({"persona": "atlas", "max_scope": "project"}, "needs a session"),
    ({"persona": "atlas", "session": "main", "max_scope": "everything"}, "scope must be persona, project or session"),
])
def test_a_principal_is_checked_when_made(kwargs, message):
    with pytest.raises(ValueError, match=message):
        McpPrincipal(**kwargs)


NOT_UTF8 = "is not valid UTF-8 text (it holds a lone surrogate, the mark of an undecodable byte): give it as UTF-8"


@pytest.mark.parametrize("kwargs, message", [
    ({"persona": "atlas", "session": "ma\udcffin"}, f"session {NOT_UTF8}"),
    ({"persona": "a\udcff"}, f"persona {NOT_UTF8}"),
])
def test_a_principal_that_is_not_utf8_is_refused_when_made(kwargs, message):
    with pytest.raises(ValueError) as info:
        McpPrincipal(**kwargs)
    assert str(info.value) == message


def test_a_principal_whose_session_holds_nul_is_taken_as_the_api_takes_it():
    assert McpPrincipal("atlas", "nul\x00label", "session").session == "nul\x00label"


def test_mcp_over_stdio_refuses_a_session_that_is_not_utf8_at_start_up():
    from indexer.cli.common import CliError
    from indexer.cli.mcp import run_mcp

    with pytest.raises(CliError) as info:
        run_mcp(load_config(None, env={}), persona="atlas", session="ma\udcffin", scope="persona")
    assert (info.value.code, str(info.value)) == (2, f"mcp: session {NOT_UTF8}")


def test_the_search_runs_with_the_principals_persona_session_and_scope():
    me = McpPrincipal("atlas", "main", "project")
    request = search_request(me, parse_args("memory_search", SearchArgs, {"query": "jwt", "scope": "session",
                                                                          "sources": '["memory"]'}, me))
    assert (request.persona, request.session, request.scope, request.sources) == (
        "atlas", "main", Scope.SESSION, ["memory"])
    assert search_request(me, SearchArgs(query="jwt")).scope is Scope.PROJECT


@pytest.mark.parametrize("raw, message", [
    ({"query": "x", "persona": "nova"}, "does not take 'persona'"),
    ({"query": "x", "session": "other", "persona": "nova"}, "does not take 'persona', 'session'"),
    ({"query": "x", "max_scope": "persona"}, "does not take 'max_scope'"),
    ({"query": "x", "limit": 3}, "unknown argument 'limit'"),
    ({"query": ""}, "invalid argument 'query'"),
    ({}, "invalid argument 'query': Field required"),
    ({"query": "x", "mode": "fuzzy"}, "invalid argument 'mode'"),
    ({"query": "x", "sources": ["files"]}, "invalid argument 'sources.0'"),
    ({"query": "x", "min_score": 2}, "invalid argument 'min_score'"),
])
def test_bad_search_arguments_are_refused_in_one_line(raw, message):
    me = McpPrincipal("atlas")
    with pytest.raises(ToolFailure) as info:
        parse_args("memory_search", SearchArgs, raw, me)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert "nova" not in str(info.value) and "other" not in str(info.value)  # values are not echoed


def test_get_arguments_use_from_on_the_wire():
    me = McpPrincipal("atlas")
    args = parse_args("memory_get", GetArgs, {"path": "sessions/main/turns/1.md", "from": 3, "lines": 2}, me)
    assert (args.from_, args.lines) == (3, 2)
    with pytest.raises(ToolFailure, match="unknown argument 'from_'"):
        parse_args("memory_get", GetArgs, {"path": "p", "from_": 3}, me)
    with pytest.raises(ToolFailure, match="invalid argument 'from'"):
        parse_args("memory_get", GetArgs, {"path": "p", "from": 0}, me)
    schema = GetArgs.model_json_schema(by_alias=True)
    assert set(schema["properties"]) == {"path", "from", "lines"} and schema["additionalProperties"] is False


# -- token file --


def test_a_token_file_maps_each_token_to_one_principal(tmp_path):
    path = tmp_path / "tokens.jsonl"
    path.write_text("# comment\n\n"
                    f'{{"token": "{TOKEN}", "persona": "atlas"}}\n'
                    f'{{"token": "{TOKEN}-2", "persona": "atlas", "session": "dm:+1 555/123", '
                    '"max_scope": "session", "name": "phone"}\n')
    table = load_token_file(path)
    assert len(table) == 2
    assert table.lookup(TOKEN) == McpPrincipal("atlas", name="line 3")
    assert table.lookup(TOKEN + "-2") == McpPrincipal("atlas", "dm:+1 555/123", Scope.SESSION, "phone")
    assert table.lookup(TOKEN[:-1]) is None and table.lookup("") is None


@pytest.mark.parametrize("line, reason", [
    ("not json", "line 2: not a JSON object (Expecting value at column 1)"),
    ('["a"]', "line 2: not a JSON object"),
    ('{"token": "short", "persona": "atlas"}', "line 2: 'token' must be a string of at least 16 characters"),
    ('{"token": "has a space in it 123", "persona": "atlas"}', "line 2: 'token' must be a string"),
    ('{"token": "TOKEN", "persona": "atlas"}', "line 2: the same token as line 1"),
    ('{"token": "TOKEN-x", "session": "main"}', "line 2: 'persona' is required"),
    ('{"token": "TOKEN-x", "persona": 7}', "line 2: 'persona' must be a string"),
    ('{"token": "TOKEN-x", "persona": "atlas", "scope": "session"}', "line 2: unknown key(s) 'scope'"),
    ('{"token": "TOKEN-x", "persona": "atlas", "max_scope": "project"}', "line 2: scope 'project' needs a session"),
    ('{"token": "TOKEN-x", "persona": "atlas", "session": "main", "max_scope": "all"}',
     "line 2: scope must be persona, project or session"),
])
def test_a_bad_token_file_line_is_named_and_the_token_never_shown(tmp_path, line, reason):
    path = tmp_path / "tokens.jsonl"
    path.write_text(f'{{"token": "{TOKEN}", "persona": "atlas"}}\n' + line.replace("TOKEN", TOKEN) + "\n")
    with pytest.raises(TokenFileError) as info:
        load_token_file(path)
    message = str(info.value)
    assert message.startswith(f"[mcp] token_file {path} ") and reason in message, message
    assert TOKEN not in message and "\n" not in message


def test_a_token_file_line_that_is_not_utf8_stops_start_up_naming_the_line_not_the_value(tmp_path):
    path = tmp_path / "tokens.jsonl"
    path.write_text(f'{{"token": "{TOKEN}", "persona": "atlas"}}\n'
                    f'{{"token": "{TOKEN}-2", "persona": "atlas", "session": "secret\\udcffsession"}}\n')
    with pytest.raises(TokenFileError) as info:
        load_token_file(path)
    assert str(info.value) == f"[mcp] token_file {path} line 2: session {NOT_UTF8}"


def test_an_unreadable_or_empty_token_file(tmp_path):
    with pytest.raises(TokenFileError, match="cannot read it"):
        load_token_file(tmp_path / "missing.jsonl")
    assert load_configured_tokens(None) is None
    (tmp_path / "empty").write_text("# nobody yet\n")
    assert len(load_configured_tokens(tmp_path / "empty")) == 0


def test_the_token_file_is_a_config_key(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[mcp]\ntoken_file = "secrets/mcp.jsonl"\n')
    assert load_config(config, env={}).mcp.token_file == tmp_path / "secrets" / "mcp.jsonl"
    env = {"LEDGER_INDEXER_MCP_TOKEN_FILE": "/etc/li/mcp.jsonl"}
    assert str(load_config(None, env=env).mcp.token_file) == "/etc/li/mcp.jsonl"
    assert load_config(None, env={}).mcp.token_file is None


# -- /mcp without a token file --


def test_without_a_token_file_mcp_answers_404_to_everyone():
    from fastapi.testclient import TestClient

    from indexer.service.api import create_app
    from indexer.service.mcp_http import mount_mcp

    app = create_app(object(), admin_token=None)
    assert mount_mcp(app, object(), lambda: None, None, host="127.0.0.1") is False
    with TestClient(app) as client:
        for method in ("GET", "POST", "DELETE"):
            answer = client.request(method, "/mcp", headers={"Authorization": f"Bearer {TOKEN}"})
            assert answer.status_code == 404 and answer.json() == {"error": DISABLED}
        assert "no such endpoint" in client.get("/nope").json()["error"]
    assert "/mcp" not in app.openapi()["paths"]


def test_mcp_checks_the_host_header_against_where_the_api_binds():
    from indexer.service.mcp_http import _transport_security

    loopback = _transport_security("127.0.0.1")
    assert loopback.enable_dns_rebinding_protection
    assert {"127.0.0.1:*", "localhost:*", "[::1]:*"} <= set(loopback.allowed_hosts)
    lan = _transport_security("192.0.2.7")
    assert "192.0.2.7:*" in lan.allowed_hosts and "http://192.0.2.7:*" in lan.allowed_origins
    assert "[fd00::1]:*" in _transport_security("fd00::1").allowed_hosts
    assert not _transport_security("0.0.0.0").enable_dns_rebinding_protection  # any name: the token guards it


def test_a_search_the_searcher_refuses_is_refused_as_an_argument_not_an_internal_error():
    args = parse_args("memory_search", SearchArgs, {"query": " \t\n "}, McpPrincipal("atlas"))
    with pytest.raises(ToolFailure, match=r"^memory_search: invalid argument 'query': query is blank$"):
        search_request(McpPrincipal("atlas"), args)


def test_mcp_over_http_answers_post_only_a_get_is_405_not_an_endless_stream(tmp_path):
    """Stateless MCP sends nothing unasked: a GET (a client opening the server's event stream) is
    405 with ``Allow: POST``, at once, as are HEAD, DELETE and PUT; POST still reaches the SDK."""
    import json

    import httpx

    from indexer.service.api import ApiServer, create_app
    from indexer.service.mcp_http import mount_mcp

    path = tmp_path / "tokens.jsonl"
    path.write_text(f'{{"token": "{TOKEN}", "persona": "atlas"}}\n')
    app = create_app(object(), admin_token=None)
    assert mount_mcp(app, object(), lambda: None, load_token_file(path), host="127.0.0.1") is True
    server = ApiServer(app, "127.0.0.1", 0, lifespan="on")
    server.start()
    headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json, text/event-stream"}
    try:
        for method in ("GET", "HEAD", "DELETE", "PUT"):
            with httpx.stream(method, server.url + "/mcp", headers=headers, timeout=10) as answer:
                status, allow = answer.status_code, answer.headers.get("allow")
                body = answer.read() if status == 405 else b""  # an event stream would never end: not read
            assert (status, allow) == (405, "POST"), method
            expected = b"" if method == "HEAD" else {
                "error": f"method {method} not allowed here; allowed: POST (MCP here is stateless: each call is one "
                         "POST and its answer; there is no stream to open and no session to end)"}
            assert (json.loads(body) if body else b"") == expected
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        answer = httpx.post(server.url + "/mcp", json=init, headers=headers, timeout=10)
        assert (answer.status_code, answer.json()["id"]) == (200, 1)
        assert httpx.post(server.url + "/mcp", json=init, timeout=10).status_code == 401  # no token
    finally:
        server.stop()
