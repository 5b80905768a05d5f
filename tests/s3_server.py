"""A real S3-compatible server for tests: moto's server mode on 127.0.0.1.

One server per test module (:func:`moto_s3`), a fresh bucket per test
(:meth:`S3Server.bucket`). Credentials are always given (dummy ``test``/``test``):
without them Lance would look for instance metadata, i.e. traffic off 127.0.0.1.
"""

from __future__ import annotations

import logging
import socket
import uuid
from dataclasses import dataclass

REGION = "us-east-1"


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@dataclass
class S3Server:
    port: int
    server: object

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def options(self) -> dict[str, str]:
        """LanceDB storage options for this server."""
        return {"aws_access_key_id": "test", "aws_secret_access_key": "test", "aws_region": REGION,
                "aws_endpoint": self.endpoint, "allow_http": "true"}

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION, aws_access_key_id="test",
                            aws_secret_access_key="test")

    def bucket(self, name: str | None = None) -> str:
        """A new empty bucket; returns ``s3://<bucket>/index``."""
        name = name or f"b-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return f"s3://{name}/index"

    def keys(self, uri: str) -> list[str]:
        bucket, _, prefix = uri.removeprefix("s3://").partition("/")
        c = self.client()
        out, token = [], None
        while True:
            kw = {"Bucket": bucket, "Prefix": prefix}
            if token:
                kw["ContinuationToken"] = token
            r = c.list_objects_v2(**kw)
            out += [o["Key"] for o in r.get("Contents", [])]
            if not r.get("IsTruncated"):
                return out
            token = r["NextContinuationToken"]

    def stop(self) -> None:
        self.server.stop()


class _ProcessServer:
    """moto in its own process: the server's Python threads do not share the caller's GIL (for
    benchmarks, where the caller's own timing matters). ``module`` is run with ``python -m``
    and moto.server's arguments (``moto.server`` itself, or a wrapper that patches it first)."""

    def __init__(self, port: int, module: str = "moto.server") -> None:
        import os
        import subprocess
        import sys
        import time
        import urllib.request
        from pathlib import Path

        repo = str(Path(__file__).resolve().parents[1])  # a wrapper module of this repo (bench/...)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH")) if p))
        self.proc = subprocess.Popen([sys.executable, "-m", module, "-H", "127.0.0.1", "-p", str(port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1)
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the S3 server (moto) did not start") from None
                time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def start_s3(*, own_process: bool = False, server_module: str = "moto.server") -> S3Server:
    """An S3 server on 127.0.0.1: in this process (starts in milliseconds; tests) or in its own
    (``own_process``: benchmarks). ``server_module`` (own process only): what runs there, e.g.
    ``bench.s3_ranges``, moto with ranged reads at the cost of the range (see that module)."""
    port = free_port()
    if own_process:
        return S3Server(port, _ProcessServer(port, server_module))
    if server_module != "moto.server":
        raise ValueError("server_module needs own_process=True (a patch stays in its own process)")
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    return S3Server(port, server)
