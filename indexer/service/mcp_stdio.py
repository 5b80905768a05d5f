"""MCP over stdio: the SDK's transport, plus an answer for every line it cannot read.

The SDK's stdio transport (``mcp.server.stdio``, mcp 2.3) turns a line that is not one JSON-RPC
message — malformed JSON, a batch array — into an exception on its read stream, and the server
loop drops it (logged at debug): the client waits for an answer that never comes. Here the read
stream is wrapped and such a line answered as the SDK's HTTP transport answers the same body:
``-32700 Parse error`` for JSON that does not parse, ``-32600`` (Invalid Request) for JSON that is
not one message (a batch: JSON-RPC batches are not part of MCP), both with ``"id": null`` (an
unreadable message has no id to answer). The answer goes through the SDK's own write stream, so
it never interleaves with another frame; the server then reads the next line. A blank line is
no message and gets no answer.

Imports the SDK (about a second): import this module lazily.
"""

from __future__ import annotations

import contextvars
from types import TracebackType
from typing import Any

import anyio
import structlog
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

from indexer.runtime.logs import should_log

log = structlog.get_logger("indexer.mcp")

PARSE_ERROR_MESSAGE = "Parse error"
INVALID_REQUEST_MESSAGE = ("Invalid Request: a line must be a single JSON-RPC request, notification or response "
                           "object (batches are not supported)")


def rejection(exc: Exception) -> JSONRPCError | None:
    """The answer to a line the transport could not read (its ``exc``); None for a blank line."""
    errors = exc.errors(include_url=False) if isinstance(exc, ValidationError) else []
    if errors and all(e["type"] == "json_invalid" for e in errors):
        if isinstance(errors[0].get("input"), str) and not errors[0]["input"].strip():
            return None
        return _error(PARSE_ERROR, PARSE_ERROR_MESSAGE)
    if errors:  # it parsed: valid JSON that is not one JSON-RPC message
        return _error(INVALID_REQUEST, INVALID_REQUEST_MESSAGE)
    return _error(PARSE_ERROR, PARSE_ERROR_MESSAGE)  # not the SDK's validation: the line was unreadable


def _error(code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=code, message=message))


class AnsweringReadStream:
    """The SDK's read stream with its exceptions answered on ``write`` instead of handed to the
    server (which would drop them): the server sees messages only."""

    def __init__(self, inner: Any, write: Any) -> None:
        self._inner = inner
        self._write = write

    @property
    def last_context(self) -> contextvars.Context | None:
        # The SDK restores the sender's context of each message from its stream (mcp.server.runner).
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            await self._answer(item)

    async def _answer(self, exc: Exception) -> None:
        answer = rejection(exc)
        if answer is None:
            return
        reason = "parse_error" if answer.error.code == PARSE_ERROR else "invalid_request"
        if should_log(f"mcp.line_rejected:{reason}", 60.0):  # a client can repeat it at will
            log.warning("mcp.line_rejected", reason=reason, code=answer.error.code, transport="stdio")
        try:
            await self._write.send(SessionMessage(answer))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the server is closing its side: nobody left to answer

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> AnsweringReadStream:
        return self

    async def __anext__(self) -> SessionMessage:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> AnsweringReadStream:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()


async def serve_stdio(server: MCPServer) -> None:
    """``server.run_stdio_async()`` with the read stream wrapped (the SDK takes no hook for it)."""
    lowlevel = server._lowlevel_server  # what run_stdio_async drives; mcp 2.3 has no public accessor
    async with stdio_server() as (read_stream, write_stream):
        await lowlevel.run(AnsweringReadStream(read_stream, write_stream), write_stream,
                           lowlevel.create_initialization_options())


def run_stdio(server: MCPServer) -> None:
    """Serve MCP on stdin/stdout until the client closes stdin (``server.run("stdio")``, answering
    every line)."""
    anyio.run(serve_stdio, server)
