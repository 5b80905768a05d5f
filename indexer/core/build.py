"""What an index was built with: one record, compared before every pass.

The state DB stores it per persona (``StateDB.build_identity``); the sync
engine compares it with the running configuration and rebuilds beside the live
index when anything differs. Each sink contributes its own part as one key
(LanceDB: model fingerprint, dimension, chunking, table schema — its
``TableBuild``; QMD: the file format), so there is one place that says what
"the same index" means.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Bump when the document text layout changes: stored hashes then mean nothing.
DOCUMENT_FORMAT_VERSION = "doc-v3"  # v3: a "Previous: …" context line; v2: model/provider redacted, cut words


@dataclass(frozen=True, slots=True)
class BuildIdentity:
    document_format: str
    redaction: str  # "<REDACTION_VERSION>[+known:<digest>]"
    max_message_bytes: int  # raising the cap re-admits text an earlier build truncated
    sinks: tuple[tuple[str, str], ...]  # (sink name, that sink's build key), in config order

    def as_dict(self) -> dict[str, Any]:
        """The stored form (the same keys as the index metadata of earlier versions, so an
        upgrade that changes nothing rebuilds nothing)."""
        return {"format": self.document_format, "redaction": self.redaction,
                "max_message_bytes": self.max_message_bytes, "sinks": dict(self.sinks)}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> BuildIdentity | None:
        """The stored form read back; None for nothing stored or a form this version cannot read
        (either way the next pass rebuilds)."""
        if not isinstance(data, dict):
            return None
        try:
            sinks = data.get("sinks") or {}
            return cls(str(data["format"]), str(data["redaction"]), int(data["max_message_bytes"]),
                       tuple((str(k), str(v)) for k, v in sinks.items()))
        except (KeyError, TypeError, ValueError, AttributeError):
            return None

    def differences(self, other: BuildIdentity | None) -> list[str]:
        """The fields that differ from ``other`` (all of them when there is none): what a
        rebuild log line names."""
        if other is None:
            return ["document_format", "redaction", "max_message_bytes", "sinks"]
        return [name for name in self.__slots__ if getattr(self, name) != getattr(other, name)]
