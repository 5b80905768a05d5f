"""The CLI's fast path: when a daemon holds the index, ``search``, ``get`` and ``status``
are answered by its HTTP API instead of loading the model and opening the index here.

Standard library only (``http.client``): a CLI call's cost is its start-up, and the
daemon answers a query in tens of milliseconds."""

from __future__ import annotations

import http.client
import json
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from indexer.cli.common import EXIT_FAIL, EXIT_USAGE, CliError
from indexer.state.lock import read_holder

if TYPE_CHECKING:
    from indexer.runtime.config import Config


class RequestTooLarge(CliError):
    """The daemon's API refused the request's size (413): a session label of tens of thousands of
    characters. Labels have no cap of their own, so the caller answers such a request in-process."""

    def __init__(self, message: str):
        super().__init__(message, EXIT_USAGE)


@dataclass(frozen=True, slots=True)
class DaemonApi:
    """Where a running daemon answers; found through the index lock's holder record."""

    host: str
    port: int
    timeout_s: float = 60.0
    #: Its search, get and status answer only bearer tokens (the API listens off loopback): the CLI
    #: answers those here instead (it holds no token; the index is on this machine).
    tokens_required: bool = False

    @classmethod
    def at(cls, index_dir: Path, *, host: str | None = None, port: int | None = None) -> DaemonApi | None:
        """The daemon holding the index in ``index_dir``, or None when no daemon runs (a one-off
        sync holding the lock is not a daemon: the caller works in-process). The daemon records
        its host and port in the lock's holder record; ``host``/``port`` are the fallback."""
        if not index_dir.is_dir():
            return None
        holder = read_holder(index_dir)
        if holder is None or holder.role != "run":
            return None
        extra = holder.extra or {}
        found_host, found_port = extra.get("host") or host, extra.get("port") or port
        if not found_host or not found_port:
            return None
        if found_host in ("0.0.0.0", "::"):
            found_host = "127.0.0.1"
        return cls(str(found_host), int(found_port), tokens_required=extra.get("tokens_required") is True)

    @classmethod
    def running(cls, config: Config) -> DaemonApi | None:
        """:meth:`at` for a loaded configuration."""
        return cls.at(config.index.dir, host=config.api.host, port=config.api.port)

    @classmethod
    def located(cls, config_path: str | None) -> DaemonApi | None:
        """:meth:`at` for the index folder a config file names, without loading the whole
        configuration (see :mod:`indexer.runtime.locate`)."""
        from indexer.runtime.locate import index_dir

        found = index_dir(config_path)
        return cls.at(found) if found is not None else None

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    def call(self, method: str, path: str, body: dict | None = None, *,
             query: dict[str, Any] | None = None) -> tuple[int, Any]:
        """(status, parsed JSON body). Raises :class:`CliError` when the daemon does not answer."""
        if query:
            path += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        payload = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
        try:
            conn.request(method, path, body=payload, headers=headers)
            response = conn.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise CliError(f"a daemon holds the index but its API at {self.base} did not answer ({exc}); "
                           "check `journalctl -u ledger-indexer` or `ledger-indexer status`") from None
        finally:
            conn.close()
        try:
            data = json.loads(raw) if raw else None
        except ValueError:
            data = {"error": raw[:200].decode("utf-8", "replace")}
        return response.status, data

    def answer(self, method: str, path: str, body: dict | None = None, *,
               query: dict[str, Any] | None = None) -> Any:
        """The body of a 200 answer; an error answer becomes a :class:`CliError` carrying the
        API's one-line message (exit 2 for a request the daemon refuses as invalid)."""
        status, data = self.call(method, path, body, query=query)
        if status == 200:
            return data
        message = data.get("error") if isinstance(data, dict) else None
        details = data.get("details") if isinstance(data, dict) else None
        if details:
            message = "; ".join(f"{d.get('field')}: {d.get('message')}" for d in details[:3])
        if status == 413:
            raise RequestTooLarge(message or "request body too large")
        raise CliError(message or f"the daemon answered {status}", EXIT_USAGE if status in (400, 422) else EXIT_FAIL)
