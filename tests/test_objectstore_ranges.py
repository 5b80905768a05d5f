"""The benchmarks' S3-compatible server (``bench/s3_ranges.py``: moto with ranged reads at the
cost of the range) answers like moto does: exact bytes for every form of range, the same
ETags, conditional PUTs still enforced (Lance's commits rely on ``If-None-Match: *``), and a
Lance table round trip; and a small ranged read of a large object no longer costs a read of
the whole object. Both servers run in their own process, as the benchmark runs its own."""

from __future__ import annotations

import io
import os
import time

import pytest
from botocore.exceptions import ClientError

from tests.s3_server import start_s3

MB = 1 << 20


@pytest.fixture(scope="module")
def servers():
    patched = start_s3(own_process=True, server_module="bench.s3_ranges")
    try:
        plain = start_s3(own_process=True)
    except BaseException:
        patched.stop()
        raise
    yield patched, plain
    patched.stop()
    plain.stop()


def _put(server, data: bytes, key: str = "obj") -> tuple[object, str]:
    c = server.client()
    bucket = server.bucket().removeprefix("s3://").split("/")[0]
    c.put_object(Bucket=bucket, Key=key, Body=data)
    return c, bucket


RANGES = ["bytes=0-0", "bytes=0-99", "bytes=1000-5000", "bytes=5000-", "bytes=-100", "bytes=-999999999",
          "bytes=12582900-99999999", "bytes=7-7"]


def test_ranged_get_returns_the_exact_bytes_and_the_same_headers_as_moto(servers):
    data = os.urandom(12 * MB + 5)  # above moto's in-memory buffer (5 MB): a temp file there
    answers = {}
    for name, server in zip(("patched", "plain"), servers):
        c, bucket = _put(server, data)
        head = c.head_object(Bucket=bucket, Key="obj")
        got = {"etag": head["ETag"], "length": head["ContentLength"], "full": c.get_object(Bucket=bucket, Key="obj")["Body"].read()}
        for rng in RANGES:
            r = c.get_object(Bucket=bucket, Key="obj", Range=rng)
            got[rng] = (r["ResponseMetadata"]["HTTPStatusCode"], r.get("ContentRange"), r["Body"].read())
        with pytest.raises(ClientError) as e:
            c.get_object(Bucket=bucket, Key="obj", Range=f"bytes={len(data)}-")
        got["past the end"] = e.value.response["Error"]["Code"]
        answers[name] = got
    patched, plain = answers["patched"], answers["plain"]
    assert patched["full"] == data and patched["length"] == len(data)
    n = len(data)
    expect = {"bytes=0-0": data[:1], "bytes=0-99": data[:100], "bytes=1000-5000": data[1000:5001],
              "bytes=5000-": data[5000:], "bytes=-100": data[-100:], "bytes=-999999999": data,
              "bytes=12582900-99999999": data[12582900:], "bytes=7-7": data[7:8]}
    for rng in RANGES:
        status, content_range, body = patched[rng]
        assert body == expect[rng], rng
        assert (status, content_range) == plain[rng][:2], rng
    assert patched["bytes=-100"][1] == f"bytes {n - 100}-{n - 1}/{n}"
    assert patched["past the end"] == plain["past the end"] == "InvalidRange"
    assert patched["etag"] == plain["etag"]


def test_multipart_upload_and_overwrite(servers):
    from boto3.s3.transfer import TransferConfig

    server, _ = servers
    c = server.client()
    bucket = server.bucket().removeprefix("s3://").split("/")[0]
    data = os.urandom(11 * MB)
    c.upload_fileobj(io.BytesIO(data), bucket, "mp", Config=TransferConfig(multipart_threshold=5 * MB,
                                                                            multipart_chunksize=5 * MB))
    head = c.head_object(Bucket=bucket, Key="mp")
    assert head["ETag"].endswith('-3"') and head["ContentLength"] == len(data)
    assert c.get_object(Bucket=bucket, Key="mp", Range="bytes=5242879-5242881")["Body"].read() == data[5242879:5242882]
    c.put_object(Bucket=bucket, Key="mp", Body=b"short")
    assert c.get_object(Bucket=bucket, Key="mp")["Body"].read() == b"short"
    assert c.get_object(Bucket=bucket, Key="mp", Range="bytes=1-2")["Body"].read() == b"ho"


def test_conditional_puts_are_still_enforced(servers):
    server, _ = servers
    c, bucket = _put(server, b"first")
    with pytest.raises(ClientError) as e:
        c.put_object(Bucket=bucket, Key="obj", Body=b"second", IfNoneMatch="*")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    c.put_object(Bucket=bucket, Key="new", Body=b"created", IfNoneMatch="*")  # absent: allowed
    etag = c.head_object(Bucket=bucket, Key="obj")["ETag"]
    with pytest.raises(ClientError) as e:
        c.put_object(Bucket=bucket, Key="obj", Body=b"second", IfMatch='"0123456789abcdef0123456789abcdef"')
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    c.put_object(Bucket=bucket, Key="obj", Body=b"second", IfMatch=etag)
    assert c.get_object(Bucket=bucket, Key="obj")["Body"].read() == b"second"
    assert c.get_object(Bucket=bucket, Key="new")["Body"].read() == b"created"


def test_lance_table_round_trip(servers):
    import lancedb
    import pyarrow as pa

    server, _ = servers
    uri = server.bucket()
    db = lancedb.connect(uri, storage_options=server.options())
    tbl = db.create_table("t", pa.table({"id": list(range(1000)), "v": [[float(i), 1.0] for i in range(1000)]}))
    tbl.add(pa.table({"id": [1000], "v": [[1000.0, 1.0]]}))
    tbl.delete("id < 10")
    assert tbl.count_rows() == 991
    again = lancedb.connect(uri, storage_options=server.options())
    t2 = again.open_table("t")
    assert t2.version == tbl.version and sorted(t2.to_arrow()["id"].to_pylist())[:2] == [10, 11]


def test_a_small_ranged_read_costs_the_range_not_the_object(servers):
    """A 4 KB read of a 48 MB object: moto reads the whole object per request, the patched
    server does not (several times faster even on a loaded machine: ~1 ms vs tens of ms)."""
    data = os.urandom(48 * MB)
    took = {}
    for name, server in zip(("patched", "plain"), servers):
        c, bucket = _put(server, data)
        c.get_object(Bucket=bucket, Key="obj", Range="bytes=0-4095")["Body"].read()  # connection, ETag
        times = []
        for i in range(8):
            t0 = time.perf_counter()
            body = c.get_object(Bucket=bucket, Key="obj", Range=f"bytes={i * 5 * MB}-{i * 5 * MB + 4095}")["Body"].read()
            times.append(time.perf_counter() - t0)
            assert body == data[i * 5 * MB:i * 5 * MB + 4096]
        took[name] = sorted(times)[len(times) // 2]
    print(f"median 4 KB ranged GET of 48 MB: patched {took['patched'] * 1000:.1f} ms, moto {took['plain'] * 1000:.1f} ms")
    assert took["patched"] * 3 < took["plain"]


def test_the_patched_server_counts_object_requests(servers):
    from bench.s3_ranges import request_counts

    patched, plain = servers
    c, bucket = _put(patched, b"0123456789")
    before = request_counts(c, bucket)
    c.get_object(Bucket=bucket, Key="obj", Range="bytes=2-5")
    c.head_object(Bucket=bucket, Key="obj")
    after = request_counts(c, bucket)
    assert after["GET"] - before["GET"] == 1 and after["get_bytes"] - before["get_bytes"] == 4
    assert after["HEAD"] - before["HEAD"] == 2  # this one and request_counts' own of `before`
    c2, bucket2 = _put(plain, b"x")
    assert request_counts(c2, bucket2) == {}
