"""Where the index folder is, from the config file and the environment, with the standard
library only: the CLI's daemon fast path needs this one value to find a running daemon
(its host and port are in the index lock's holder record), and validating the whole
configuration would cost more than the daemon's answer. ``load_config`` uses the same
definitions, so the two never disagree; anything irregular here returns None and the
caller loads (and validates) the full configuration."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path

ENV_PREFIX = "LEDGER_INDEXER_"
DEFAULT_INDEX_DIR = Path("/var/lib/ledger-indexer")
INDEX_DIR_ENV = f"{ENV_PREFIX}INDEX_DIR"


def resolve_path(path: Path, base: Path) -> Path:
    """``~`` expanded; a relative path is relative to the config file's folder."""
    path = path.expanduser()
    return path if path.is_absolute() else base / path


def index_dir(config_path: str | os.PathLike[str] | None, env: Mapping[str, str] | None = None) -> Path | None:
    """The configured ``[index] dir`` (the environment overriding the file), or None when the
    file cannot be read or the value is not a string."""
    env = os.environ if env is None else env
    base = Path.cwd()
    value: object = None
    if config_path is not None:
        path = Path(config_path)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
            base = path.resolve().parent
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            return None
        section = data.get("index")
        value = section.get("dir") if isinstance(section, dict) else None
    value = env.get(INDEX_DIR_ENV, value)
    if value is None:
        return DEFAULT_INDEX_DIR
    if not isinstance(value, str) or not value:
        return None
    return resolve_path(Path(value), base)
