"""The MCP tools ``memory_search`` and ``memory_get``: what they take, what they return, and who they answer for.

The prompt is untrusted (ARCHITECTURE.md "Search and scopes"): the persona, the
caller's session and the widest scope are an :class:`McpPrincipal`, fixed by
the server's arguments (stdio) or by the bearer token (HTTP), never by a tool
argument. The argument models forbid extra keys, so a call that adds
``persona`` or ``session`` is refused with a message that says why; a
``scope`` argument may only narrow the principal's scope (``session`` ⊂
``project`` ⊂ ``persona``).

A call becomes the existing :class:`indexer.search.searcher.SearchRequest`
(the principal's persona, session and scope) or a ``get_document`` call (the
principal's persona and session), answered by a :class:`MemoryDoor`: the
daemon in-process, the daemon over its HTTP API, or an index opened here.
Results are the HTTP API's own shapes (``SearchResponseModel``,
``GetResponseModel``).

No MCP SDK import here: this module is plain pydantic and the scope rules.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from indexer.core.errors import first_invalid
from indexer.core.scopes import Scope, resolve
from indexer.search.searcher import MAX_QUERY_CHARS, SearchRequest
from indexer.service.api.models import LABEL, PERSONA, GetResponseModel, SearchResponseModel

SEARCH_TOOL = "memory_search"
GET_TOOL = "memory_get"

#: Narrowest first: a scope may be replaced only by one at or before it.
_WIDTH = {Scope.SESSION: 0, Scope.PROJECT: 1, Scope.PERSONA: 2}
#: Arguments a model may try to set that belong to the principal.
_FIXED = ("persona", "session", "max_scope", "principal", "token")


class ToolFailure(Exception):
    """A call answered with an error result: ``str()`` is the one-line message the model reads,
    ``reason`` a short code for the log."""

    def __init__(self, message: str, reason: str = "refused"):
        super().__init__(message)
        self.reason = reason


def _is_utf8(value: str) -> bool:
    """False for a string holding a lone surrogate (what Python makes of a byte that is not UTF-8)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class McpPrincipal:
    """Who the tools answer for: one persona, optionally the caller's session, and the widest scope.

    ``max_scope`` ``project`` or ``session`` needs a ``session`` (they are relative to it). The
    persona and the session follow the HTTP API's rules (the session is any label, NUL included)
    and must be UTF-8 text: a lone surrogate (an undecodable byte of a non-UTF-8 argument or a
    ``"\\udcff"`` escape in the token file) would fail every call, so it is refused here, at start-up.
    ``name`` only labels log events (a token's name); it grants nothing.
    """

    persona: str
    session: str | None = None
    max_scope: Scope = Scope.PERSONA
    name: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.persona, str) or not self.persona.strip() or not PERSONA.allows(self.persona):
            raise ValueError(f"persona must be {PERSONA.describe()}, not blank")
        if self.session is not None and (not isinstance(self.session, str) or not LABEL.allows(self.session)):
            raise ValueError(f"session must be {LABEL.describe()}")
        for what, value in (("persona", self.persona), ("session", self.session)):
            if value is not None and not _is_utf8(value):
                raise ValueError(f"{what} is not valid UTF-8 text (it holds a lone surrogate, the mark of an "
                                 "undecodable byte): give it as UTF-8")
        try:
            object.__setattr__(self, "max_scope", Scope(self.max_scope))
        except ValueError:
            raise ValueError(f"scope must be persona, project or session, not {self.max_scope!r}") from None
        if self.max_scope is not Scope.PERSONA and self.session is None:
            raise ValueError(f"scope {self.max_scope.value!r} needs a session (it is relative to the caller's "
                             "session)")

    @property
    def narrowed(self) -> bool:
        return self.max_scope is not Scope.PERSONA

    def scope_for(self, requested: Scope | str | None) -> Scope:
        """The scope a search runs with: the principal's, or a narrower one the call asked for."""
        if requested is None:
            return self.max_scope
        scope = Scope(requested)
        if _WIDTH[scope] > _WIDTH[self.max_scope]:
            allowed = ", ".join(repr(s.value) for s in _WIDTH if _WIDTH[s] <= _WIDTH[self.max_scope])
            raise ToolFailure(f"{SEARCH_TOOL}: scope {scope.value!r} is wider than this server allows: it answers "
                              f"for persona {self.persona!r} with at most scope {self.max_scope.value!r} "
                              f"(allowed: {allowed})", "scope_wider")
        return scope

    def describe(self) -> str:
        session = f", session {self.session!r}" if self.session else ""
        return f"persona {self.persona!r}{session}, widest scope {self.max_scope.value!r}"


# -- arguments -------------------------------------------------------------------------------------------


def _json_list(value: Any) -> Any:
    """Some clients send a list argument as a JSON string (``'["memory"]'``)."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _no_nul(value: Any) -> Any:
    if isinstance(value, str) and "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


class SearchArgs(BaseModel):
    """``memory_search`` arguments. No ``persona`` or ``session``: the server fixes them."""

    model_config = ConfigDict(extra="forbid", title="memory_search arguments")

    query: Annotated[str, BeforeValidator(_no_nul)] = Field(
        min_length=1, max_length=MAX_QUERY_CHARS,
        description="What to recall, in natural words: a topic, a decision, a name, a date (\"last week\", "
                    "\"in March\", \"2025-03-01\" favour what was said then).")
    max_results: int = Field(6, ge=1, le=100, description="How many documents to return (best first).")
    min_score: float = Field(0.0, ge=0.0, le=1.0,
                             description="Drop results scoring below this (scores are 0..1, comparable across "
                                         "queries; 0.3 keeps only clear matches).")
    mode: Literal["hybrid", "vector", "keyword"] = Field(
        "hybrid", description="hybrid (default): meaning and exact words; vector: meaning only; keyword: exact "
                              "words (names, ids, error messages).")
    sources: Annotated[list[Literal["sessions", "memory"]] | None, BeforeValidator(_json_list)] = Field(
        None, min_length=1, max_length=2,
        description="sessions: past conversations; memory: the persona's memory files (MEMORY.md, memory/*.md). "
                    "Default: both.")
    scope: Literal["persona", "project", "session"] | None = Field(
        None, description="Only narrow the search: session (this conversation) ⊂ project (sessions of this "
                          "project) ⊂ persona (every conversation of this agent). Default: the widest scope the "
                          "server allows; a wider one is refused.")


class GetArgs(BaseModel):
    """``memory_get`` arguments; ``from`` is a Python keyword, hence the alias."""

    model_config = ConfigDict(extra="forbid", title="memory_get arguments")

    path: Annotated[str, BeforeValidator(_no_nul)] = Field(
        min_length=1, max_length=4096,
        description="A path from a memory_search result (sessions/<session>/turns/<turn>.md, memory/...).")
    from_: int = Field(1, alias="from", ge=1, le=1_000_000_000, description="First line to return, 1-based.")
    lines: int | None = Field(None, ge=1, le=10_000, description="How many lines (default: to the end).")


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The tool's ``inputSchema``: the argument model by alias, ``additionalProperties: false``."""
    return model.model_json_schema(by_alias=True)


def parse_args(tool: str, model: type[BaseModel], raw: dict[str, Any], principal: McpPrincipal):
    """Validate a call's arguments; a refusal says what was wrong in one line (never the values)."""
    fixed = sorted(k for k in raw if k in _FIXED)
    if fixed:
        raise ToolFailure(f"{tool} does not take {', '.join(repr(k) for k in fixed)}: the persona, the session "
                          f"and the widest scope are fixed by the server ({principal.describe()}) and cannot be "
                          "chosen by a tool call", "fixed_argument")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise _refusal(tool, model, exc) from None


def _refusal(tool: str, model: type[BaseModel], exc: ValidationError) -> ToolFailure:
    """One line naming the first argument that failed (never its value)."""
    field, msg, kind, more = first_invalid(exc) or ("", str(exc), "", 0)
    field = field or "arguments"
    if kind == "extra_forbidden":
        allowed = ", ".join(f.alias or name for name, f in model.model_fields.items())
        message = f"unknown argument {field!r} (arguments: {allowed})"
    else:
        message = f"invalid argument {field!r}: {msg}"
    return ToolFailure(f"{tool}: {message}" + (f" (and {more} more)" if more else ""), "invalid_argument")


def search_request(principal: McpPrincipal, args: SearchArgs) -> SearchRequest:
    """The search the call runs: the principal's persona and session, its scope or a narrower one.
    Arguments the search itself refuses are refused as arguments (never an internal error)."""
    try:
        return SearchRequest(query=args.query, persona=principal.persona, session=principal.session,
                             scope=principal.scope_for(args.scope), sources=args.sources or ["sessions", "memory"],
                             max_results=args.max_results, min_score=args.min_score, mode=args.mode)
    except ValidationError as exc:
        raise _refusal(SEARCH_TOOL, SearchRequest, exc) from None


def document_visible(state, principal: McpPrincipal, path: str) -> bool:
    """Whether ``path`` lies inside the principal's widest scope (``state``: an
    :class:`indexer.state.db.StateDB`). ``get_document`` already applies the
    persona-wide rules (private, deleted sessions); this adds the narrowed scopes."""
    record = state.file(principal.persona, path)
    if record is None:
        return False
    scope = resolve(principal.persona, principal.max_scope, principal.session, frozenset({"sessions", "memory"}),
                    state.scope_facts(principal.persona, principal.session))
    return scope.allows({"persona": principal.persona, "source": record.source, "session": record.session,
                         "turn_id": record.turn_id})


def not_found(principal: McpPrincipal, path: str) -> ToolFailure:
    return ToolFailure(f"{GET_TOOL}: no document {path!r} for persona {principal.persona!r} within this server's scope "
                       "(paths come from memory_search results)", "not_found")


# -- results ---------------------------------------------------------------------------------------------


def search_result(data: dict) -> dict:
    """A search answer in the HTTP API's shape (checked), JSON-ready."""
    return SearchResponseModel.model_validate(data).model_dump(mode="json", by_alias=True)


def get_result(data: dict) -> dict:
    return GetResponseModel.model_validate(data).model_dump(mode="json", by_alias=True)


def as_text(data: dict) -> str:
    """The text block beside the structured content: the same object as JSON (MCP's recommendation)."""
    return json.dumps(data, ensure_ascii=False)


# -- who answers -----------------------------------------------------------------------------------------


class MemoryDoor(Protocol):
    """Answers the tools: the daemon in-process, the daemon over HTTP, or an index opened here.

    Raise :class:`ToolFailure` for an answer the model should read (not found, a
    refused scope, index unavailable); anything else is logged and answered as an
    internal error.
    """

    name: str

    async def search(self, request: SearchRequest) -> dict:
        """``SearchResponse.as_dict()`` of the search."""
        ...

    async def get(self, principal: McpPrincipal, path: str, from_line: int, lines: int | None) -> dict:
        """``GetResult.as_dict()`` of the principal's document: not found (a ToolFailure) when the
        document is outside the principal's persona, visible sessions or widest scope
        (:func:`document_visible` for narrowed principals)."""
        ...


# -- descriptions ----------------------------------------------------------------------------------------

INSTRUCTIONS = (
    "Long-term memory of this agent: every past conversation (sessions) and its memory files, searchable. "
    "Before answering anything about prior work, decisions, dates, people, preferences or todos, call "
    "memory_search, then memory_get for the lines you need.")

SEARCH_DESCRIPTION = (
    "Mandatory recall step: search this agent's long-term memory before answering any question about prior "
    "work, decisions, dates, people, preferences, or todos. The memory holds every past conversation of this "
    "agent (each turn: what the user asked and what the assistant answered, with its date) and its memory "
    "files (MEMORY.md, memory/*.md). Returns the best matching documents with path, session, turn, date, "
    "score (0..1) and a snippet of the matching lines; use memory_get with a path to read more. The persona, "
    "the caller's session and the widest scope are fixed by the server; `scope` can only narrow it. If "
    "nothing relevant comes back, say you checked and found nothing.")

GET_DESCRIPTION = (
    "Read a document from this agent's memory: a path from a memory_search result, optionally only `lines` "
    "lines starting at line `from`. Use it after memory_search to pull the exact lines you need (a whole past "
    "turn, a memory file) and keep the context small. Returns persona, path, from, lines, total_lines and "
    "text. Only documents within the server's scope can be read.")
