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


def start_s3() -> S3Server:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    return S3Server(port, server)
