"""What a persona, session label, project name or document path may be: the rules the HTTP API's
models and the CLI share."""

from __future__ import annotations

from dataclasses import dataclass

NO_NUL_PATTERN = r"^[^\x00]*$"


@dataclass(frozen=True, slots=True)
class TextRule:
    """What a name may be: 1 to ``max_length`` characters, NUL only where ``nul``. One definition
    for the API's models (``indexer.service.api.models``) and the CLI's own checks (``indexer.cli.main``),
    here in the core so the CLI checks a name without loading the API."""

    what: str
    max_length: int | None  # None: no cap of its own (the door's own limits bound it)
    nul: bool = False

    def describe(self) -> str:
        length = "at least 1 character" if self.max_length is None else f"1 to {self.max_length} characters"
        return length + ("" if self.nul else ", no NUL")

    def allows(self, value: str) -> bool:
        fits = self.max_length is None or len(value) <= self.max_length
        return 0 < len(value) and fits and (self.nul or "\x00" not in value)

    def refusal(self, value: str) -> str | None:
        """None when ``value`` is allowed, else one line naming it (its first 40 characters) and the rule."""
        return None if self.allows(value) else f"invalid {self.what} {value[:40]!r}: {self.describe()}"

    def schema(self) -> dict[str, str] | None:
        return None if self.nul else {"pattern": NO_NUL_PATTERN}


PERSONA = TextRule("persona", 256)
# A session label is any string of the ledger, NUL included, of any length (ARCHITECTURE.md "Document
# contract"): the state DB, LanceDB filters (exporters.lancedb.sql_str), the QMD export (safe_segment)
# and the logs take it as it is, so every door takes it too — a cap here would leave a private session
# with a longer label unable to search as itself. What bounds it is each door's own limit: the HTTP
# body ([api] max_request_bytes, 413), the request line, the command line.
LABEL = TextRule("session label", None, nul=True)
PROJECT_NAME = TextRule("project name", 256)
DOC_PATH = TextRule("path", 4096)


__all__ = ["DOC_PATH", "LABEL", "NO_NUL_PATTERN", "PERSONA", "PROJECT_NAME", "TextRule"]
