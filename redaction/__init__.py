"""Secret redaction for indexed agent conversations.

Everything indexed may be recalled into another prompt, so text passes
through ``redact`` before it is stored. The library is pure (no I/O except
``KnownSecrets.from_file``), deterministic and idempotent::

    from redaction import redact
    r = redact("export GITHUB_TOKEN=ghp_...")
    r.text       # "export GITHUB_TOKEN=ghp_[REDACTED:github-pat]"
    r.findings   # (Finding(rule='github-pat', start=20, end=60),)

Store ``REDACTION_VERSION`` with the index: a change means previously
indexed text was redacted by different rules. It is an explicit version, not a
digest of the code: a refactor that masks the same forces no rebuild, and a
golden-output test fails when masking changes without a bump.
"""

from .engine import Finding, Recurring, Redacted, Redactor, found_values, redact
from .known import IgnoredEntry, KnownSecrets
from .rules import REDACTION_VERSION

__all__ = [
    "redact",
    "Redacted",
    "Finding",
    "KnownSecrets",
    "IgnoredEntry",
    "Redactor",
    "Recurring",
    "found_values",
    "REDACTION_VERSION",
]
