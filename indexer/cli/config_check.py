"""``ledger-indexer config check``: is this configuration ready to run? One line per check.

Reads only: the ledger is opened read-only, the index folder and token files are
inspected, nothing is created or written."""

from __future__ import annotations

import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from indexer.cli.common import EXIT_FAIL, EXIT_OK, print_json
from indexer.runtime.config import Config, ConfigError
from indexer.runtime.mounts import unfit_for_files


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str


def _writable_folder(path: Path) -> tuple[bool, str]:
    """Whether ``path`` is (or can be created as) a folder this process can write."""
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            return False, f"{path}: no existing parent folder"
        probe = probe.parent
    if not probe.is_dir():
        return False, f"{path}: {probe} is not a folder"
    unfit = unfit_for_files(probe)
    if unfit is not None:
        return False, f"{path}: {unfit}"
    if not os.access(probe, os.W_OK | os.X_OK):
        return False, f"{path}: {probe} is not writable by this user"
    return True, f"{path}" + ("" if probe == path else " (will be created)")


def check_ledger(config: Config) -> Check:
    from ledger.connection import LedgerUnavailable
    from ledger.reader import LedgerReader

    if config.index.object_store and not config.ledger.path.exists():  # a reader machine has no ledger
        return Check("ledger", True, f"none at {config.ledger.path}: fine for a reader of {config.index.uri} "
                                     "(`ledger-indexer serve`); the writer (`run`) needs [ledger] path")

    try:
        reader = LedgerReader.open(config.ledger.path)
    except LedgerUnavailable as exc:
        return Check("ledger", False, str(exc))
    try:
        return Check("ledger", True, f"{config.ledger.path} (read-only, head {reader.head_id()})")
    except Exception as exc:  # a file that opens but is not a ledger
        return Check("ledger", False, f"{config.ledger.path}: not readable as an Agents Ledger ({exc})")
    finally:
        reader.close()


def check_index(config: Config) -> Check:
    ok, detail = _writable_folder(config.index.dir)
    return Check("index dir", ok, detail if ok else detail + "; set [index] dir to a writable folder")


def check_model(config: Config) -> Check:
    if "lancedb" not in config.index.sinks:
        return Check("model", True, "not needed (no lancedb sink)")
    if config.embedding.model_path:
        found = Path(config.embedding.model_path)
        return Check("model", found.is_dir(), f"{found}" + ("" if found.is_dir() else ": no such folder"))
    from indexer.embedding import model_files, packaged

    spec = packaged.MODELS.get(config.embedding.model)
    if spec is None:  # not a packaged model: fastembed fetches it
        others = ", ".join(m for m in packaged.MODELS if m != packaged.DEFAULT.name)
        return Check("model", True, f"{config.embedding.model}: not the packaged model "
                                    f"({packaged.DEFAULT.name}; also packaged: {others}); fastembed downloads it into "
                                    f"{config.index.dir / 'models'} at the first run (network needed), "
                                    "or set [embedding] model_path to its folder")

    try:
        verified = spec.verify(model_files.default_models_root() / spec.folder_name)
    except model_files.ModelFilesError as exc:
        return Check("model", False, f"{exc}")
    return Check("model", True, f"{verified.path} (verified)")


def check_token(config: Config) -> Check:
    path = config.api.admin_token_file
    if path is None:
        return Check("admin token", True, "not set: admin calls (reindex, projects, visibility) are refused")
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        return Check("admin token", False, f"cannot read {path}: {exc}")
    return Check("admin token", bool(token), f"{path}" + ("" if token else " is empty"))


def check_mcp_tokens(config: Config) -> Check | None:
    if config.mcp.token_file is None:
        return None
    from indexer.service.mcp_http import TokenFileError, load_token_file

    try:
        table = load_token_file(config.mcp.token_file)
    except TokenFileError as exc:
        return Check("mcp tokens", False, str(exc))
    count = len(table)
    return Check("mcp tokens", True, f"{config.mcp.token_file} ({count} token{'s' if count != 1 else ''}"
                                     + ("; every /mcp request is refused" if not count else "") + ")")


def check_api_access(config: Config) -> Check | None:
    """Off loopback (or with the opt-out set): who may search and get. None on loopback (callers are
    trusted there, as always)."""
    from indexer.service.api.auth import OPT_OUT, is_loopback, unprotected_bind

    host, port, opt_out = config.api.host, config.api.port, config.api.insecure_allow_unauthenticated
    if is_loopback(host) and not opt_out:
        return None
    problem = unprotected_bind(host, port, tokens=config.mcp.token_file is not None, opt_out=opt_out)
    if problem is not None:
        return Check("api access", False, problem)
    if is_loopback(host):
        return Check("api access", True, f"{host}: loopback, {OPT_OUT} has no effect here")
    if opt_out:
        return Check("api access", True, f"INSECURE: {host}:{port} is off loopback and {OPT_OUT} is set: anyone who "
                                         "can reach the port may search and read any persona's memory without a "
                                         "token")
    return Check("api access", True, f"{host}:{port} is off loopback: search and get need a bearer token from "
                                     "[mcp] token_file, /v1/status and /metrics the admin token")


def check_known_secrets(config: Config) -> Check | None:
    if config.redaction.known_secrets_file is None:
        return None
    from indexer.sync.context import known_secrets

    try:
        known = known_secrets(config)
    except ConfigError as exc:
        return Check("known secrets", False, str(exc))
    count = len(known.values) if known is not None else 0
    return Check("known secrets", True, f"{config.redaction.known_secrets_file} ({count} value(s) masked wherever "
                                        "they appear; values never printed)")


def check_qmd(config: Config) -> Check | None:
    if "qmd" not in config.index.sinks:
        return None
    ok, detail = _writable_folder(config.qmd_export_dir)
    command = config.qmd.update_command
    if command and shutil.which(command[0]) is None and not Path(command[0]).is_file():
        return Check("qmd", False, f"update command {command[0]!r} not found on PATH")
    return Check("qmd", ok, f"export {detail}" + (f", update: {' '.join(command)}" if command else
                                                   ", no update command (run `qmd update` yourself)"))


def check_memory(config: Config) -> list[Check]:
    out = []
    for persona, entries in config.memory.items():
        missing = [str(p) for p in entries if not p.exists()]
        out.append(Check(f"memory {persona}", not missing,
                         f"{len(entries)} path(s)" + (f"; missing: {', '.join(missing)}" if missing else "")))
    return out


def run_config_check(config: Config, *, as_json: bool = False) -> int:
    checks = [check_ledger(config), check_index(config), check_model(config), check_token(config)]
    checks += [c for c in (check_mcp_tokens(config), check_api_access(config), check_known_secrets(config),
                           check_qmd(config)) if c]
    checks += check_memory(config)
    if as_json:
        print_json({"ok": all(c.ok for c in checks), "checks": [asdict(c) for c in checks]})
    else:
        for c in checks:
            print(f"{'ok  ' if c.ok else 'FAIL'}  {c.name}: {c.detail}")
    return EXIT_OK if all(c.ok for c in checks) else EXIT_FAIL
