"""``ledger-indexer mcp`` over stdio, no daemon: the SDK's real ``stdio_client`` against the real CLI.

One indexed demo for the module (real WAL ledger, real LanceDB, the real
model): atlas's DM session is private, and a project holds ``main`` and
``worker/auth #2``. Each test starts one server process per principal.
"""

from __future__ import annotations

import json
import sys

import pytest

from tests.mcp_helpers import (
    DM,
    ROOT,
    WORKER,
    Stdio,
    StdioLines,
    assert_answer,
    assert_refused,
    clean_env,
    cli,
    demo_config,
    first_path,
    persona_paths,
)

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from indexer.cli.visibility import apply_visibility
    from indexer.runtime.config import load_config
    from indexer.state.db import StateDB

    config = demo_config(tmp_path_factory.mktemp("mcp-stdio"))
    cli(config, "sync")
    loaded = load_config(config, env={})
    apply_visibility(loaded, DM, "private")  # what `ledger-indexer session visibility` does
    state = StateDB(loaded.state_db_path)
    state.project_add("auth", ["main", WORKER])
    state.close()
    return config


@pytest.fixture(scope="module")
def as_main(demo):
    """One server for atlas's ``main`` session (the model loads once): every call the tests below read."""
    server = Stdio(demo, "atlas", session="main")
    nova_doc = sorted(persona_paths(demo, "nova", "cooking"))[0]
    dm_doc = first_path(demo, "atlas", DM)

    async def script(s):
        r = {"tools": {t.name: t for t in (await s.list_tools()).tools}}
        r["search"] = await s.call_tool("memory_search", {"query": "JWT expiry for the mobile app", "max_results": 3})
        path = r["search"].structured_content["results"][0]["path"]
        r["get_part"] = await s.call_tool("memory_get", {"path": path, "from": 2, "lines": 2})
        r["get_whole"] = await s.call_tool("memory_get", {"path": path})
        r["vinaigrette"] = await s.call_tool("memory_search", {"query": "vinaigrette oil vinegar ratio",
                                                               "max_results": 20})
        r["vinaigrette_kw"] = await s.call_tool("memory_search", {"query": "vinaigrette", "mode": "keyword"})
        r["nova_doc"] = await s.call_tool("memory_get", {"path": nova_doc})
        r["kafka"] = await s.call_tool("memory_search", {"query": "Kafka retention events topic", "max_results": 20})
        r["dm_doc"] = await s.call_tool("memory_get", {"path": dm_doc})
        return r

    answers = server.run(script)
    answers["events"] = server.events()
    return answers


def test_tools_search_and_get_answer_with_the_api_objects(as_main):
    tools = as_main["tools"]
    found, part, whole = (assert_answer(as_main[k]) for k in ("search", "get_part", "get_whole"))
    assert set(tools) == {"memory_search", "memory_get"}
    search_schema = tools["memory_search"].input_schema
    assert search_schema["additionalProperties"] is False
    assert {"query", "max_results", "min_score", "mode", "sources", "scope"} == set(search_schema["properties"])
    assert "persona" not in search_schema["properties"] and "session" not in search_schema["properties"]
    get_schema = tools["memory_get"].input_schema
    assert set(get_schema["properties"]) == {"path", "from", "lines"} and get_schema["additionalProperties"] is False
    assert "Mandatory recall step" in tools["memory_search"].description
    assert set(tools["memory_search"].output_schema["properties"]) == {"results", "mode", "model", "took_ms",
                                                                       "warnings"}
    # The HTTP API's result objects.
    assert found["mode"] == "hybrid" and found["results"] and len(found["results"]) <= 3
    top = found["results"][0]
    assert set(top) == {"path", "source", "persona", "session", "turn_id", "kind", "start_line", "end_line", "score",
                        "snippet", "timestamp", "sessions"}
    assert top["persona"] == "atlas" and "15-minute" in top["snippet"]
    assert part["from"] == 2 and part["lines"] == 2 and part["text"].count("\n") == 1
    assert whole["total_lines"] == part["total_lines"] and part["text"] in whole["text"]
    assert "15-minute access tokens" in whole["text"]
    calls = [e for e in as_main["events"] if e["event"] == "mcp.call"]
    assert calls and {c["door"] for c in calls} == {"local"}
    assert all("JWT" not in str(e) for e in as_main["events"]), "query text must never be logged"


def test_widening_is_refused_persona_and_session_are_not_arguments(demo):
    server = Stdio(demo, "atlas", session=WORKER, scope="session")

    async def script(s):
        return {
            "persona": await s.call_tool("memory_search", {"query": "vinaigrette", "persona": "nova"}),
            "session": await s.call_tool("memory_search", {"query": "JWT expiry", "session": "main"}),
            "get_persona": await s.call_tool("memory_get", {"path": "MEMORY.md", "persona": "nova"}),
            "scope_persona": await s.call_tool("memory_search", {"query": "JWT expiry", "scope": "persona"}),
            "scope_project": await s.call_tool("memory_search", {"query": "JWT expiry", "scope": "project"}),
            "own": await s.call_tool("memory_search", {"query": "refresh token rotation handler", "scope": "session"}),
            "default": await s.call_tool("memory_search", {"query": "JWT expiry 15 minutes", "sources": ["sessions"]}),
            "other_session_doc": await s.call_tool("memory_get", {"path": first_path(demo, "atlas", "main")}),
            "unknown": await s.call_tool("memory_search", {"query": "x", "bogus": 1}),
            "bad_value": await s.call_tool("memory_search", {"query": "x", "max_results": 0}),
            "blank": await s.call_tool("memory_search", {"query": "   "}),
        }

    r = server.run(script)
    for key in ("persona", "get_persona"):
        assert_refused(r[key], "does not take 'persona'", "fixed by the server", "persona 'atlas'")
    assert_refused(r["session"], "does not take 'session'", "fixed by the server")
    assert_refused(r["scope_persona"], "scope 'persona' is wider than this server allows", "at most scope 'session'")
    assert_refused(r["scope_project"], "scope 'project' is wider")
    assert_refused(r["unknown"], "unknown argument 'bogus'")
    assert_refused(r["bad_value"], "invalid argument 'max_results'")
    assert_refused(r["blank"], "memory_search: invalid argument 'query': query is blank")  # not an internal error
    assert_refused(r["other_session_doc"], "no document")
    own = assert_answer(r["own"])["results"]
    assert own and {x["session"] for x in own if x["source"] == "sessions"} == {WORKER}
    default = assert_answer(r["default"])["results"]  # the server's session scope, not persona
    assert {x["session"] for x in default} <= {WORKER}
    assert {e["reason"] for e in server.events() if e["event"] == "mcp.refused"} >= {"fixed_argument", "scope_wider",
                                                                                     "invalid_argument", "not_found"}


def test_a_persona_cannot_see_another_personas_memory(as_main):
    results = assert_answer(as_main["vinaigrette"])["results"] + assert_answer(as_main["vinaigrette_kw"])["results"]
    assert all(x["persona"] == "atlas" for x in results)
    assert not any("vinaigrette" in x["snippet"].lower() for x in results)
    assert_refused(as_main["nova_doc"], "no document", "persona 'atlas'")


def test_a_private_session_is_invisible_to_another_session(demo, as_main):
    assert DM not in {x["session"] for x in assert_answer(as_main["kafka"])["results"]}
    assert_refused(as_main["dm_doc"], "no document")
    dm_doc = first_path(demo, "atlas", DM)

    async def script(s):
        return (await s.call_tool("memory_search", {"query": "Kafka retention events topic", "max_results": 20}),
                await s.call_tool("memory_get", {"path": dm_doc}))

    search, get = Stdio(demo, "atlas", session=DM).run(script)  # the private session itself
    assert DM in {x["session"] for x in assert_answer(search)["results"]}
    assert "Seven days" in assert_answer(get)["text"]


def test_project_scope_reads_its_projects_sessions_only(demo):
    main_doc = first_path(demo, "atlas", "main")
    paseto_doc = first_path(demo, "atlas", "main/experiment-paseto")
    server = Stdio(demo, "atlas", session=WORKER, scope="project")

    async def script(s):
        return (await s.call_tool("memory_get", {"path": main_doc}),
                await s.call_tool("memory_get", {"path": paseto_doc}),
                await s.call_tool("memory_search", {"query": "PASETO JWT expiry", "sources": ["sessions"],
                                                    "max_results": 20}))

    in_project, outside, search = server.run(script)
    assert_answer(in_project)
    assert_refused(outside, "no document")
    assert {x["session"] for x in assert_answer(search)["results"]} <= {"main", WORKER}


def test_bad_server_arguments_stop_with_one_line(demo, tmp_path):
    import subprocess

    def run(*args):
        return subprocess.run([sys.executable, "-m", "indexer.cli", "--config", str(demo), "mcp", *args], cwd=ROOT,
                              env=clean_env(), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)

    narrowed = run("--persona", "atlas", "--scope", "session")
    assert narrowed.returncode == 2
    assert narrowed.stderr.strip().splitlines()[-1] == (
        "ledger-indexer: mcp: scope 'session' needs a session (it is relative to the caller's session)")
    blank = run("--persona", " ")
    assert blank.returncode == 2 and "persona must be" in blank.stderr and "Traceback" not in blank.stderr
    ghost = run("--persona", "Atlas")
    assert ghost.returncode == 2 and ghost.stderr.strip().splitlines()[-1].startswith(
        "ledger-indexer: mcp: unknown persona 'Atlas': the index holds 'atlas'")


def test_without_an_index_a_call_says_what_to_do(tmp_path):
    config = demo_config(tmp_path)  # never synced
    server = Stdio(config, "atlas")

    async def script(s):
        return await s.call_tool("memory_search", {"query": "JWT"})

    assert_refused(server.run(script), "no index at", "ledger-indexer sync")


def test_a_line_that_is_not_one_message_is_answered_and_the_server_reads_on(tmp_path):
    """Malformed JSON and a batch array get the JSON-RPC error the HTTP transport gives the same body
    (``-32700``; ``-32600``: MCP has no batches), with ``"id": null``; the next line is answered."""
    config = demo_config(tmp_path)  # never synced: the protocol alone
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}
    with StdioLines(config, "atlas") as server:
        server.send(json.dumps(init))
        assert server.replies_until(1)[0]["result"]["serverInfo"]["name"] == "ledger-memory"
        server.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        server.send('{"jsonrpc": "2.0", "id": 2, "method": "tools/list"')  # cut short
        server.send(json.dumps([{"jsonrpc": "2.0", "id": 3, "method": "tools/list"}]))  # a batch
        server.send("")  # a blank line is no message: no answer
        server.send(json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}))
        parse_error, invalid, listed = server.replies_until(4)
    assert parse_error == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
    assert (invalid["id"], invalid["error"]["code"]) == (None, -32600)
    assert invalid["error"]["message"].startswith("Invalid Request:") and "batches" in invalid["error"]["message"]
    assert {tool["name"] for tool in listed["result"]["tools"]} == {"memory_search", "memory_get"}
    rejected = [e for e in server.events() if e["event"] == "mcp.line_rejected"]
    assert [(e["reason"], e["code"]) for e in rejected] == [("parse_error", -32700), ("invalid_request", -32600)]
