"""The reader cache's filesystem per object-store scheme (exporters/lancedb/object_fs.py).

Only S3 is reached over the network (tests/test_reader_cache.py, the S3-compatible server); here
the dispatch: every scheme the index accepts gets a filesystem of its kind with Lance's storage
options mapped to its arguments, or a one-line reason why the cache stays off."""

from __future__ import annotations

import pyarrow.fs as pafs
import pytest

from exporters.lancedb.location import IndexLocation
from exporters.lancedb.mirror import ObjectFiles
from exporters.lancedb.object_fs import FsSpec, MirrorUnsupported, fs_spec, open_fs
from indexer.runtime.config import OBJECT_STORE_SCHEMES

AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
#: the least each scheme needs to name where and as whom
MINIMAL = {
    "s3": ("s3://bucket/prefix", {}),
    "s3+ddb": ("s3+ddb://bucket/prefix?ddbTableName=locks", {}),
    "gs": ("gs://bucket/prefix", {}),
    "az": ("az://container/prefix", {"azure_storage_account_name": "acct"}),
    "abfss": ("abfss://container@acct.dfs.core.windows.net/prefix", {}),
}
KINDS = {"s3": "s3", "s3+ddb": "s3", "gs": "gcs", "az": "azure", "abfss": "azure"}


def test_every_scheme_the_index_accepts_has_a_filesystem():
    assert set(OBJECT_STORE_SCHEMES) == set(MINIMAL), "a new scheme needs a filesystem in object_fs.py"
    for scheme in OBJECT_STORE_SCHEMES:
        uri, options = MINIMAL[scheme]
        spec = fs_spec(uri, options, env={})
        assert spec.kind == KINDS[scheme], scheme
        assert spec.base == ("container/prefix" if KINDS[scheme] == "azure" else "bucket/prefix"), scheme


def test_s3_options_map_to_pyarrow_s3_arguments():
    spec = fs_spec("s3://b/index/", {"AWS_ACCESS_KEY_ID": "ak", "aws_secret_access_key": "sk",
                                      "aws_region": "eu-west-1", "aws_endpoint": "http://127.0.0.1:9000",
                                      "allow_http": "true"}, env={})
    assert spec == FsSpec("s3", "b/index", {"access_key": "ak", "secret_key": "sk", "region": "eu-west-1",
                                            "scheme": "http", "endpoint_override": "127.0.0.1:9000"})
    # no endpoint scheme given: https; no region anywhere: us-east-1; the environment's region otherwise
    assert fs_spec("s3://b/p", {"endpoint": "minio.example:9000"}, env={}).kwargs == {
        "region": "us-east-1", "scheme": "https", "endpoint_override": "minio.example:9000"}
    assert fs_spec("s3://b/p", {}, env={"AWS_REGION": "ap-south-1"}).kwargs == {"region": "ap-south-1"}
    assert isinstance(open_fs(spec), pafs.S3FileSystem)


def test_gcs_uses_application_default_credentials_or_none():
    assert fs_spec("gs://b/p", {}, env={}) == FsSpec("gcs", "b/p", {})
    spec = fs_spec("gs://b/p", {"google_skip_signature": "true"}, env={})
    assert spec.kwargs == {"anonymous": True}
    assert isinstance(open_fs(spec), pafs.GcsFileSystem)
    # a key the pyarrow filesystem cannot take: off, with the option named and what to do instead
    with pytest.raises(MirrorUnsupported, match="google_service_account_key.*GOOGLE_APPLICATION_CREDENTIALS"):
        fs_spec("gs://b/p", {"google_service_account_key": "{...}"}, env={})


def test_azure_account_key_sas_service_principal_and_emulator():
    spec = fs_spec("az://c/deep/prefix", {"azure_storage_account_name": "acct", "azure_storage_account_key": "k"}, env={})
    assert spec == FsSpec("azure", "c/deep/prefix", {"account_name": "acct", "account_key": "k"})
    assert fs_spec("az://c/p", {"account_name": "a", "sas_token": "sv=1&sig=x"}, env={}).kwargs == {
        "account_name": "a", "sas_token": "sv=1&sig=x"}
    sp = fs_spec("az://c/p", {"account_name": "a", "azure_client_id": "i", "azure_client_secret": "s",
                              "azure_tenant_id": "t"}, env={})
    assert sp.kwargs == {"account_name": "a", "client_id": "i", "client_secret": "s", "tenant_id": "t"}
    # the account from the environment, as object_store reads it
    assert fs_spec("az://c/p", {}, env={"AZURE_STORAGE_ACCOUNT_NAME": "envacct"}).kwargs == {"account_name": "envacct"}
    # abfss names the account in its host
    assert fs_spec("abfss://c@acct.dfs.core.windows.net/p", {}, env={}) == FsSpec("azure", "c/p", {"account_name": "acct"})
    emu = fs_spec("az://c/p", {"azure_storage_use_emulator": "true", "account_key": AZURITE_KEY}, env={})
    assert emu.kwargs == {"account_name": "devstoreaccount1", "account_key": AZURITE_KEY,
                          "blob_storage_scheme": "http", "blob_storage_authority": "127.0.0.1:10000"}
    assert isinstance(open_fs(emu), pafs.AzureFileSystem)
    with pytest.raises(MirrorUnsupported, match="no storage account"):
        fs_spec("az://c/p", {}, env={})
    with pytest.raises(MirrorUnsupported, match="bearer token"):
        fs_spec("az://c/p", {"account_name": "a", "azure_storage_token": "t"}, env={})


def test_unknown_scheme_or_a_local_path_is_refused():
    with pytest.raises(MirrorUnsupported, match="hdfs://"):
        fs_spec("hdfs://nn/p", {}, env={})
    with pytest.raises(MirrorUnsupported):
        fs_spec("/var/lib/index", {}, env={})


def test_object_files_opens_the_filesystem_of_the_uris_scheme():
    gcs = ObjectFiles("gs://bucket/index", {"google_skip_signature": "true"})
    assert (gcs.kind, gcs.base) == ("gcs", "bucket/index")
    az = ObjectFiles("az://container/index", {"azure_storage_use_emulator": "true", "account_key": AZURITE_KEY})
    assert (az.kind, az.base) == ("azure", "container/index")


def test_a_store_the_cache_cannot_read_leaves_the_cache_off_with_one_line(tmp_path):
    from structlog.testing import capture_logs

    from exporters.lancedb.reader_cache import ReaderCache

    loc = IndexLocation(uri="gs://bucket/index", storage_options={"google_service_account": "/etc/sa.json"},
                        cache_dir=tmp_path / "cache", cache_disk_bytes=1 << 30)
    with capture_logs() as logs:
        assert ReaderCache.maybe(loc, None, live=set) is None
    off = [e for e in logs if e["event"] == "reader_cache.off"]
    assert len(off) == 1 and "google_service_account" in off[0]["reason"], logs
