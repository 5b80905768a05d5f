"""The pyarrow filesystem of an index URI on object storage, for the reader cache (``mirror.py``).

One dispatch per scheme the index supports (``OBJECT_STORE_SCHEMES``): ``s3://`` and ``s3+ddb://``
(S3 and S3-compatible stores), ``gs://`` (Google Cloud Storage), ``az://`` and ``abfss://`` (Azure
Blob Storage / Data Lake Gen2). The storage options are Lance's (the object_store crate's key names,
as in ``[index] storage_options``), mapped to the pyarrow filesystem's arguments; what a pyarrow
filesystem takes from the environment by itself (AWS's credential chain, Google's application
default credentials, Azure's default credential) is left to it, as Lance leaves it to object_store.

An option Lance would use that the pyarrow filesystem cannot take (a Google service-account key
given as an option, an Azure bearer token) raises :class:`MirrorUnsupported`: the cache would
otherwise read with other credentials than the queries; the reader then logs ``reader_cache.off``
once and reads the store, as before.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any


class MirrorUnsupported(Exception):
    """This store cannot be listed or read here (the reader reads the store directly)."""


@dataclass(frozen=True, slots=True)
class FsSpec:
    """Which pyarrow filesystem, its arguments, and the database's path inside it."""

    kind: str  # "s3" | "gcs" | "azure"
    base: str  # bucket/prefix (container/prefix on Azure), no trailing slash
    kwargs: dict[str, Any] = field(default_factory=dict)


# Lance's (object_store's) option names, lower case, first match wins.
_S3 = {
    "access_key": ("aws_access_key_id", "access_key_id"),
    "secret_key": ("aws_secret_access_key", "secret_access_key"),
    "session_token": ("aws_session_token", "session_token", "aws_token", "token"),
    "region": ("aws_region", "region", "aws_default_region"),
}
_S3_ENDPOINT = ("aws_endpoint", "aws_endpoint_url", "endpoint", "endpoint_url")
_GCS_CREDENTIALS = ("google_service_account", "service_account", "google_service_account_path",
                    "service_account_path", "google_service_account_key", "service_account_key",
                    "google_application_credentials")
_AZ = {
    "account_name": ("azure_storage_account_name", "account_name"),
    "account_key": ("azure_storage_account_key", "azure_storage_access_key", "azure_storage_master_key",
                    "account_key", "access_key", "master_key"),
    "sas_token": ("azure_storage_sas_key", "azure_storage_sas_token", "sas_key", "sas_token"),
    "client_id": ("azure_storage_client_id", "azure_client_id", "client_id"),
    "client_secret": ("azure_storage_client_secret", "azure_client_secret", "client_secret"),
    "tenant_id": ("azure_storage_tenant_id", "azure_storage_authority_id", "azure_tenant_id",
                  "azure_authority_id", "tenant_id", "authority_id"),
}
_AZ_ENDPOINT = ("azure_storage_endpoint", "azure_endpoint", "endpoint")
_AZ_TOKEN = ("azure_storage_token", "bearer_token", "token")
#: Azurite's well-known development account (what Lance's ``use_emulator`` means)
_AZURITE = ("devstoreaccount1", "127.0.0.1:10000")


def _pick(opt: dict[str, str], names: tuple[str, ...]) -> str | None:
    return next((opt[n] for n in names if opt.get(n)), None)


def _truthy(v: str | None) -> bool:
    return str(v or "").strip().lower() in ("1", "true", "yes", "on")


def _endpoint(url: str) -> tuple[str, str]:
    """(scheme, host[:port]) of an endpoint URL (https when it names none)."""
    scheme, sep, host = url.partition("://")
    return (scheme, host.rstrip("/")) if sep else ("https", url.rstrip("/"))


def fs_spec(uri: str, options: dict[str, str], env: dict[str, str] | None = None) -> FsSpec:
    """The filesystem for ``uri`` (an object-store database URI) with Lance's ``options``."""
    env = dict(os.environ) if env is None else env
    scheme, sep, rest = uri.partition("://")
    scheme = scheme.lower()
    if not sep:
        raise MirrorUnsupported(f"{uri!r} is not an object-store URI")
    path = rest.split("?", 1)[0].rstrip("/")  # s3+ddb://bucket/prefix?ddbTableName=...
    opt = {k.lower(): str(v) for k, v in options.items()}
    if scheme in ("s3", "s3+ddb"):
        kwargs: dict[str, Any] = {k: _pick(opt, names) for k, names in _S3.items()}
        kwargs["region"] = kwargs["region"] or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1"
        endpoint = _pick(opt, _S3_ENDPOINT)
        if endpoint:
            kwargs["scheme"], kwargs["endpoint_override"] = _endpoint(endpoint)
        return FsSpec("s3", path, {k: v for k, v in kwargs.items() if v is not None})
    if scheme == "gs":
        given = [n for n in _GCS_CREDENTIALS if opt.get(n)]
        if given:
            raise MirrorUnsupported(
                f"the reader cache reads gs:// with Google's application default credentials; storage option "
                f"{given[0]!r} has no equivalent there (set GOOGLE_APPLICATION_CREDENTIALS instead: Lance reads it too)")
        kwargs = {}
        if _truthy(_pick(opt, ("google_skip_signature", "skip_signature"))):
            kwargs["anonymous"] = True
        return FsSpec("gcs", path, kwargs)
    if scheme in ("az", "abfss"):
        if _pick(opt, _AZ_TOKEN):
            raise MirrorUnsupported("the reader cache cannot read az:// with a bearer token (storage option "
                                    "azure_storage_token): use an account key, a SAS token or a service principal")
        kwargs = {k: _pick(opt, names) for k, names in _AZ.items()}
        container, _, prefix = path.partition("/")
        if scheme == "abfss" and "@" in container:  # abfss://container@account.dfs.core.windows.net/prefix
            container, _, host = container.partition("@")
            kwargs["account_name"] = kwargs["account_name"] or host.split(".", 1)[0]
        for k, var in (("account_name", "AZURE_STORAGE_ACCOUNT_NAME"), ("account_key", "AZURE_STORAGE_ACCOUNT_KEY")):
            kwargs[k] = kwargs[k] or env.get(var)
        endpoint = _pick(opt, _AZ_ENDPOINT)
        if _truthy(_pick(opt, ("azure_storage_use_emulator", "use_emulator"))) and not endpoint:
            kwargs["account_name"] = kwargs["account_name"] or _AZURITE[0]
            endpoint = f"http://{_AZURITE[1]}"
        if endpoint:
            kwargs["blob_storage_scheme"], kwargs["blob_storage_authority"] = _endpoint(endpoint)
        if not kwargs["account_name"]:
            raise MirrorUnsupported(f"{scheme}:// names no storage account (storage option "
                                    "azure_storage_account_name or AZURE_STORAGE_ACCOUNT_NAME)")
        if kwargs["account_key"] and kwargs["sas_token"]:
            kwargs["sas_token"] = None  # pyarrow takes one of the two; the key signs every request
        return FsSpec("azure", f"{container}/{prefix}".rstrip("/"), {k: v for k, v in kwargs.items() if v})
    raise MirrorUnsupported(f"the reader cache has no filesystem for {scheme}:// stores")


def open_fs(spec: FsSpec):
    """The pyarrow filesystem of ``spec`` (constructing it reads no object)."""
    import pyarrow.fs as pafs

    cls = {"s3": pafs.S3FileSystem, "gcs": pafs.GcsFileSystem, "azure": pafs.AzureFileSystem}[spec.kind]
    try:
        return cls(**spec.kwargs)
    except (ImportError, ModuleNotFoundError, NotImplementedError) as exc:  # a pyarrow built without it
        raise MirrorUnsupported(f"this pyarrow has no {spec.kind} filesystem: {exc}") from exc
