"""Request and response models of the HTTP API (they make /openapi.json precise)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from fastapi import Path
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from indexer.core.names import DOC_PATH, LABEL, PERSONA, PROJECT_NAME, TextRule
from indexer.core.scopes import Scope
from indexer.search.searcher import MAX_QUERY_CHARS, Mode, SearchRequest

API_VERSION = "1.0.0"
DEFAULT_MAX_REQUEST_BYTES = 64_000
RETRY_AFTER_SECONDS = 5
ADMIN_DISABLED = "admin calls are disabled: set [api] admin_token_file"
MAX_LABELS = 1000
UNAVAILABLE = "index unavailable, retry"
MAX_ERROR_DETAILS = 20


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


def _json_int(value: Any) -> Any:
    if isinstance(value, (bool, str)):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value


def _text(rule: TextRule) -> Any:
    return Field(min_length=1, max_length=rule.max_length, json_schema_extra=rule.schema())


Persona = Annotated[str, _text(PERSONA), AfterValidator(_no_nul)]
Label = Annotated[str, _text(LABEL)]
ProjectName = Annotated[str, Path(min_length=1, max_length=PROJECT_NAME.max_length,
                                  json_schema_extra=PROJECT_NAME.schema(), description="Project name."),
                        AfterValidator(_no_nul)]
DocPath = Annotated[str, _text(DOC_PATH), AfterValidator(_no_nul)]


class SearchRequestBody(SearchRequest):
    """:class:`indexer.search.searcher.SearchRequest` as the HTTP body, checked strictly.

    Same fields, defaults and validators, but without pydantic's lax coercions
    (``"6"`` or ``6.0`` for ``max_results``, ``false`` for ``min_score`` are
    refused, not silently converted), no NUL in ``persona`` (``session`` is any label), and
    the query rule (a non-blank character, no NUL) written into the schema so
    that /openapi.json states what the server enforces. The endpoint hands the
    backend a plain ``SearchRequest`` built from it.
    """

    model_config = ConfigDict(strict=True, title="SearchRequest", json_schema_extra={
        # The session and project scopes need the caller's session (indexer.core.scopes.resolve).
        "if": {"properties": {"scope": {"enum": [Scope.SESSION.value, Scope.PROJECT.value]}}, "required": ["scope"]},
        "then": {"properties": {"session": {"type": "string", "minLength": 1}}, "required": ["session"]},
    })

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS,
                       description="Free text: at least one non-blank character, no NUL.",
                       json_schema_extra={"pattern": r"^[^\x00]*[^\s\x00][^\x00]*$"})
    persona: Persona = Field(description="The ledger's persona_id.")
    session: Annotated[str, Field(max_length=LABEL.max_length)] | None = Field(
        None, description="The caller's session label, verbatim (needed by the session and project scopes).")
    scope: Annotated[Scope, Field(strict=False)] = Scope.PERSONA  # strict enums would refuse their JSON strings
    # JSON Schema's "integer" includes 18.0; lax int takes it (and refuses 18.5), _json_int refuses "18" and true.
    max_results: Annotated[int, Field(ge=1, le=100, strict=False), BeforeValidator(_json_int)] = 6
    mode: Annotated[Mode, Field(strict=False)] = Mode.HYBRID

    @field_validator("scope")
    @classmethod
    def _scope_needs_session(cls, value: Scope, info: ValidationInfo) -> Scope:
        if value in (Scope.SESSION, Scope.PROJECT) and "session" in info.data and not info.data["session"]:
            raise ValueError(f"scope '{value.value}' needs the caller's session label in 'session'")
        return value

    def plain(self) -> SearchRequest:
        return SearchRequest.model_validate(dict(self))


class ErrorDetail(BaseModel):
    field: str = Field(description="Where the problem is: a body key (dotted for nested ones) or a parameter.")
    message: str
    type: str


class ErrorBody(BaseModel):
    error: str = Field(description="What went wrong and what to do about it.")
    details: list[ErrorDetail] | None = Field(None, description="One entry per invalid field (422 only).")


class SearchResultModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str
    source: Literal["sessions", "memory"]
    persona: str
    session: str | None = Field(description="The ledger's session label; null for the memory source.")
    turn_id: str | None
    kind: Literal["turn", "compaction", "memory"]
    start_line: int
    end_line: int
    score: float = Field(ge=0.0, le=1.0, allow_inf_nan=False, description=(
        "0..1, higher is better, the same scale for every query: ≥ 0.9 the query's own words and meaning, "
        "0.5–0.9 clearly on the subject, 0.2–0.5 a word or two or a related subject in common, < 0.1 unrelated."))
    snippet: str
    timestamp: str | None = Field(description="ISO-8601, when known.")
    sessions: list[str] = Field(default_factory=list, description=(
        "Every session in the caller's scope that holds this turn (forked sessions share turns; the turn is "
        "returned once), this result's own session first; empty for the memory source."))


class SearchWarningModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str
    message: str


class SearchResponseModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    results: list[SearchResultModel]
    mode: Literal["hybrid", "vector", "keyword"]
    model: str
    took_ms: float = Field(ge=0.0, allow_inf_nan=False)
    warnings: list[SearchWarningModel] = Field(default_factory=list, description=(
        "Present parts of the answer that are missing: e.g. `fts_unavailable` when the full-text stage "
        "failed and the results come from the vector stage only. Empty when the answer is complete."))


class GetRequestBody(BaseModel):
    """``memory_get``'s parameters as a JSON body (``POST /v1/memory_get``): a session label has no
    cap of its own, and one of tens of thousands of characters does not fit a request line."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True, title="GetRequest")

    persona: Persona = Field(description="The ledger's persona_id.")
    path: DocPath = Field(description="A path from a search result.")
    from_line: Annotated[int, Field(alias="from", ge=1, le=1_000_000_000, strict=False),
                         BeforeValidator(_json_int)] = Field(1, description="First line, 1-based.")
    lines: Annotated[int, Field(ge=1, le=10_000, strict=False), BeforeValidator(_json_int)] | None = Field(
        None, description="How many lines (default: to the end).")
    session: Label | None = Field(None, description="The caller's session label (private sessions are visible "
                                                    "only to themselves).")


class GetResponseModel(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    persona: str
    path: str
    from_line: int = Field(alias="from", ge=1)
    lines: int = Field(ge=0, description="Lines returned.")
    total_lines: int = Field(ge=0)
    text: str


class ReindexProgress(BaseModel):
    """Documents (turns) of one persona: counted before the reindex builds the first."""

    model_config = ConfigDict(extra="allow")

    done: int = Field(ge=0, description="Turns considered so far (written, skipped or left pending).")
    total: int | None = Field(None, ge=0, description="Turns the reindex considers in all.")


class ReindexJob(BaseModel):
    model_config = ConfigDict(extra="allow")

    job_id: str
    state: Literal["queued", "running", "done", "failed"]
    personas: list[str] | None = Field(None, description="null: every persona.")
    progress: dict[str, ReindexProgress] = Field(default_factory=dict)
    error: str | None = None


class ReindexRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    personas: list[Persona] | None = Field(None, min_length=1, max_length=MAX_LABELS,
                                           description="Personas to reindex; null or absent: every persona.")


class LabelsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    labels: list[Label] = Field(min_length=1, max_length=MAX_LABELS, description="Session labels, verbatim.")


class ProjectChange(BaseModel):
    model_config = ConfigDict(extra="allow")

    project: str
    sessions: list[str] = Field(description="The project's session labels after the change.")


class ProjectAdded(ProjectChange):
    unknown: list[str] = Field(description="Labels of the request that no indexed session has yet (a typo, or a "
                                           "session still to come): they join the project when one is indexed.")


class ProjectRemoved(ProjectChange):
    removed: int = Field(ge=0, description="How many of the labels were members and are no longer.")


class ProjectList(BaseModel):
    projects: dict[str, list[str]]


class VisibilityRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    label: Label
    visibility: Literal["private", "shared"]


class VisibilityResponse(BaseModel):
    label: str
    visibility: Literal["private", "shared"]


class PersonaStatus(BaseModel):
    """One persona in ``GET /v1/status``; every key optional, extra keys passed through."""

    model_config = ConfigDict(extra="allow")

    cursor: int | None = Field(None, description="Last session_history.id processed.")
    ledger_head: int | None = Field(None, description="Highest session_history.id in the ledger.")
    lag: int | None = Field(None, description="ledger_head - cursor.")
    documents: int | None = None
    chunks: int | None = None
    last_sync_at: float | str | None = Field(None, description="Time of the last sync batch (Unix seconds or "
                                                               "ISO-8601).")
    last_sync_seconds: float | None = None
    bad_rows_skipped: int | None = None
    model: str | None = Field(None, description="Embedding model.")
    index_meta: dict[str, Any] | None = None


class StatusReport(BaseModel):
    model_config = ConfigDict(extra="allow")

    personas: dict[str, PersonaStatus]


class StatusText(BaseModel):
    status: str
    reason: str | None = Field(None, description="Why not ready (absent when ready): still starting, or the "
                                                 "first sync failing and its cause (e.g. a full disk) and fix.")
    cache: dict[str, Any] | None = Field(None, description="/healthz of a reader on object storage: its local "
                                         "copy of the tables, `state` cold, prefetching or warm (queries are "
                                         "answered meanwhile, from the store), prefetch progress in files and "
                                         "bytes, disk held and its budget, `warm_seconds` from start to warm.")


_M = TypeVar("_M", bound=BaseModel)

_ERROR_TEXT = {
    400: "Malformed request (e.g. the body is not valid JSON).",
    401: "Missing or wrong admin bearer token.",
    403: "Admin calls are disabled (no [api] admin_token_file).",
    404: "Not found.",
    413: "Request body larger than the configured limit.",
    415: "The request body must be JSON (Content-Type: application/json).",
    422: "Invalid request: `details` names each invalid field.",
    503: "Index unavailable (starting, reindex swap, or a backend failure; a read-only file system, permission "
         "or I/O error is named with its fix): retry later.",
    507: "Disk full: the answer names the folder, the free space and the fix; retry once there is room.",
}


def _errors(*codes: int, **texts: str) -> dict[int | str, dict[str, Any]]:
    if 503 in codes:  # any backend call may fail on a full disk (indexer.service.api.errors._storage_refusal)
        codes = (*codes, 507)
    return {code: {"model": ErrorBody, "description": texts.get(f"e{code}", _ERROR_TEXT[code])} for code in codes}


_BODY_ERRORS = (400, 413, 415, 422)

