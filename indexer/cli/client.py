"""Talk to a running daemon: the CLI's ``reindex`` and ``status`` delegate here."""

from __future__ import annotations

import sys
import time

import httpx

from indexer.cli.common import EXIT_FAIL, EXIT_OK, CliError
from indexer.cli.common import print_json as _print_json
from indexer.cli.remote import DaemonApi
from indexer.runtime.config import Config

POLL_S = 0.5


def _base_url(config: Config) -> str:
    """The running daemon's API (its address from the lock holder record), else the configured one."""
    daemon = DaemonApi.running(config)
    return daemon.base if daemon is not None else DaemonApi(config.api.host, config.api.port).base


def _token(config: Config, doing: str = "reindex") -> str:
    """The admin token for ``doing`` (``reindex``, ``session visibility``, ``project add``...), which a
    running daemon must apply through its admin API."""
    path = config.api.admin_token_file
    if path is None:
        raise CliError(f"a daemon is running and `{doing}` must go through its admin API, but no [api] "
                       "admin_token_file is configured: set it to a file holding a token (the daemon must be "
                       "restarted to read the same file), or stop the daemon and run the command again")
    try:
        return path.read_text().strip()
    except OSError as exc:
        raise CliError(f"cannot read the admin token {path}: {exc}") from None


def follow_reindex(config: Config, *, personas=None, as_json: bool = False) -> int:
    from indexer.cli.progress_bar import ProgressBar
    from indexer.sync.progress import PersonaProgress

    base = _base_url(config)
    headers = {"Authorization": f"Bearer {_token(config)}"}
    try:
        response = httpx.post(base + "/v1/admin/reindex", json={"personas": personas}, headers=headers, timeout=10)
    except httpx.HTTPError as exc:
        raise CliError(f"cannot reach the daemon at {base}: {exc}") from None
    if response.status_code >= 400:
        raise CliError(f"the daemon refused the reindex ({response.status_code}): {response.text}")
    job = response.json()
    print(f"reindex {job['job_id']} delegated to the running daemon (search keeps answering meanwhile)",
          file=sys.stderr)
    bar = ProgressBar("reindex")  # one bar in documents: the daemon counts every persona before it starts
    try:
        while True:
            try:
                reply = httpx.get(base + "/v1/admin/reindex", headers=headers, timeout=10)
                if reply.status_code != 200:
                    raise CliError(f"the daemon stopped reporting the reindex ({reply.status_code}): {reply.text}")
                job = reply.json()
            except (httpx.HTTPError, ValueError) as exc:
                raise CliError(f"lost the daemon while following the reindex: {exc}") from None
            progress = job.get("progress") or {}
            if progress:
                bar.show({p: PersonaProgress(v["done"], v.get("total") or 0) for p, v in progress.items()})
            if job.get("state") in ("done", "failed"):
                break
            time.sleep(POLL_S)
    finally:
        bar.close()
    if as_json:
        _print_json(job)
    else:
        print(f"reindex {job['state']}" + (f": {job['error']}" if job.get("error") else ""))
    return EXIT_OK if job.get("state") == "done" else EXIT_FAIL
