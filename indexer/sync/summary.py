"""What a pass reports (per persona and in total), and how it is stopped."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


class SyncInterrupted(Exception):
    """The stop event was set; everything committed so far is consistent."""


@dataclass
class PersonaSummary:
    persona: str
    mode: str  # a PassMode (a str: reports and logs show its value)
    cursor_before: int | None
    cursor: int | None = None
    head: int = 0
    sessions: int = 0
    documents_written: int = 0
    documents_unchanged: int = 0
    documents_skipped_bad: int = 0
    documents_deleted: int = 0
    pending_turns: int = 0
    bad_retried: int = 0  # sessions whose bad turns were built again (--retry-bad, or their rows changed)

    def as_dict(self) -> dict:
        return {**self.__dict__, "mode": str(self.mode)}  # the value, in logs and JSON alike


@dataclass
class SyncSummary:
    personas: dict[str, PersonaSummary] = field(default_factory=dict)
    seconds: float = 0.0
    interrupted: bool = False

    def total(self, name: str) -> int:
        return sum(getattr(p, name) for p in self.personas.values())

    @property
    def documents_written(self) -> int:
        return self.total("documents_written")

    def as_dict(self) -> dict:
        return {
            "documents_written": self.total("documents_written"),
            "documents_unchanged": self.total("documents_unchanged"),
            "documents_skipped_bad": self.total("documents_skipped_bad"),
            "documents_deleted": self.total("documents_deleted"),
            "cursor": {p: s.cursor for p, s in self.personas.items()},
            "personas": {p: s.as_dict() for p, s in self.personas.items()},
            "seconds": round(self.seconds, 3),
            "interrupted": self.interrupted,
        }




def check_stop(stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise SyncInterrupted()

