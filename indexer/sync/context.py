"""The resources one indexing process holds: config, state DB, sinks, redactor.

Sinks are built from the config here (the only place that knows every
backend); tests pass their own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import contextmanager

import structlog

from exporters.base import Exporter
from indexer.core.build import DOCUMENT_FORMAT_VERSION, BuildIdentity
from indexer.core.types import Document
from indexer.embedding.factory import make_embedder
from indexer.runtime.config import Config, ConfigError
from indexer.state.db import StateDB
from indexer.state.install_key import keyed_digest
from ledger.reader import LedgerReader

log = structlog.get_logger("indexer.context")

# Newline-separated secrets in the environment (e.g. from a systemd credential).
KNOWN_SECRETS_ENV = "LEDGER_INDEXER_KNOWN_SECRETS"


def known_secrets(config: Config):
    """The configured exact-value secrets (file, or env LEDGER_INDEXER_KNOWN_SECRETS), or None."""
    from redaction import KnownSecrets

    values: list[str] = []
    sources = []
    path = config.redaction.known_secrets_file
    if path is not None:
        try:
            sources.append((str(path), KnownSecrets.from_file(path)))
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
            raise ConfigError(f"[redaction] known_secrets_file {path}: cannot read it ({reason}); fix the path, "
                              "or unset it (documents are redacted by the rules alone)") from None
    sources.append((KNOWN_SECRETS_ENV, KnownSecrets.from_env(KNOWN_SECRETS_ENV)))
    for origin, known in sources:
        values.extend(known.values)
        for entry in known.ignored:  # the reason and line only, never the value
            log.warning("redaction.known_secret_ignored", source=origin, line=entry.line, reason=entry.reason)
    return KnownSecrets(values) if values else None


def make_redactor(config: Config, *, key: Callable[[], bytes]):
    """The redactor for documents (:class:`redaction.Redactor`), and the ruleset version.
    ``key``: gives the index's key (``StateDB.key``), asked only for the digest of known secrets."""
    from redaction import REDACTION_VERSION, Redactor

    known = known_secrets(config)
    redactor = Redactor(known=known)
    # The ruleset's explicit version (a golden-output test guards its bumps); known secrets add to
    # it (never replace it).
    version = REDACTION_VERSION
    if known is not None:
        # A new known secret must reach documents already indexed: it changes the version, which
        # triggers a rebuild. The version is shown by /v1/status: only a digest keyed with the
        # index's key is in it (a plain digest of a weak secret can be recovered by guessing).
        digest = keyed_digest(key(), "\n".join(sorted(known.values)), length=16)
        version = f"{version}+known:{digest}"
    return redactor, version


def build_sinks(config: Config, *, embedder=None, role: str = "writer") -> list[Exporter]:
    sinks: list[Exporter] = []
    for name in config.index.sinks:
        if name == "lancedb":
            from exporters.lancedb import LanceSink
            from exporters.lancedb.location import IndexLocation

            sinks.append(LanceSink(IndexLocation.from_config(config),
                                   embedder if embedder is not None else make_embedder(config),
                                   writer_dir=config.index.dir, role=role))
        elif name == "qmd":
            from exporters.qmd import QmdExporter

            sinks.append(QmdExporter(config.qmd_export_dir, update_command=config.qmd.update_command,
                                     update_timeout_s=config.qmd.update_timeout_seconds))
    return sinks


class Indexer:
    def __init__(self, config: Config, *, sinks: Sequence[Exporter], state: StateDB | None = None,
                 redact: Callable[[str], str] | None = None, redaction_version: str | None = None,
                 publisher=None):
        self.config = config
        self.state = state or StateDB(config.state_db_path)
        self.sinks = list(sinks)
        #: object storage: publishes the scope state readers on other machines need (the
        #: LanceDB sink's, or one given for a scope change made without it); None locally
        self.publisher = publisher or next(
            (p for p in (getattr(sink, "publisher", None) for sink in self.sinks) if p is not None), None)
        self._own_publisher = publisher is not None
        #: secrets found in one turn, masked where they recur in the session's others (None
        #: with a custom ``redact``, which reports no findings to learn from)
        self.secrets = None
        if redact is None:
            from indexer.sync.recurring import SecretMemory

            redactor, redaction_version = make_redactor(config, key=self.state.key)
            self.secrets = SecretMemory(redactor)
            redact = lambda text: redactor.redact(text).text  # noqa: E731
        self.redact = redact
        self.redaction_version = redaction_version or "custom"
        from indexer.sync.memory_source import MemorySource
        from indexer.sync.quiet import QuietChecks

        self.memory = MemorySource(self)
        # which per-pass ledger checks ran at which state of the ledger files (skipped while unchanged)
        self.quiet = QuietChecks()
        from indexer.sync.in_flight import WritesInFlight

        #: documents a pass is writing until it records them (a private session's forks' copies)
        self.in_flight = WritesInFlight(self)
        self._kept_reader: tuple[LedgerReader, object] | None = None
        #: the late-message marks of every persona were brought to today's layout (indexer.sync.late)
        self.late_marks_converted = False

    @property
    def build_identity(self) -> BuildIdentity:
        """What this process builds the index with; any change from the stored one rebuilds."""
        return BuildIdentity(DOCUMENT_FORMAT_VERSION, self.redaction_version, self.config.ledger.max_message_bytes,
                             tuple((sink.name, str(sink.fingerprint)) for sink in self.sinks))

    def reader(self) -> LedgerReader:
        """A fresh read-only reader: opened per pass so a replaced ledger file is noticed."""
        return LedgerReader.open(self.config.ledger.path, max_message_bytes=self.config.ledger.max_message_bytes)

    def pass_reader(self, stamp) -> LedgerReader:
        """The reader of a sync pass: the previous pass's, kept open, when the ledger
        files are exactly as they were when that pass ended (same inode, size and
        mtime, settled: :mod:`indexer.sync.quiet`), so nothing it read at opening
        can have changed; otherwise a fresh one. Opening costs about as much as
        the rest of a pass with nothing new."""
        kept, self._kept_reader = self._kept_reader, None
        if kept is not None:
            reader, kept_stamp = kept
            if stamp is not None and stamp.settled and kept_stamp == stamp:
                return reader
            reader.close()
        return self.reader()

    def end_pass_reader(self, reader: LedgerReader, stamp) -> None:
        """Keep the pass's reader for the next pass (``stamp``: the files when the pass
        began, None after a failed pass), or close it."""
        if stamp is not None and stamp.settled:
            self._kept_reader = (reader, stamp)
        else:
            reader.close()

    def memory_documents(self, persona: str) -> list[Document]:
        return self.memory.documents(persona)

    def sync_memory(self, persona: str) -> int:
        return self.memory.sync(persona)

    def publish_scopes(self) -> bool:
        """Publish the scope state if it changed (object storage; a no-op locally)."""
        return self.publisher.publish(self.state) if self.publisher is not None else False

    @contextmanager
    def scope_change(self):
        """Wrap a visibility or project change: one state-DB transaction that, on object
        storage, commits only once readers can see the new scope state."""
        if self.publisher is None:
            with self.state.atomic():
                yield
        else:
            with self.publisher.change(self.state):
                yield

    def close(self) -> None:
        if self._kept_reader is not None:
            self._kept_reader[0].close()
            self._kept_reader = None
        if self._own_publisher and self.publisher is not None:
            self.publisher.close()
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as exc:
                log.warning("sink.close_failed", sink=sink.name, error=str(exc))
        self.state.close()


def open_indexer(config: Config, *, embedder=None, sinks: Sequence[Exporter] | None = None,
                 role: str = "writer") -> Indexer:
    config.index.dir.mkdir(parents=True, exist_ok=True)
    return Indexer(config, sinks=sinks if sinks is not None else build_sinks(config, embedder=embedder, role=role))
