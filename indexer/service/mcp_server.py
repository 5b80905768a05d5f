"""The MCP server (official SDK, ``mcp`` 2.x ``MCPServer``) over a :class:`MemoryDoor`.

``build_server(door, principal)``: two tools, ``memory_search`` and
``memory_get``, whose principal comes from ``principal()`` at call time —
fixed for a stdio server, the bearer token's on HTTP (``mcp_http``). Tool
arguments are checked here against :mod:`mcp_tools`' models (the SDK sees a
pass-through model: it would drop unknown keys silently or answer with
pydantic's multi-line text); every answer is the API's result object as
structured content plus the same object as JSON text; every refusal an error
result with one line of text. Events are logged without query text.

Imports the SDK (about a second): import this module lazily.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import anyio.to_thread
import structlog
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict

from indexer.search.retrieval import DocumentNotFound
from indexer.search.searcher import SearchError, SearchRequest
from indexer.service import mcp_tools as tools
from indexer.service.api.models import GetResponseModel, SearchResponseModel

log = structlog.get_logger("indexer.mcp")

SERVER_NAME = "ledger-memory"
# The SDK logs every request at info and failed calls with their text: our own events say what matters.
logging.getLogger("mcp").setLevel(logging.WARNING)
logging.getLogger("httpx2").setLevel(logging.WARNING)


class _PassThrough(ArgModelBase):
    """Hands the raw arguments to the tool function, which validates them itself (mcp_tools)."""

    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

    def model_dump_one_level(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


def _error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def _answer(data: dict) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=tools.as_text(data))], structured_content=data)


PrincipalSource = Callable[[], "tools.McpPrincipal | None"]


def build_server(door: tools.MemoryDoor, principal: PrincipalSource, **server_kwargs: Any) -> MCPServer:
    """``server_kwargs`` go to ``MCPServer`` (``token_verifier`` and ``auth`` on HTTP)."""

    def who() -> tools.McpPrincipal:
        found = principal()
        if found is None:  # HTTP without a verified token never gets here; refuse rather than guess
            raise tools.ToolFailure("no principal: this server has no persona for this connection", "no_principal")
        return found

    async def call(tool: str, body) -> CallToolResult:
        started = time.perf_counter()
        persona = None
        try:
            me = who()
            persona = me.persona
            data, fields = await body(me)
        except tools.ToolFailure as exc:
            log.info("mcp.refused", tool=tool, persona=persona, door=door.name, reason=exc.reason)
            return _error(str(exc))
        except Exception as exc:  # a bug or a backend failure: logged here, one line to the model
            log.error("mcp.tool_failed", tool=tool, persona=persona, door=door.name, error_type=type(exc).__name__,
                      error=str(exc)[:300], exc_info=True)
            return _error(f"{tool} failed: internal error (see the memory server's log); retry later")
        log.info("mcp.call", tool=tool, persona=persona, door=door.name,
                 ms=round((time.perf_counter() - started) * 1000, 1), **fields)
        return _answer(data)

    async def memory_search(ctx: Context, **raw: Any) -> CallToolResult:
        async def body(me: tools.McpPrincipal):
            args = tools.parse_args(tools.SEARCH_TOOL, tools.SearchArgs, raw, me)
            request = tools.search_request(me, args)
            data = tools.search_result(await door.search(request))
            return data, {"scope": request.scope.value, "mode": request.mode.value,
                          "results": len(data["results"])}

        return await call(tools.SEARCH_TOOL, body)

    async def memory_get(ctx: Context, **raw: Any) -> CallToolResult:
        async def body(me: tools.McpPrincipal):
            args = tools.parse_args(tools.GET_TOOL, tools.GetArgs, raw, me)
            data = tools.get_result(await door.get(me, args.path, args.from_, args.lines))
            return data, {"lines": data["lines"]}

        return await call(tools.GET_TOOL, body)

    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                open_world_hint=False)
    return MCPServer(
        SERVER_NAME,
        instructions=tools.INSTRUCTIONS,
        tools=[
            _tool(memory_search, tools.SEARCH_TOOL, "Search memory", tools.SEARCH_DESCRIPTION, tools.SearchArgs,
                  SearchResponseModel, read_only),
            _tool(memory_get, tools.GET_TOOL, "Read a memory document", tools.GET_DESCRIPTION, tools.GetArgs,
                  GetResponseModel, read_only),
        ],
        log_level="WARNING",
        **server_kwargs,
    )


def _tool(fn, name: str, title: str, description: str, args: type[BaseModel], result: type[BaseModel],
          annotations: ToolAnnotations) -> Tool:
    return Tool(fn=fn, name=name, title=title, description=description, parameters=tools.input_schema(args),
                fn_metadata=FuncMetadata(arg_model=_PassThrough, output_model=result), is_async=True,
                context_kwarg="ctx", annotations=annotations)


class BackendDoor:
    """The tools answered by an :class:`indexer.service.api.ApiBackend`'s ``search`` and ``get``
    (the daemon itself, or an index the stdio server opened), on worker threads: they block
    (LanceDB, SQLite, ONNX). ``state()`` gives the state DB the narrowed scopes are checked on."""

    def __init__(self, backend, state: Callable[[], Any], name: str) -> None:
        self.backend = backend
        self.state = state
        self.name = name

    async def search(self, request: SearchRequest) -> dict:
        return await anyio.to_thread.run_sync(self._search, request)

    async def get(self, principal: tools.McpPrincipal, path: str, from_line: int, lines: int | None) -> dict:
        return await anyio.to_thread.run_sync(self._get, principal, path, from_line, lines)

    def _search(self, request: SearchRequest) -> dict:
        try:
            return self.backend.search(request).as_dict()
        except SearchError as exc:
            raise tools.ToolFailure(f"{tools.SEARCH_TOOL}: {exc}", exc.problem.value) from None

    def _get(self, principal: tools.McpPrincipal, path: str, from_line: int, lines: int | None) -> dict:
        if principal.narrowed and not tools.document_visible(self.state(), principal, path):
            raise tools.not_found(principal, path)
        try:
            return self.backend.get(principal.persona, path, from_line, lines, principal.session).as_dict()
        except DocumentNotFound as exc:
            raise tools.ToolFailure(f"{tools.GET_TOOL}: {exc}", "not_found") from None
        except SearchError as exc:
            raise tools.ToolFailure(f"{tools.GET_TOOL}: {exc}", exc.problem.value) from None
