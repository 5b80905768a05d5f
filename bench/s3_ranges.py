"""The benchmarks' S3-compatible server: moto's server mode, with ranged reads served at the
cost of the range.

Why: moto 5.2 keeps each object in a ``tempfile.SpooledTemporaryFile`` (on disk above ~5 MB)
and answers every GET by reading the *whole* object (``FakeKey.value``: seek(0), read()),
then cuts the requested range out of it (``moto/s3/responses.py`` ``_handle_range_header``).
A Lance query issues many small ranged reads (a page of a column, the rows of a few
candidates) into data files of 100-200 MB at 100k-1M chunks: each cost 0.1-0.5 s there, a
property of the test server, not of S3 — real S3 answers a ranged GET at the cost of the
range, and that is what the benchmark must measure.

The patch (:func:`patch_moto`), applied only in the benchmark's server process
(``python -m bench.s3_ranges``, started by :func:`tests.s3_server.start_s3` with
``server_module="bench.s3_ranges"``), never in the product and never in the tests' in-process
servers: ``FakeKey`` keeps an object's bytes in memory once, as an immutable ``bytes``, and
``FakeKey.value`` returns that object itself (no read, no copy). Then moto's own range handling
costs ``len()`` plus a slice of the range. What else moto does is unchanged: the ETag (MD5 of
the same bytes, computed once, as before), conditional requests (``If-None-Match: *`` on PUT,
which Lance's commits rely on; ``If-Match``), multipart uploads, listing, deletes. The bucket
is held in RAM (a 1M index: ~5 GB) instead of temp files.

It also counts the object requests it answers (per method, and the bytes of GET bodies) and
returns the counts in a header of every object response, ``x-bench-requests`` (JSON):
:func:`request_counts` reads them, so a benchmark can tell how many requests a query made.

    python -m bench.s3_ranges -H 127.0.0.1 -p PORT   (the arguments of ``python -m moto.server``)
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections import Counter

PATCHED = "_bench_in_memory_value"
COUNTS_HEADER = "x-bench-requests"
_counts: Counter = Counter()
_counts_lock = threading.Lock()
_trace = open(os.environ["BENCH_S3_TRACE"], "a") if os.environ.get("BENCH_S3_TRACE") else None


def patch_moto() -> None:
    """Make ``moto.s3.models.FakeKey`` hold its value as one in-memory ``bytes`` (idempotent)."""
    from moto.s3 import models
    from moto.utilities.utils import md5_hash

    key_cls = models.FakeKey
    if getattr(key_cls, PATCHED, False):
        return

    def get_value(self) -> bytes:
        return self._bench_bytes  # immutable: shared with every reader, sliced by the range handler

    def set_value(self, new_value) -> None:
        if isinstance(new_value, str):  # as moto's setter does
            new_value = new_value.encode("utf-8")
        self._bench_bytes = bytes(new_value)  # a bytearray (multipart completion) is copied once
        self.contentsize = len(self._bench_bytes)

    def etag(self) -> str:
        if self._etag is None:  # as moto's: the MD5 of the value, once (a multipart ETag is given)
            digest = md5_hash()
            digest.update(self._bench_bytes)
            self._etag = digest.hexdigest()
        return f'"{self._etag}"'

    key_cls.value = property(get_value, set_value)
    key_cls.etag = property(etag)

    from moto.s3.responses import S3Response

    key_response = S3Response.key_response

    def counted_key_response(self, request, full_url, headers):
        response = key_response(self, request, full_url, headers)
        with _counts_lock:
            if _trace is not None:  # BENCH_S3_TRACE: one line per object request (what a query reads)
                _trace.write(f"{request.method} {full_url.split('?')[0].split('/', 3)[-1]} "
                             f"{request.headers.get('Range', '-')}\n")
                _trace.flush()
            _counts[request.method] += 1
            if isinstance(response, tuple) and len(response) == 3 and isinstance(response[1], dict):
                if request.method == "GET" and isinstance(response[2], (bytes, bytearray)):
                    _counts["get_bytes"] += len(response[2])
                response[1][COUNTS_HEADER] = json.dumps(dict(_counts), sort_keys=True)
        return response

    S3Response.key_response = counted_key_response
    setattr(key_cls, PATCHED, True)


def request_counts(client, bucket: str) -> dict[str, int]:
    """The object requests the patched server answered so far (``GET``, ``HEAD``, ``PUT``, ...,
    ``get_bytes``), not counting this HEAD itself; {} from a server without the patch."""
    from botocore.exceptions import ClientError

    try:
        meta = client.head_object(Bucket=bucket, Key="__bench_request_counts__")["ResponseMetadata"]
    except ClientError as e:  # 404: the key does not exist; the header is there all the same
        meta = e.response["ResponseMetadata"]
    raw = meta.get("HTTPHeaders", {}).get(COUNTS_HEADER)
    if not raw:
        return {}
    counts = json.loads(raw)
    counts["HEAD"] -= 1
    return counts


def main(argv: list[str] | None = None) -> None:
    patch_moto()
    from moto.server import main as moto_main

    moto_main(argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    main()
