"""MCP on the running daemon: ``/mcp`` over streamable HTTP (bearer tokens) and ``ledger-indexer mcp``
forwarding to it. The SDK's real clients against a real ``ledger-indexer run`` on the demo ledger.

One daemon for the module; atlas's DM session is made private through the
admin API once it is ready.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

import httpx
import pytest

from ledger.writer import LedgerWriter
from tests.daemon_process import Daemon, free_port
from tests.mcp_helpers import (
    DM,
    ROOT,
    WORKER,
    Stdio,
    assert_answer,
    assert_refused,
    clean_env,
    cli,
    demo_config,
    first_path,
    persona_paths,
    run_http,
)

pytestmark = pytest.mark.timeout(600)

TOKENS = {
    "atlas": "tok-atlas-main-0123456789abcdef",
    "anon": "tok-atlas-nosession-0123456789ab",
    "dm": "tok-atlas-dm-0123456789abcdef012",
    "nova": "tok-nova-0123456789abcdef0123456",
    "narrow": "tok-atlas-worker-session-0123456",
}


def token_file_text() -> str:
    return "\n".join([
        "# ledger-indexer MCP tokens: one JSON object per line",
        f'{{"token": "{TOKENS["atlas"]}", "persona": "atlas", "session": "main", "name": "atlas-main"}}',
        f'{{"token": "{TOKENS["anon"]}", "persona": "atlas"}}',
        "",
        f'{{"token": "{TOKENS["dm"]}", "persona": "atlas", "session": "{DM}"}}',
        f'{{"token": "{TOKENS["nova"]}", "persona": "nova", "name": "nova"}}',
        f'{{"token": "{TOKENS["narrow"]}", "persona": "atlas", "session": "{WORKER}", "max_scope": "session"}}',
    ]) + "\n"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    root = tmp_path_factory.mktemp("mcp-http")
    (root / "tokens.jsonl").write_text(token_file_text())
    port = free_port()
    config = demo_config(root, port=port, token_file=root / "tokens.jsonl")
    d = Daemon(config, port)
    try:
        d.wait_ready(timeout=300)
        admin = (root / "demo" / "admin.token").read_text().strip()
        r = httpx.put(d.base + "/v1/admin/sessions/visibility", json={"label": DM, "visibility": "private"},
                      headers={"Authorization": f"Bearer {admin}"}, timeout=30)
        assert r.status_code == 200, r.text
        d.url = d.base + "/mcp"
        yield d
    finally:
        code = d.stop()
    # SIGTERM with MCP's session manager in the app's lifespan: still a clean, quick exit.
    assert code == 0, open(d.log.name).read()[-4000:]


def refused_for_size(d: Daemon) -> int:
    text = httpx.get(d.base + "/metrics", timeout=10).text
    return int(sum(float(m) for m in re.findall(
        r'^ledger_indexer_http_requests_total\{[^}]*status="413"[^}]*\} ([0-9.e+]+)$', text, re.M)))


def requests_counted(d: Daemon, route: str) -> int:
    text = httpx.get(d.base + "/metrics", timeout=10).text
    pattern = r'^ledger_indexer_http_requests_total\{[^}]*route="' + re.escape(route) + r'"[^}]*\} ([0-9.e+]+)$'
    return int(sum(float(m) for m in re.findall(pattern, text, re.M)))


def test_no_token_or_a_bad_token_is_refused(daemon):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    none = httpx.post(daemon.url, json=body, headers=headers, timeout=10)
    assert none.status_code == 401 and "WWW-Authenticate" in none.headers
    bad = httpx.post(daemon.url, json=body, headers=headers | {"Authorization": "Bearer " + "x" * 30}, timeout=10)
    assert bad.status_code == 401
    almost = TOKENS["atlas"][:-1] + "0"
    assert httpx.post(daemon.url, json=body, headers=headers | {"Authorization": f"Bearer {almost}"},
                      timeout=10).status_code == 401

    async def script(s):
        return await s.list_tools()

    from mcp.shared.exceptions import MCPError

    for token in (None, "not-a-token-0123456789"):  # the SDK's client fails to connect
        with pytest.raises(BaseException) as info:
            run_http(daemon.url, token, script)
        leaf = info.value
        while isinstance(leaf, BaseExceptionGroup):
            leaf = leaf.exceptions[0]
        assert isinstance(leaf, MCPError), repr(info.value)
    # The API around it is unchanged.
    assert httpx.get(daemon.base + "/healthz", timeout=10).json() == {"status": "ok"}
    unknown = httpx.get(daemon.base + "/nope", timeout=10)
    assert unknown.status_code == 404 and "no such endpoint" in unknown.json()["error"]


def test_tools_search_and_get_over_http(daemon):
    async def script(s):
        tools = {t.name: t for t in (await s.list_tools()).tools}
        found = assert_answer(await s.call_tool("memory_search", {"query": "Postgres version in production",
                                                                  "max_results": 3}))
        got = assert_answer(await s.call_tool("memory_get", {"path": found["results"][0]["path"], "from": 1,
                                                             "lines": 4}))
        return tools, found, got

    before = requests_counted(daemon, "/mcp")
    tools, found, got = run_http(daemon.url, TOKENS["atlas"], script)
    assert set(tools) == {"memory_search", "memory_get"}
    assert tools["memory_search"].input_schema["additionalProperties"] is False
    assert found["results"] and all(r["persona"] == "atlas" for r in found["results"])
    assert any("16.4" in r["snippet"] for r in found["results"])
    assert got["lines"] == 4 and got["from"] == 1 and got["persona"] == "atlas"
    assert requests_counted(daemon, "/mcp") > before  # counted like every other route


def test_widening_is_refused_over_http(daemon):
    main_doc = first_path(daemon.config, "atlas", "main")

    async def wide(s):
        return (await s.call_tool("memory_search", {"query": "JWT", "persona": "nova"}),
                await s.call_tool("memory_search", {"query": "JWT", "session": DM}),
                await s.call_tool("memory_get", {"path": main_doc, "session": "main"}))

    persona, session, get = run_http(daemon.url, TOKENS["atlas"], wide)
    assert_refused(persona, "does not take 'persona'", "persona 'atlas'")
    assert_refused(session, "does not take 'session'")
    assert_refused(get, "does not take 'session'")

    async def narrow(s):
        return (await s.call_tool("memory_search", {"query": "JWT expiry", "scope": "persona"}),
                await s.call_tool("memory_search", {"query": "JWT expiry", "scope": "project"}),
                await s.call_tool("memory_get", {"path": main_doc}),
                await s.call_tool("memory_search", {"query": "JWT expiry 15 minutes", "sources": ["sessions"]}))

    persona_scope, project_scope, other_doc, own = run_http(daemon.url, TOKENS["narrow"], narrow)
    assert_refused(persona_scope, "scope 'persona' is wider than this server allows", "at most scope 'session'")
    assert_refused(project_scope, "scope 'project' is wider")
    assert_refused(other_doc, "no document")
    assert {r["session"] for r in assert_answer(own)["results"]} <= {WORKER}


def test_a_persona_cannot_see_another_personas_memory_over_http(daemon):
    atlas_doc = first_path(daemon.config, "atlas", "main")
    nova_doc = sorted(persona_paths(daemon.config, "nova", "cooking"))[0]

    async def as_nova(s):
        return (await s.call_tool("memory_search", {"query": "JWT access tokens expiry KMS", "max_results": 20}),
                await s.call_tool("memory_get", {"path": atlas_doc}),
                await s.call_tool("memory_get", {"path": nova_doc}))

    search, foreign, own = run_http(daemon.url, TOKENS["nova"], as_nova)
    results = assert_answer(search)["results"]
    assert all(r["persona"] == "nova" for r in results)
    assert not any("JWT" in r["snippet"] for r in results)
    assert_refused(foreign, "no document", "persona 'nova'")
    assert "vinegar" in assert_answer(own)["text"]

    async def as_atlas(s):
        return await s.call_tool("memory_get", {"path": nova_doc})

    assert_refused(run_http(daemon.url, TOKENS["atlas"], as_atlas), "no document")


def test_a_private_session_is_invisible_to_another_session_over_http(daemon):
    dm_doc = first_path(daemon.config, "atlas", DM)

    async def script(s):
        return (await s.call_tool("memory_search", {"query": "Kafka retention events topic", "max_results": 20}),
                await s.call_tool("memory_get", {"path": dm_doc}))

    for who in ("atlas", "anon"):
        search, get = run_http(daemon.url, TOKENS[who], script)
        assert DM not in {r["session"] for r in assert_answer(search)["results"]}
        assert_refused(get, "no document")
    search, get = run_http(daemon.url, TOKENS["dm"], script)
    assert DM in {r["session"] for r in assert_answer(search)["results"]}
    assert "Seven days" in assert_answer(get)["text"]


def test_stdio_forwards_to_the_running_daemon(daemon):
    searches, gets = requests_counted(daemon, "/v1/memory_search"), requests_counted(daemon, "/v1/memory_get")
    server = Stdio(daemon.config, "atlas", session="main")

    async def script(s):
        found = assert_answer(await s.call_tool("memory_search", {"query": "PgBouncer billing pool"}))
        got = assert_answer(await s.call_tool("memory_get", {"path": found["results"][0]["path"]}))
        refused = await s.call_tool("memory_search", {"query": "x", "persona": "nova"})
        private = await s.call_tool("memory_get", {"path": first_path(daemon.config, "atlas", DM)})
        return found, got, refused, private

    found, got, refused, private = server.run(script)
    assert any("PgBouncer" in r["snippet"] for r in found["results"]) and got["text"]
    assert_refused(refused, "does not take 'persona'")
    assert_refused(private, "no document")
    events = server.events()
    started = next(e for e in events if e["event"] == "mcp.stdio_started")
    assert started["daemon"] == daemon.base
    calls = [e for e in events if e["event"] in ("mcp.call", "mcp.refused") and e.get("reason") != "fixed_argument"]
    assert [e["door"] for e in calls] == ["daemon"] * 3
    # The daemon answered (2 gets: the private one reached it and was refused there) ...
    assert requests_counted(daemon, "/v1/memory_search") == searches + 1
    assert requests_counted(daemon, "/v1/memory_get") == gets + 2
    # ... and this process never opened the index or loaded the model.
    assert not any(e["event"] in ("mcp.index_opened", "mcp.index_not_opened") for e in events)


def test_stdio_forwarding_keeps_a_narrowed_scope(daemon):
    server = Stdio(daemon.config, "atlas", session=WORKER, scope="session")

    async def script(s):
        return (await s.call_tool("memory_get", {"path": first_path(daemon.config, "atlas", "main")}),
                await s.call_tool("memory_get", {"path": first_path(daemon.config, "atlas", WORKER)}),
                await s.call_tool("memory_search", {"query": "JWT", "scope": "project"}))

    other, own, wider = server.run(script)
    assert_refused(other, "no document")
    assert "rotate" in assert_answer(own)["text"].lower()
    assert_refused(wider, "scope 'project' is wider")
    assert {e["door"] for e in server.events() if e["event"] in ("mcp.call", "mcp.refused")} == {"daemon"}


# A session label has no cap. One of 39,007 characters travels to the daemon in a POST body; one of
# 104,007 (past httpx's 64 KiB URL limit and the API's 64,000-byte body limit) is answered from the
# index opened by the caller, never refused.
MID_LABEL = "tïcket/" + "a-very-long-session-label " * 1500
HUGE_LABEL = "tïcket/" + "a-very-long-session-label " * 4000


@pytest.mark.parametrize("label, door", [(MID_LABEL, "daemon"), (HUGE_LABEL, "local")], ids=["39k", "104k"])
def test_memory_get_serves_a_session_label_of_any_length(daemon, label, door):
    word = f"walrus{len(label)}"
    with LedgerWriter(daemon.config.parent / "agents.db") as ledger:
        ledger.turn(label, user=f"the {word} migration plan", assistant="noted")
    daemon.wait_caught_up(["atlas"])
    path = first_path(daemon.config, "atlas", label)
    gets, too_large = requests_counted(daemon, "/v1/memory_get"), refused_for_size(daemon)
    server = Stdio(daemon.config, "atlas", session=label)

    async def script(s):
        return await s.call_tool("memory_get", {"path": path})

    assert word in assert_answer(server.run(script))["text"]
    events = server.events()
    assert [e["door"] for e in events if e["event"] in ("mcp.call", "mcp.refused")] == [door]
    assert any(e["event"] == "mcp.answered_here" and e["reason"] == "request_too_large" for e in events) \
        == (door == "local")
    assert word in cli(daemon.config, "get", path, "--persona", "atlas", "--session", label).stdout
    # Both calls reached the daemon: answered there (39k), or refused for size and answered here (104k).
    answered, refused = (2, 0) if door == "daemon" else (0, 2)
    assert (requests_counted(daemon, "/v1/memory_get") - gets, refused_for_size(daemon) - too_large) \
        == (answered, refused)


def test_tokens_never_reach_the_daemon_log(daemon):
    def log_text() -> str:
        return open(daemon.log.name, encoding="utf-8", errors="replace").read()

    def calls_logged() -> int:
        return len(re.findall(r'"event": ?"mcp\.(?:call|refused)"', log_text()))

    async def script(s):
        return await s.call_tool("memory_search", {"query": "JWT expiry", "max_results": 1})

    before = calls_logged()
    for token in TOKENS.values():  # every token used here, whatever ran before this test
        run_http(daemon.url, token, script)
    near_miss = TOKENS["atlas"][:-1] + "0"
    refused = httpx.post(daemon.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=10,
                         headers={"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {near_miss}"})
    assert refused.status_code == 401
    deadline = time.monotonic() + 30
    while calls_logged() < before + len(TOKENS) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert calls_logged() >= before + len(TOKENS)  # the calls made above are in the log being checked
    log = log_text()
    assert "mcp.http_enabled" in log
    for token in [*TOKENS.values(), near_miss]:
        assert token not in log


def test_a_bad_token_file_stops_start_up_with_file_and_line(tmp_path):
    tokens = tmp_path / "tokens.jsonl"
    tokens.write_text(f'{{"token": "{TOKENS["atlas"]}", "persona": "atlas"}}\n'
                      f'{{"token": "{TOKENS["nova"]}", "persona": "nova", "max_scope": "session"}}\n')
    config = demo_config(tmp_path, port=free_port(), token_file=tokens)
    result = subprocess.run([sys.executable, "-m", "indexer.cli", "--config", str(config), "run"], cwd=ROOT,
                            env=clean_env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last == (f"ledger-indexer: [mcp] token_file {tokens} line 2: scope 'session' needs a session "
                    "(it is relative to the caller's session)")
    assert "Traceback" not in result.stderr and TOKENS["nova"] not in result.stderr + result.stdout
