"""Configuration: one TOML file, every key overridable by an environment variable.

``LEDGER_INDEXER_<SECTION>_<KEY>`` overrides ``[section] key`` (lists take a
JSON array or a comma-separated string). A missing section takes its
defaults; an unknown key, an unknown ``LEDGER_INDEXER_*`` variable or a bad
value raises :class:`ConfigError` naming the key and the reason. Relative
paths are resolved against the config file's folder.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from indexer.runtime.locate import DEFAULT_INDEX_DIR, ENV_PREFIX, resolve_path

# Variables with the prefix that are not config keys.
_NON_KEY_ENV = {"LEDGER_INDEXER_CONFIG", "LEDGER_INDEXER_KNOWN_SECRETS", "LEDGER_INDEXER_LOG_LEVEL_CLI"}


def _no_nul(path: Path | None) -> Path | None:
    if path is not None and "\x00" in str(path):
        raise ValueError("a path cannot contain a NUL character")
    return path


# A path the OS can open (no NUL: every system call would refuse it, deep inside a pass).
SafePath = Annotated[Path, AfterValidator(_no_nul)]
# An empty string means "not set" for optional paths, as in the documented defaults.
OptPath = Annotated[Path | None, BeforeValidator(lambda v: None if v == "" else v), AfterValidator(_no_nul)]


class ConfigError(ValueError):
    """The configuration is invalid. The message names the key and the reason."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LedgerConfig(_Section):
    path: SafePath = Path("/var/lib/nexus/state/data/agents.db")
    personas: tuple[str, ...] = ()
    max_message_bytes: int = Field(1_000_000, ge=1_000)


#: URI schemes LanceDB opens as object storage (``s3+ddb``: S3 with a DynamoDB commit table, for
#: S3-compatible stores without conditional PUT).
OBJECT_STORE_SCHEMES = ("s3", "s3+ddb", "gs", "az", "abfss")


class IndexConfig(_Section):
    dir: SafePath = DEFAULT_INDEX_DIR
    sinks: tuple[Literal["lancedb", "qmd"], ...] = ("lancedb",)
    # Where the LanceDB tables live: "" = <dir>/lancedb; a local folder; or s3://bucket/prefix,
    # gs://…, az://… (the state DB and the writer lock stay in ``dir``, on the writer machine).
    uri: str = ""
    # Passed to LanceDB as they are (credentials, aws_endpoint, aws_region, allow_http, …).
    storage_options: dict[str, str] = {}
    # On object storage: how stale a reader may be (table versions, table pointer, scope state), seconds.
    refresh_seconds: float = Field(2.0, ge=0, le=300)
    # On object storage: the writer lease; a writer silent this long may be replaced by another.
    lease_seconds: float = Field(60.0, ge=1, le=3600)
    # Memory for the columns search ranks by, per live table (~100 bytes a row: 10 MB at 100k
    # chunks), in a process that answers queries (daemon, `search --batch`); 0 reads them from
    # the tables at every query (slower: ~20 ms more per persona-scope query at 100k chunks).
    rank_cache_mb: int = Field(256, ge=0, le=65536)
    # How a searcher reads a local index's files: "io_uring" (fewer thread handoffs: less CPU per
    # query), "threads" (lance's default), "auto" (io_uring where the kernel lets this process use it).
    local_reads: Literal["auto", "io_uring", "threads"] = "auto"
    # On object storage: a reader's local copy of the live tables' immutable files (exporters/lancedb/
    # mirror.py), so a warm query reads no object; 0 turns it off (every query reads the store).
    cache_disk_mb: int = Field(20480, ge=0, le=16 * 2**20)
    # Where that copy lives: "" = <dir>/reader-cache.
    cache_dir: str = ""
    # Memory for opened indexes (vector partitions, full-text postings) of a searching process.
    cache_memory_mb: int = Field(1024, ge=64, le=65536)

    @field_validator("uri")
    @classmethod
    def _uri(cls, value: str) -> str:
        value = value.strip()
        scheme, sep, rest = value.partition("://")
        if sep and scheme.lower() not in (*OBJECT_STORE_SCHEMES, "file"):
            raise ValueError(f"unsupported scheme {scheme!r}: use a local folder, file://, "
                             + ", ".join(f"{s}://" for s in OBJECT_STORE_SCHEMES))
        if sep and scheme.lower() != "file" and not rest.split("/", 1)[0]:
            raise ValueError(f"{value!r} names no bucket (expected {scheme}://bucket/prefix)")
        return value

    @field_validator("storage_options", mode="before")
    @classmethod
    def _strings(cls, value: object) -> object:
        if isinstance(value, dict):
            bad = [k for k, v in value.items() if not isinstance(v, str)]
            if bad:
                raise ValueError(f"every value must be a string (LanceDB storage options): {', '.join(bad)}; "
                                 'quote it, e.g. allow_http = "true"')
        return value

    @property
    def object_store(self) -> bool:
        """True when the LanceDB tables live on object storage (reader machines can search them)."""
        scheme, sep, _ = self.uri.partition("://")
        return bool(sep) and scheme.lower() in OBJECT_STORE_SCHEMES

    @field_validator("sinks")
    @classmethod
    def _non_empty(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("at least one sink is needed: 'lancedb', 'qmd' or both")
        return tuple(dict.fromkeys(value))


class QmdConfig(_Section):
    export_dir: OptPath = None  # default: <index.dir>/qmd
    update_command: tuple[str, ...] = ()
    update_timeout_seconds: float = Field(120.0, gt=0)


class EmbeddingConfig(_Section):
    model: str = "sentence-transformers/all-MiniLM-L6-v2"  # indexer.embedding.packaged.DEFAULT
    model_path: str = ""
    batch_size: int = Field(32, ge=1, le=256)
    # padded tokens per model batch (texts x the longest); 0: batches bounded by batch_size only
    max_batch_tokens: int = Field(2048, ge=0)
    # ONNX Runtime's CPU arena (faster embedding); with release_memory it is shrunk after every model run
    cpu_mem_arena: bool = True
    # ONNX Runtime worker threads busy-wait between parallel sections (true: ORT's default)
    allow_spinning: bool = False
    # the arena shrunk after every run; glibc: a fixed mmap threshold, malloc_trim after embedding, Arrow on
    # the system allocator (freed native memory back to the OS); false: the libraries' defaults
    release_memory: bool = True


class RedactionConfig(_Section):
    known_secrets_file: OptPath = None


class ApiConfig(_Section):
    host: str = "127.0.0.1"
    port: int = Field(8765, ge=0, le=65535)
    admin_token_file: OptPath = None
    max_request_bytes: int = Field(64_000, ge=1_000)
    # Off loopback the API needs [mcp] token_file (search and get take its bearer tokens) or start-up
    # fails; true serves it there without tokens, trusting every caller for persona and session (a
    # warning at every start).
    insecure_allow_unauthenticated: bool = False


class McpConfig(_Section):
    # JSON lines, one bearer token each: {"token", "persona", "session"?, "max_scope"?, "name"?}.
    # Empty: MCP over HTTP (/mcp on the daemon) is off; `ledger-indexer mcp` (stdio) needs no token.
    token_file: OptPath = None


class SyncConfig(_Section):
    interval_seconds: float = Field(30.0, gt=0)
    debounce_ms: int = Field(200, ge=0)
    maintenance_minutes: float = Field(10.0, gt=0)
    # no longer used (issue 37: the worker's trims released 1-8 MB); accepted so existing configs load
    trim_memory_seconds: float = Field(60.0, ge=0)
    # Documents per sink write; their hashes are committed after each. Bigger writes are faster
    # (a LanceDB write has a fixed cost, and the embedder sorts each write's texts by tokens, so
    # they pad less: 1,000 turns 86-89 turns/s at 128 vs 71-74 at 32); smaller ones stop sooner
    # on SIGTERM (a check between writes) and redo less after a crash. Embedding memory is
    # bounded by [embedding] max_batch_tokens, not by this.
    docs_per_write: int = Field(128, ge=1, le=10_000)
    # a pass still running logs `sync.progress` (done, total, rate, ETA) this often
    progress_log_seconds: float = Field(10.0, gt=0)


class Config(_Section):
    ledger: LedgerConfig = LedgerConfig()
    index: IndexConfig = IndexConfig()
    qmd: QmdConfig = QmdConfig()
    embedding: EmbeddingConfig = EmbeddingConfig()
    memory: dict[str, tuple[SafePath, ...]] = {}
    redaction: RedactionConfig = RedactionConfig()
    api: ApiConfig = ApiConfig()
    sync: SyncConfig = SyncConfig()
    mcp: McpConfig = McpConfig()

    @property
    def qmd_export_dir(self) -> Path:
        return self.qmd.export_dir or (self.index.dir / "qmd")

    @property
    def state_db_path(self) -> Path:
        return self.index.dir / "state.sqlite"

    @property
    def lancedb_dir(self) -> Path:
        """The local LanceDB folder (``index.uri`` when it is a folder, else ``<index.dir>/lancedb``)."""
        if self.index.uri and not self.index.object_store:
            return Path(self.index.uri.removeprefix("file://"))
        return self.index.dir / "lancedb"

    @property
    def lancedb_uri(self) -> str:
        """Where LanceDB opens the tables: the local folder, or the object-store URI."""
        return self.index.uri if self.index.object_store else str(self.lancedb_dir)


_SECTIONS: dict[str, type[_Section]] = {
    name: field.annotation  # type: ignore[misc]
    for name, field in Config.model_fields.items()
    if name != "memory"
}


def _parse_env_value(raw: str, annotation) -> object:
    text = raw.strip()
    is_list = "tuple" in str(annotation) or "dict" in str(annotation)
    if is_list:
        if text.startswith("[") or text.startswith("{"):
            try:
                return json.loads(text)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"not valid JSON: {exc}") from exc
        return [part.strip() for part in text.split(",") if part.strip()]
    return raw


def _env_overrides(env: Mapping[str, str]) -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    for name, raw in env.items():
        if not name.startswith(ENV_PREFIX) or name in _NON_KEY_ENV:
            continue
        rest = name[len(ENV_PREFIX):].lower()
        section, _, key = rest.partition("_")
        if section == "memory" and key:
            # LEDGER_INDEXER_MEMORY_<PERSONA>: persona ids are case-sensitive, keep the original.
            persona = name[len(ENV_PREFIX) + len("MEMORY_"):]
            out.setdefault("memory", {})[persona] = _parse_env_value(raw, "tuple")
            continue
        model = _SECTIONS.get(section)
        if model is None or key not in model.model_fields:
            raise ConfigError(f"{name}: unknown setting (expected {ENV_PREFIX}<SECTION>_<KEY>, "
                              f"sections: {', '.join(sorted(_SECTIONS))}, memory)")
        try:
            out.setdefault(section, {})[key] = _parse_env_value(raw, model.model_fields[key].annotation)
        except ConfigError as exc:
            raise ConfigError(f"{name}: {exc}") from exc
    return out


def _resolve_paths(config: Config, base: Path) -> Config:
    def fix(p: Path | None) -> Path | None:
        if p is None or str(p) == "":
            return None
        return resolve_path(p, base)

    return config.model_copy(
        update={
            "ledger": config.ledger.model_copy(update={"path": fix(config.ledger.path)}),
            "index": config.index.model_copy(update={
                "dir": fix(config.index.dir),
                "uri": config.index.uri if (config.index.object_store or not config.index.uri)
                else str(fix(Path(config.index.uri.removeprefix("file://"))))}),
            "qmd": config.qmd.model_copy(update={"export_dir": fix(config.qmd.export_dir)}),
            "redaction": config.redaction.model_copy(
                update={"known_secrets_file": fix(config.redaction.known_secrets_file)}),
            "api": config.api.model_copy(update={"admin_token_file": fix(config.api.admin_token_file)}),
            "mcp": config.mcp.model_copy(update={"token_file": fix(config.mcp.token_file)}),
            "memory": {k: tuple(fix(p) for p in v) for k, v in config.memory.items()},
        }
    )


def _format_error(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        key = ".".join(str(x) for x in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        if key.startswith("index.storage_options"):  # may hold credentials: never echoed
            parts.append(f"{key}: {msg}")
            continue
        parts.append(f"{key}: {msg} (got {err.get('input')!r})")
    return "invalid config: " + "; ".join(parts)


def load_config(path: str | Path | None = None, *, env: Mapping[str, str] | None = None,
                overrides: Mapping[str, Mapping[str, object]] | None = None) -> Config:
    """Load ``path`` (or defaults when None), apply env and explicit overrides."""
    env = os.environ if env is None else env
    data: dict[str, dict[str, object]] = {}
    base = Path.cwd()
    if path is not None:
        path = Path(path)
        base = path.resolve().parent
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file not found: {path}") from None
        except IsADirectoryError:
            raise ConfigError(f"config path {path} is a directory: pass the TOML file itself") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}): a config file is UTF-8 TOML") from None
        except OSError as exc:
            raise ConfigError(f"cannot read the config file {path}: {exc.strerror or exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    for source in (_env_overrides(env), overrides or {}):
        for section, values in source.items():
            current = data.setdefault(section, {})
            if not isinstance(current, dict):
                raise ConfigError(f"[{section}] must be a table")
            current.update(values)
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_error(exc)) from None
    return _resolve_paths(config, base)
