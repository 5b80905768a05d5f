"""Every command README.md and docs/*.md print runs as printed, on the demo.

Each fenced block of the README and of the guides in docs/ (docs/research/ is not a guide) has a
rule in ``RULES``: a shell block (```sh, ```bash) that can run
here runs with ``bash -eo pipefail``; a JSON MCP client config is checked by spawning its ``command``
and ``args`` (stdio) or by connecting to its ``url`` with its ``headers`` (HTTP) and calling
``memory_search``; a block that needs what a test machine has not (a systemd host, object storage)
or that is not a command is listed with the reason. A new block fails
``test_every_readme_block_has_a_rule`` until it is given one.

The snippets run as for a user who followed the README: ``ledger-indexer`` comes from ``make
install`` (HOME is a temp folder, so its default PREFIX ``~/.local`` is one too) and from nothing
else — no folder of PATH holding another ``ledger-indexer``, the checkout's ``.venv/bin`` included,
is kept — against a daemon on a demo written by ``ledger-indexer demo --dir``. The snippets name
production paths and the default port: only the strings in ``SUBSTITUTIONS`` are replaced, each
by the demo's own, and each must be used by some block.
"""

from __future__ import annotations

import enum
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import anyio
import pytest

from tests.daemon_process import Daemon, free_port
from tests.readme_blocks import Block, fenced_blocks

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: The documents whose commands a user runs: the README and the guides it links to.
DOCS = (README, *sorted((ROOT / "docs").glob("*.md")))


class Placed(NamedTuple):
    doc: str  # the document's path from the repository root
    block: Block

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.block.line}"


BLOCKS = [Placed(str(doc.relative_to(ROOT)), block) for doc in DOCS
          for block in fenced_blocks(doc.read_text(encoding="utf-8"))]
SHELL_LANGS = ("sh", "bash")


class Kind(enum.Enum):
    SHELL = "run with bash as printed"
    MCP_STDIO = "an MCP client config: its command and args spawned, tools called"
    MCP_HTTP = "an MCP client config: its url and headers connected, tools called"
    SKIPPED = "not run here"
    NOT_A_COMMAND = "not a command"


class Rule(NamedTuple):
    marker: str  # text found in exactly one block; a SHELL rule's is how that block begins
    kind: Kind
    why: str  # what the block is; for SKIPPED, why it cannot run here
    expect: tuple[str, ...] = ()  # SHELL: text its stdout must hold


RULES = (
    # README.md
    Rule("make run    # set up .venv", Kind.SKIPPED,
         "`make test` is the suite this test belongs to; `make run` holds the terminal with a daemon on port "
         "8765 until Ctrl-C: this test runs that daemon on the demo (tests/daemon_process.py) instead"),
    Rule("make install ", Kind.SHELL, "the ledger-indexer command on PATH", expect=("ledger-indexer ",)),
    Rule("ledger-indexer --config demo/ledger-indexer.toml search", Kind.SHELL, "a first search from the CLI",
         expect=("15-minute",)),
    Rule("curl -s localhost:8765/v1/memory_search", Kind.SHELL, "a search through the HTTP API",
         expect=('"results"', "15-minute access tokens")),
    # docs/how-it-works.md
    Rule("agents.db (WAL, read-only)", Kind.NOT_A_COMMAND, "the pipeline drawn in text"),
    # docs/search.md
    Rule("run                                   the daemon", Kind.NOT_A_COMMAND, "the CLI's synopsis"),
    Rule("path=$(ledger-indexer --config demo/ledger-indexer.toml search", Kind.SHELL,
         "a result's path read whole with get", expect=("15-minute",)),
    # docs/http-api.md
    Rule("curl -s localhost:8765/readyz", Kind.SHELL, "readiness and status over HTTP", expect=('"atlas"',)),
    # docs/mcp.md
    Rule('"command": "ledger-indexer"', Kind.MCP_STDIO, "the stdio MCP server in a client's mcpServers"),
    Rule('"type": "http"', Kind.MCP_HTTP, "the daemon's /mcp in a client's mcpServers"),
    Rule('{"token": "<at least 16 random characters>"', Kind.NOT_A_COMMAND, "lines of a token file"),
    # docs/object-storage.md
    Rule('uri = "s3://acme-agent-memory/ledger-index"', Kind.SKIPPED,
         "a config fragment for an index on object storage: needs a bucket and its credentials "
         "(tests/test_objectstore.py runs an index on object storage against a local S3 server)"),
    # docs/operations.md
    Rule("useradd --system --user-group", Kind.SKIPPED,
         "needs a systemd host, root and a system user: useradd, usermod, systemctl, journalctl, "
         "/etc/ledger-indexer (tests/test_systemd_unit.py checks the unit)"),
    Rule("ledger-indexer --config /etc/ledger-indexer/config.toml status", Kind.SHELL, "status of a running daemon",
         expect=("atlas",)),
    Rule("cd /opt/ledger-indexer && git pull", Kind.SKIPPED,
         "an upgrade of an installed service: needs the checkout in /opt, a remote to pull from and systemd"),
    # docs/redaction.md
    Rule("printf 'the deploy key is ghp_", Kind.SHELL, "the redactor on stdin", expect=("ghp_[REDACTED:",)),
)

RUNNABLE = (Kind.SHELL, Kind.MCP_STDIO, Kind.MCP_HTTP)


def rules_of(placed: Placed) -> list[Rule]:
    text = placed.block.text
    return [rule for rule in RULES
            if (text.startswith(rule.marker) if rule.kind is Kind.SHELL else rule.marker in text)]


def rule_of(placed: Placed) -> Rule:
    matches = rules_of(placed)
    assert len(matches) == 1, (f"{placed.where}: a ```{placed.block.lang} block needs exactly one rule in "
                               f"RULES (run it, or say why not); it matches {len(matches)}:\n{placed.block.text[:500]}")
    return matches[0]


def runnable(kind: Kind) -> list:
    """The blocks whose one rule is ``kind``: a block that matches no rule, or more than one, never runs
    (test_every_readme_block_has_a_rule names it)."""
    return [pytest.param(placed, id=placed.where) for placed in BLOCKS
            if [rule.kind for rule in rules_of(placed)] == [kind]]


@dataclass(frozen=True)
class Demo:
    """The demo a README snippet runs against, and the environment of a user who ran `make install`."""

    env: dict[str, str]
    config: Path
    port: int
    token: str

    def substitutions(self) -> tuple[tuple[str, str], ...]:
        return tuple((printed, value(self)) for printed, value in SUBSTITUTIONS)

    def substitute(self, text: str) -> str:
        """Every printed string replaced in one pass (a value may hold another printed string)."""
        values = dict(self.substitutions())
        return re.sub("|".join(re.escape(printed) for printed in values), lambda m: values[m.group(0)], text)


# What the snippets print that names a production machine, and what stands for it on the demo.
SUBSTITUTIONS: tuple[tuple[str, Callable[[Demo], str]], ...] = (
    ("/etc/ledger-indexer/config.toml", lambda demo: str(demo.config)),
    ("demo/ledger-indexer.toml", lambda demo: str(demo.config)),  # what `make run` writes
    (":8765/", lambda demo: f":{demo.port}/"),
    ("<a token from the token file>", lambda demo: demo.token),
)


def test_every_readme_block_has_a_rule():
    assert {placed.doc for placed in BLOCKS} >= {"README.md", "docs/mcp.md", "docs/operations.md"}, \
        "no fenced block found in README.md or a guide of docs/"
    used = [rule_of(placed) for placed in BLOCKS]
    for rule in RULES:
        assert used.count(rule) == 1, f"rule {rule.marker!r} matches {used.count(rule)} blocks, not 1"
    for placed, rule in zip(BLOCKS, used, strict=True):
        lang = placed.block.lang
        if rule.kind is Kind.SHELL:
            assert lang in SHELL_LANGS, f"{placed.where}: a shell rule for a ```{lang} block"
        if rule.kind in (Kind.MCP_STDIO, Kind.MCP_HTTP):
            assert lang == "json", f"{placed.where}: an MCP rule for a ```{lang} block"
        if lang in (*SHELL_LANGS, "json") and rule.kind not in RUNNABLE:
            assert rule.kind is Kind.SKIPPED and rule.why, f"{placed.where}: say why it is not run"
    runs = "".join(placed.block.text for placed, rule in zip(BLOCKS, used, strict=True) if rule.kind in RUNNABLE)
    for printed, _ in SUBSTITUTIONS:
        assert printed in runs, f"SUBSTITUTIONS: no runnable block prints {printed!r} any more"


# -- the demo, as a user who ran `make install` has it ---------------------------------------------

def user_path(home: Path) -> str:
    """PATH with ~/.local/bin first and no other folder holding a ledger-indexer."""
    kept = [entry for entry in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep)
            if entry and not (Path(entry) / "ledger-indexer").exists()]
    return os.pathsep.join([str(home / ".local" / "bin"), *kept])


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict[str, str]:
    """The environment after `make install` with HOME a temp folder: ledger-indexer on PATH."""
    if subprocess.run(["make", "-q", "setup"], cwd=ROOT, capture_output=True).returncode != 0:
        pytest.fail("the venv is older than pyproject.toml or the model code: run `make setup` first", pytrace=False)
    home = tmp_path_factory.mktemp("home")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LEDGER_INDEXER_", "NOTIFY_SOCKET", "WATCHDOG_",
                                                                    "VIRTUAL_ENV", "MAKE"))}
    env.update(HOME=str(home), PATH=user_path(home), HF_HUB_OFFLINE="1", LANCEDB_LOG="error")
    assert shutil.which("ledger-indexer", path=env["PATH"]) is None, "a ledger-indexer is on PATH before the install"
    done = subprocess.run(["make", "install"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"make install exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    launcher = home / ".local" / "bin" / "ledger-indexer"
    assert f"{launcher.parent} is on PATH" in done.stdout, done.stdout
    assert shutil.which("ledger-indexer", path=env["PATH"]) == str(launcher)
    return env


@pytest.fixture(scope="module")
def demo(installed, tmp_path_factory):
    root = tmp_path_factory.mktemp("readme-demo")
    made = subprocess.run(["ledger-indexer", "demo", "--dir", str(root / "demo")], cwd=root, env=installed,
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    config = root / "demo" / "ledger-indexer.toml"
    port, token = free_port(), "readme-snippet-token-0123456789"
    tokens = root / "mcp-tokens.jsonl"
    tokens.write_text(json.dumps({"token": token, "persona": "atlas", "session": "main", "name": "readme"}) + "\n")
    text = config.read_text()
    assert "port = 8765" in text
    config.write_text(text.replace("port = 8765", f"port = {port}") + f'\n[mcp]\ntoken_file = "{tokens}"\n')
    daemon = Daemon(config, port)
    try:
        daemon.wait_ready()
        yield Demo(env=installed, config=config, port=port, token=token)
    finally:
        daemon.stop()


# -- the runnable blocks -----------------------------------------------------------------------------

@pytest.mark.parametrize("placed", runnable(Kind.SHELL))
def test_readme_shell_block_runs_as_printed(placed: Placed, demo: Demo):
    rule, block = rule_of(placed), placed.block
    assert rule.kind is Kind.SHELL and block.text.startswith(rule.marker)
    script = demo.substitute(block.text)
    done = subprocess.run(["bash", "-eo", "pipefail", "-c", script], cwd=ROOT, env=demo.env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (f"{placed.where} exited {done.returncode}:\n{script}\n"
                                  f"stdout:\n{done.stdout[-2000:]}\nstderr:\n{done.stderr[-2000:]}")
    for text in rule.expect:
        assert text in done.stdout, f"{placed.where}: {text!r} not in its output:\n{done.stdout[-2000:]}"


def mcp_servers(placed: Placed, demo: Demo) -> dict[str, dict]:
    config = json.loads(demo.substitute(placed.block.text))
    assert config["mcpServers"], placed.where
    return config["mcpServers"]


def assert_recalls_the_jwt_decision(tools: set[str], answer) -> None:
    assert {"memory_search", "memory_get"} <= tools
    assert not answer.is_error, answer.content
    results = answer.structured_content["results"]
    assert results and any("15-minute" in r["snippet"] for r in results), results


async def _search(session) -> tuple[set[str], object]:
    await session.initialize()
    tools = {tool.name for tool in (await session.list_tools()).tools}
    return tools, await session.call_tool("memory_search", {"query": "JWT expiry"})


@pytest.mark.parametrize("placed", runnable(Kind.MCP_STDIO))
def test_readme_mcp_stdio_config_spawns_as_printed(placed: Placed, demo: Demo, tmp_path):
    """The client spawns ``command`` with ``args`` from its own folder, with the user's PATH."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    for name, server in mcp_servers(placed, demo).items():
        params = StdioServerParameters(command=server["command"], args=server.get("args", []),
                                       env={**demo.env, **server.get("env", {})}, cwd=str(tmp_path))

        async def main():
            with open(tmp_path / f"{name}.stderr", "w") as errlog:
                async with stdio_client(params, errlog=errlog) as (read, write):
                    async with ClientSession(read, write) as session:
                        return await _search(session)

        assert_recalls_the_jwt_decision(*anyio.run(main))


@pytest.mark.parametrize("placed", runnable(Kind.MCP_HTTP))
def test_readme_mcp_http_config_connects_as_printed(placed: Placed, demo: Demo):
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    for server in mcp_servers(placed, demo).values():
        assert server["type"] in ("http", "streamable-http"), server

        async def main():
            http = httpx2.AsyncClient(headers=server.get("headers", {}), timeout=httpx2.Timeout(60, read=120))
            async with http, streamable_http_client(server["url"], http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    return await _search(session)

        assert_recalls_the_jwt_decision(*anyio.run(main))
