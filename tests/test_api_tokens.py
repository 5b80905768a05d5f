"""Bearer tokens on the HTTP API's search and get (issue 33): required off loopback, confining.

The rules in process (a fake backend: what reaches it), then through real HTTP: a writer daemon
(``ledger-indexer run``, index on an S3-compatible server) and a reader (``ledger-indexer serve``
on the same bucket), both bound to a non-loopback address of this machine, answering tokens from
one token file. Start-up refusals and the opt-out run the real CLI too.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from structlog.testing import capture_logs

from indexer.core.scopes import Scope
from indexer.service.api import create_app
from indexer.service.api.auth import ApiAccess, UnprotectedBind, is_loopback, unprotected_bind
from indexer.service.mcp_http import load_token_file
from ledger.writer import LedgerWriter
from tests.daemon_process import Daemon
from tests.mcp_helpers import clean_env
from tests.s3_server import free_port, start_s3
from tests.test_api import FakeBackend

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[1]
ADMIN = "admin-token-0123456789abcdef"
TOKENS = {
    "main": "tok-atlas-main-0123456789abcdef",    # atlas, session main
    "anon": "tok-atlas-nosession-0123456789a",    # atlas, no session
    "dm": "tok-atlas-dm-0123456789abcdef0123",    # atlas, the private session dm
    "nova": "tok-nova-0123456789abcdef012345",    # nova
    "narrow": "tok-atlas-worker-0123456789abcd",  # atlas, session worker, at most scope session
}
TOKEN_LINES = [
    {"token": TOKENS["main"], "persona": "atlas", "session": "main", "name": "atlas-main"},
    {"token": TOKENS["anon"], "persona": "atlas", "name": "atlas-anon"},
    {"token": TOKENS["dm"], "persona": "atlas", "session": "dm", "name": "atlas-dm"},
    {"token": TOKENS["nova"], "persona": "nova", "name": "nova"},
    {"token": TOKENS["narrow"], "persona": "atlas", "session": "worker", "max_scope": "session", "name": "narrow"},
]
SESSIONS = (("atlas", "main"), ("atlas", "dm"), ("atlas", "worker"), ("nova", "cooking"))


def bearer(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[who]}"}


def write_tokens(path: Path) -> Path:
    path.write_text("# test tokens\n" + "".join(json.dumps(line) + "\n" for line in TOKEN_LINES))
    return path


def lan_address() -> tuple[str, str]:
    """(where to bind, where to connect): a non-loopback IPv4 address of this machine, else the
    wildcard 0.0.0.0 reached through 127.0.0.1 (the bind address is what the API judges)."""
    candidates = []
    try:
        candidates += subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=5).stdout.split()
    except (OSError, subprocess.SubprocessError):
        pass
    for address in candidates:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            continue
        if ip.version != 4 or ip.is_loopback:
            continue
        try:
            with socket.socket() as s:
                s.bind((address, 0))
        except OSError:
            continue
        return address, address
    return "0.0.0.0", "127.0.0.1"


# --------------------------------------------------------------------------- the rules, in process


def test_loopback_is_127_8_and_1_and_localhost_only():
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost", "LOCALHOST"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "", "192.0.2.7", "fd00::1", "my-host", "10.0.0.1"))


def test_off_loopback_without_tokens_is_a_start_up_error_unless_the_opt_out_is_set(tmp_path):
    message = unprotected_bind("0.0.0.0", 8765, tokens=False, opt_out=False)
    assert message is not None and "\n" not in message
    for part in ("0.0.0.0:8765", "off loopback", "[mcp] token_file", "[api] insecure_allow_unauthenticated",
                 "LEDGER_INDEXER_API_INSECURE_ALLOW_UNAUTHENTICATED"):
        assert part in message
    assert unprotected_bind("127.0.0.1", 8765, tokens=False, opt_out=False) is None
    with pytest.raises(UnprotectedBind):
        ApiAccess.for_bind("192.0.2.7", 8765, None, opt_out=False)
    with capture_logs() as logs:
        open_access = ApiAccess.for_bind("192.0.2.7", 8765, None, opt_out=True)
        assert ApiAccess.for_bind("127.0.0.1", 8765, None, opt_out=False) == ApiAccess()
    assert not open_access.tokens_required
    assert [e["event"] for e in logs] == ["api.insecure_unauthenticated"] and logs[0]["log_level"] == "warning"
    table = load_token_file(write_tokens(tmp_path / "tokens.jsonl"))
    assert ApiAccess.for_bind("192.0.2.7", 8765, table, opt_out=False).tokens_required
    assert not ApiAccess.for_bind("127.0.0.1", 8765, table, opt_out=False).tokens_required
    # `config check` says the same before a start
    from indexer.cli.config_check import check_api_access
    from indexer.runtime.config import load_config

    def check(**api):
        return check_api_access(load_config(None, env={}, overrides={"api": api}))

    assert check(host="127.0.0.1") is None
    refused = check(host="0.0.0.0")
    assert not refused.ok and refused.detail == message
    assert check(host="0.0.0.0", insecure_allow_unauthenticated=True).detail.startswith("INSECURE: 0.0.0.0:8765")


class ScopedBackend(FakeBackend):
    """The fake, with a nova document, recording the scope a get was narrowed to."""

    def __init__(self) -> None:
        super().__init__()
        self.docs["nova"] = {"sessions/cooking/turns/t9.md": ("cooking", "Session: cooking\n\nUser: vinegar?")}
        self.gets: list[tuple[str, str | None, Scope | None]] = []

    def get(self, persona, path, from_line, lines, session, *, scope=None):
        self.gets.append((persona, session, scope))
        return super().get(persona, path, from_line, lines, session)


@pytest.fixture
def tables(tmp_path):
    return load_token_file(write_tokens(tmp_path / "tokens.jsonl"))


def app_client(backend, tables, host: str) -> TestClient:
    access = ApiAccess.for_bind(host, 8765, tables, opt_out=False)
    return TestClient(create_app(backend, admin_token=ADMIN, access=access, bind_host=host),
                      base_url=f"http://{host}:8765")


def test_in_process_off_loopback_a_token_is_required_and_confines(tables):
    backend = ScopedBackend()
    c = app_client(backend, tables, "192.0.2.7")
    search = {"query": "database", "persona": "atlas"}
    refused = c.post("/v1/memory_search", json={"not": "even valid"})  # 401 before the body is looked at
    assert refused.status_code == 401 and refused.headers["WWW-Authenticate"] == "Bearer"
    assert "bearer token is required" in refused.json()["error"]
    assert c.get("/v1/memory_get", params={"persona": "atlas", "path": "MEMORY.md"}).status_code == 401
    assert c.post("/v1/memory_search", json=search, headers={"Authorization": "Bearer " + "x" * 30}).status_code == 401
    assert not backend.searches and not backend.gets
    # the token fixes persona, session and the widest scope
    assert c.post("/v1/memory_search", json=search, headers=bearer("main")).status_code == 200
    assert backend.searches[-1].persona == "atlas" and backend.searches[-1].session == "main"
    assert backend.searches[-1].scope is Scope.PERSONA
    assert c.post("/v1/memory_search", json=search | {"session": "worker"}, headers=bearer("narrow")).status_code == 200
    assert backend.searches[-1].scope is Scope.SESSION  # no scope asked: the token's widest
    other = c.post("/v1/memory_search", json=search, headers=bearer("nova"))
    assert other.status_code == 403
    assert other.json()["error"].startswith("this token answers for persona 'nova' only, not 'atlas'")
    wider = c.post("/v1/memory_search", json=search | {"session": "worker", "scope": "project"},
                   headers=bearer("narrow"))
    assert wider.status_code == 403 and "scope 'project' is wider than this token allows" in wider.json()["error"]
    session = c.post("/v1/memory_search", json=search | {"session": "dm:+1 555/123"}, headers=bearer("anon"))
    assert session.status_code == 403 and "not session 'dm:+1 555/123'" in session.json()["error"]
    got = c.get("/v1/memory_get", params={"persona": "atlas", "path": "MEMORY.md"}, headers=bearer("narrow"))
    assert got.status_code == 200 and backend.gets[-1] == ("atlas", "worker", Scope.SESSION)
    assert c.get("/v1/memory_get", params={"persona": "atlas", "path": "MEMORY.md"},
                 headers=bearer("nova")).status_code == 403
    # status and metrics name every persona: the admin token's off loopback; probes stay open
    assert c.get("/v1/status").status_code == 401 and c.get("/metrics").status_code == 401
    assert c.get("/v1/status", headers=bearer("main")).status_code == 401
    assert c.get("/v1/status", headers={"Authorization": f"Bearer {ADMIN}"}).status_code == 200
    assert c.get("/metrics", headers={"Authorization": f"Bearer {ADMIN}"}).status_code == 200
    assert c.get("/healthz").status_code == 200 and c.get("/readyz").status_code == 200
    assert c.get("/openapi.json").json()["components"]["securitySchemes"]["callerToken"]["scheme"] == "bearer"


def test_in_process_on_loopback_no_token_is_trusted_and_a_token_confines(tables):
    backend = ScopedBackend()
    c = app_client(backend, tables, "127.0.0.1")
    body = {"query": "database", "persona": "atlas", "session": "dm:+1 555/123", "scope": "session"}
    assert c.post("/v1/memory_search", json=body).status_code == 200  # as before tokens
    assert backend.searches[-1].session == "dm:+1 555/123"
    assert c.get("/v1/status").status_code == 200 and c.get("/metrics").status_code == 200
    assert c.post("/v1/memory_search", json=body, headers=bearer("main")).status_code == 403
    unknown = c.post("/v1/memory_search", json=body, headers={"Authorization": "Bearer " + "y" * 30})
    assert unknown.status_code == 401  # a mistyped token is refused, never taken for the trusted mode


# --------------------------------------------------------------------------- through HTTP: run and serve


def _turns(ledger: Path) -> None:
    with LedgerWriter(ledger, start_ms=1_763_000_000_000, seed=5) as w:
        for persona, label in SESSIONS:
            for i in range(2):
                w.turn(label, persona=persona, user=f"question {i} about the kafka retention of {label}",
                       assistant=f"answer {i}: the kafka retention detail of {label} is {i + 7} days")


def _config(path: Path, **sections: dict) -> Path:
    lines = []
    for name, values in sections.items():
        lines.append(f"[{name}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in values.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def _cli(config: Path, command: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "indexer.cli", "--config", str(config), command], cwd=ROOT,
                          env=clean_env(), capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def lan():
    return lan_address()


@pytest.fixture(scope="module")
def doors(tmp_path_factory, lan):
    """{"writer": base URL, "reader": base URL}: ``run`` on S3 and ``serve`` on the same bucket, both
    bound to ``lan``, with the token file; atlas's session ``dm`` made private on the writer."""
    bind, connect = lan
    root = tmp_path_factory.mktemp("api-tokens")
    ledger = root / "ledger" / "agents.db"
    ledger.parent.mkdir()
    _turns(ledger)
    tokens = write_tokens(root / "tokens.jsonl")
    (root / "admin.token").write_text(ADMIN + "\n")
    s3 = start_s3()
    uri = s3.bucket()
    procs: list[Daemon] = []
    try:
        common = {"index.storage_options": s3.options(), "mcp": {"token_file": str(tokens)}}
        wport, rport = free_port(), free_port()
        wcfg = _config(root / "w" / "config.toml", ledger={"path": str(ledger)},
                       index={"dir": str(root / "w" / "ix"), "sinks": ["lancedb"], "uri": uri, "refresh_seconds": 0},
                       api={"host": bind, "port": wport, "admin_token_file": str(root / "admin.token")}, **common)
        writer = Daemon(wcfg, wport, host=connect, env=clean_env())
        procs.append(writer)
        writer.wait_ready(timeout=240)
        private = httpx.put(writer.base + "/v1/admin/sessions/visibility", timeout=30, trust_env=False,
                            json={"label": "dm", "visibility": "private"}, headers={"Authorization": f"Bearer {ADMIN}"})
        assert private.status_code == 200, private.text
        rcfg = _config(root / "r" / "config.toml",
                       index={"dir": str(root / "r" / "ix"), "sinks": ["lancedb"], "uri": uri, "refresh_seconds": 0},
                       api={"host": bind, "port": rport}, **common)
        reader = Daemon(rcfg, rport, host=connect, env=clean_env(), command="serve")
        procs.append(reader)
        reader.wait_ready(timeout=240)
        yield {"writer": writer, "reader": reader}
    finally:
        codes = [d.stop() for d in reversed(procs)]
        s3.stop()
    assert codes == [0] * len(procs)


@pytest.fixture(params=["writer", "reader"])
def door(request, doors) -> Daemon:
    return doors[request.param]


def _search(d: Daemon, who: str | None, **body) -> httpx.Response:
    return httpx.post(d.base + "/v1/memory_search", json={"query": "kafka retention detail", "max_results": 50,
                                                         **body},
                      headers=bearer(who) if who else {}, timeout=60, trust_env=False)


def _sessions(d: Daemon, who: str, **body) -> set[str]:
    r = _search(d, who, **body)
    assert r.status_code == 200, r.text
    return {x["session"] for x in r.json()["results"]}


def _get(d: Daemon, who: str | None, persona: str, path: str, **params) -> httpx.Response:
    return httpx.get(d.base + "/v1/memory_get", params={"persona": persona, "path": path, **params},
                     headers=bearer(who) if who else {}, timeout=60, trust_env=False)


def _path(d: Daemon, who: str, persona: str, session: str) -> str:
    r = _search(d, who, persona=persona)
    assert r.status_code == 200, r.text
    return next(x["path"] for x in r.json()["results"] if x["session"] == session)


def test_without_a_token_search_and_get_are_refused_401(door):
    search = _search(door, None, persona="atlas")
    assert search.status_code == 401 and search.headers["WWW-Authenticate"] == "Bearer"
    assert "bearer token is required" in search.json()["error"]
    path = _path(door, "main", "atlas", "main")
    got = _get(door, None, "atlas", path)
    assert got.status_code == 401 and got.headers["WWW-Authenticate"] == "Bearer"
    wrong = httpx.post(door.base + "/v1/memory_search", json={"query": "kafka", "persona": "atlas"}, timeout=30,
                       headers={"Authorization": f"Bearer {TOKENS['main'][:-1]}0"}, trust_env=False)
    assert wrong.status_code == 401
    # status and metrics need the admin token off loopback; the probes stay open
    assert httpx.get(door.base + "/v1/status", timeout=30, trust_env=False).status_code in (401, 403)
    assert httpx.get(door.base + "/metrics", headers=bearer("main"), timeout=30, trust_env=False).status_code in (
        401, 403)
    assert httpx.get(door.base + "/readyz", timeout=30, trust_env=False).status_code == 200
    log = door.logs(1_000_000)
    assert not any(token in log for token in TOKENS.values())


def test_a_token_sees_its_own_persona_only(door):
    assert _sessions(door, "nova", persona="nova") == {"cooking"}
    other = _search(door, "nova", persona="atlas")
    assert other.status_code == 403 and "answers for persona 'nova' only" in other.json()["error"]
    nova_doc = _path(door, "nova", "nova", "cooking")
    assert _get(door, "nova", "nova", nova_doc).status_code == 200
    assert _get(door, "main", "nova", nova_doc).status_code == 403  # asking for nova with atlas's token
    assert _get(door, "main", "atlas", nova_doc).status_code == 404  # nova's path under atlas: no document
    atlas_doc = _path(door, "main", "atlas", "main")
    assert _get(door, "nova", "atlas", atlas_doc).status_code == 403


def test_a_private_session_is_visible_to_its_own_token_only(door):
    assert "dm" in _sessions(door, "dm", persona="atlas")
    for who in ("main", "anon"):
        assert _sessions(door, who, persona="atlas") == {"main", "worker"}
    dm_doc = _path(door, "dm", "atlas", "dm")
    got = _get(door, "dm", "atlas", dm_doc)
    assert got.status_code == 200 and "kafka retention detail of dm" in got.json()["text"]
    assert _get(door, "main", "atlas", dm_doc).status_code == 404
    assert _get(door, "anon", "atlas", dm_doc).status_code == 404
    # a token cannot borrow the private session's label
    borrowed = _search(door, "main", persona="atlas", session="dm")
    assert borrowed.status_code == 403 and "not session 'dm'" in borrowed.json()["error"]
    assert _get(door, "anon", "atlas", dm_doc, session="dm").status_code == 403


def test_a_narrowed_token_never_searches_or_reads_wider(door):
    assert _sessions(door, "narrow", persona="atlas") == {"worker"}
    assert _sessions(door, "narrow", persona="atlas", session="worker", scope="session") == {"worker"}
    for scope in ("project", "persona"):
        wider = _search(door, "narrow", persona="atlas", session="worker", scope=scope)
        assert wider.status_code == 403, wider.text
        assert f"scope '{scope}' is wider than this token allows" in wider.json()["error"]
    main_doc = _path(door, "main", "atlas", "main")
    assert _get(door, "narrow", "atlas", main_doc).status_code == 404  # outside its session scope
    assert _get(door, "narrow", "atlas", _path(door, "narrow", "atlas", "worker")).status_code == 200


def test_the_cli_beside_a_token_only_daemon_answers_in_process(doors):
    """The CLI holds no token: beside a daemon whose API needs one (it listens off loopback) its
    ``get`` and ``status`` answer from the index here instead of failing with the API's 401."""
    from tests.cli_runner import run_cli

    writer = doors["writer"]
    path = _path(writer, "main", "atlas", "main")
    got = run_cli("--config", str(writer.config), "get", path, "--persona", "atlas", "--json")
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["path"] == path
    status = run_cli("--config", str(writer.config), "status", "--json")
    assert status.returncode == 0, status.stderr
    assert set(json.loads(status.stdout)["personas"]) == {"atlas", "nova"}


@pytest.mark.parametrize("command", ["run", "serve"])
def test_off_loopback_without_tokens_refuses_to_start(tmp_path, lan, command):
    bind, _ = lan
    port = free_port()
    cfg = _config(tmp_path / "config.toml", ledger={"path": str(tmp_path / "agents.db")},
                  index={"dir": str(tmp_path / "ix"), "sinks": ["lancedb"]}, api={"host": bind, "port": port})
    result = _cli(cfg, command)
    assert result.returncode == 2, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"ledger-indexer: the API listens on {bind}:{port}, off loopback, and [mcp] token_file "
                           "is not set")
    assert "[api] insecure_allow_unauthenticated = true" in last and "Traceback" not in result.stderr
    assert not (tmp_path / "ix").exists()  # refused before anything was created


def test_the_opt_out_starts_open_off_loopback_and_warns(tmp_path, lan):
    """``run`` without tokens off loopback, with the named opt-out: it starts, says so in a warning
    event, and answers without a token as on loopback (qmd sink only: no model to load)."""
    bind, connect = lan
    ledger = tmp_path / "ledger" / "agents.db"
    ledger.parent.mkdir()
    _turns(ledger)
    port = free_port()
    cfg = _config(tmp_path / "config.toml", ledger={"path": str(ledger)},
                  index={"dir": str(tmp_path / "ix"), "sinks": ["qmd"]},
                  api={"host": bind, "port": port, "insecure_allow_unauthenticated": True})
    d = Daemon(cfg, port, host=connect, env=clean_env())
    try:
        d.wait_ready(timeout=120)
        warning = d.events("api.insecure_unauthenticated")
        assert len(warning) == 1 and warning[0]["level"] == "warning" and warning[0]["host"] == bind
        turn = next((tmp_path / "ix" / "qmd" / "atlas" / "sessions" / "main" / "turns").iterdir()).name
        got = _get(d, None, "atlas", f"sessions/main/turns/{turn}")
        assert got.status_code == 200 and "kafka" in got.json()["text"]
        assert httpx.get(d.base + "/v1/status", timeout=30, trust_env=False).status_code == 200
    finally:
        assert d.stop() == 0
