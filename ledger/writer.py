"""Write Agents Ledgers for the demo, the tests and the benchmarks.

This plays the part of the agent runtime: it creates the schema of
``agents_ledger.sql`` in WAL mode and appends turns, messages, compactions and
``session_history`` rows the way the runtime does. The indexer never imports
it. ``python -m ledger.writer append DB ...`` runs it as a separate writer
process, for tests that sync while a ledger is being written.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import sys
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_ulid(ms: int | None = None, rng: random.Random | None = None) -> str:
    ms = int(time.time() * 1000) if ms is None else ms
    rnd = (rng or random).getrandbits(80)
    value = (ms << 80) | rnd
    return "".join(_CROCKFORD[(value >> (5 * i)) & 31] for i in reversed(range(26)))


def schema_sql() -> str:
    return resources.files("ledger").joinpath("agents_ledger.sql").read_text()


@dataclass(frozen=True)
class ToolUse:
    name: str
    params: dict
    result: str | None = None


_AUTO = object()


class LedgerWriter:
    """Append-only writer with the runtime's semantics. Each public call is one
    write transaction, like the runtime's."""

    def __init__(self, path: str | Path, *, start_ms: int | None = None, seed: int | None = None):
        self.path = Path(path)
        self.conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA busy_timeout=30000")
        self.conn.executescript(schema_sql())
        self.rng = random.Random(seed)
        self._clock = start_ms
        self._seq = 0

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> LedgerWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- helpers ------------------------------------------------------------

    def now(self) -> int:
        if self._clock is None:
            return int(time.time() * 1000)
        self._clock += 1000
        return self._clock

    def _id(self) -> str:
        return new_ulid(self.now() if self._clock is not None else None, self.rng)

    def head(self, label: str) -> str | None:
        row = self.conn.execute("SELECT thread_id FROM sessions WHERE label=?", (label,)).fetchone()
        return row[0] if row else None

    def _ancestry(self, turn_id: str | None) -> list[str]:
        if turn_id is None:
            return []
        row = self.conn.execute("SELECT ancestry FROM threads WHERE turn_id=?", (turn_id,)).fetchone()
        return json.loads(row[0]) if row and row[0] else [turn_id]

    def _move(self, label: str, persona: str, turn_id: str, ts: int) -> None:
        self.conn.execute(
            "INSERT INTO sessions(label, thread_id, persona_id, created_at, updated_at, status) "
            "VALUES(?,?,?,?,?, 'active') ON CONFLICT(label) DO UPDATE SET thread_id=excluded.thread_id, "
            "updated_at=excluded.updated_at",
            (label, turn_id, persona, ts, ts),
        )
        self.conn.execute(
            "INSERT INTO session_history(session_label, thread_id, changed_at) VALUES(?,?,?)",
            (label, turn_id, ts),
        )

    def _message(self, turn_id: str, role: str, content: str | None, seq: int, ts: int, **extra) -> str:
        mid = self._id()
        self.conn.execute(
            "INSERT INTO messages(id, turn_id, role, content, sequence, created_at, thinking) VALUES(?,?,?,?,?,?,?)",
            (mid, turn_id, role, content, seq, ts, extra.get("thinking")),
        )
        return mid

    # -- runtime operations ---------------------------------------------------

    def turn(
        self,
        label: str,
        *,
        persona: str = "atlas",
        user: str | None = None,
        assistant: str | None = None,
        parent=_AUTO,
        status: str = "completed",
        model: str = "claude-sonnet-4",
        provider: str = "anthropic",
        system: str | None = None,
        thinking: str | None = None,
        tools: list[ToolUse] | None = None,
        turn_id: str | None = None,
        ts: int | None = None,
        move_session: bool = True,
    ) -> str:
        """Append one turn to ``label`` (after its head, or after ``parent``)."""
        ts = self.now() if ts is None else ts
        tid = turn_id or self._id()
        parent_id = self.head(label) if parent is _AUTO else parent
        ancestry = self._ancestry(parent_id) + [tid]
        done = status in ("completed", "failed")
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self.conn.execute(
                "INSERT INTO turns(id, parent_turn_id, turn_type, status, started_at, completed_at, model, provider, "
                "tool_call_count) VALUES(?,?,?,?,?,?,?,?,?)",
                (tid, parent_id, "normal", status, ts, ts if done else None, model, provider, len(tools or [])),
            )
            self.conn.execute(
                "INSERT INTO threads(turn_id, ancestry, depth, persona_id, thread_key) VALUES(?,?,?,?,?)",
                (tid, json.dumps(ancestry), len(ancestry), persona, tid),
            )
            seq = 0
            if system is not None:
                self._message(tid, "system", system, seq, ts)
                seq += 1
            if user is not None:
                self._message(tid, "user", user, seq, ts)
                seq += 1
            for tool in tools or []:
                mid = self._message(tid, "assistant", None, seq, ts)
                seq += 1
                self.conn.execute(
                    "INSERT INTO tool_calls(id, turn_id, message_id, tool_name, params_json, result_json, status, "
                    "started_at, completed_at, sequence) VALUES(?,?,?,?,?,?,?,?,?,?)",
                    (self._id(), tid, mid, tool.name, json.dumps(tool.params), json.dumps(tool.result),
                     "completed", ts, ts, seq),
                )
                self._message(tid, "tool", tool.result, seq, ts)
                seq += 1
            if assistant is not None:
                self._message(tid, "assistant", assistant, seq, ts, thinking=thinking)
            if move_session:
                self._move(label, persona, tid, ts)
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        return tid

    def complete(self, turn_id: str, *, assistant: str | None = None) -> None:
        """Finish a pending/streaming turn. Like the runtime, this moves no
        session pointer, so no ``session_history`` row appears."""
        ts = self.now()
        self.conn.execute("BEGIN IMMEDIATE")
        if assistant is not None:
            seq = self.conn.execute(
                "SELECT COALESCE(MAX(sequence), -1) + 1 FROM messages WHERE turn_id=?", (turn_id,)
            ).fetchone()[0]
            self._message(turn_id, "assistant", assistant, seq, ts)
        self.conn.execute("UPDATE turns SET status='completed', completed_at=? WHERE id=?", (ts, turn_id))
        self.conn.execute("COMMIT")

    def compaction(
        self, label: str, summary: str, *, persona: str = "atlas", model: str = "claude-haiku"
    ) -> str:
        ts = self.now()
        tid = self._id()
        parent_id = self.head(label)
        ancestry = self._ancestry(parent_id) + [tid]
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute(
            "INSERT INTO turns(id, parent_turn_id, turn_type, status, started_at, completed_at, model) "
            "VALUES(?,?, 'compaction', 'completed', ?,?,?)",
            (tid, parent_id, ts, ts, model),
        )
        self.conn.execute(
            "INSERT INTO threads(turn_id, ancestry, depth, persona_id, thread_key) VALUES(?,?,?,?,?)",
            (tid, json.dumps(ancestry), len(ancestry), persona, tid),
        )
        self.conn.execute(
            "INSERT INTO compactions(turn_id, summary, summarized_through_turn_id, turns_summarized, model) "
            "VALUES(?,?,?,?,?)",
            (tid, summary, parent_id or tid, max(0, len(ancestry) - 1), model),
        )
        self._move(label, persona, tid, ts)
        self.conn.execute("COMMIT")
        return tid

    def fork(self, new_label: str, from_turn: str, *, persona: str = "atlas") -> None:
        """Start session ``new_label`` whose history is ``from_turn``'s ancestry."""
        self.conn.execute("BEGIN IMMEDIATE")
        self._move(new_label, persona, from_turn, self.now())
        self.conn.execute("COMMIT")

    def set_session_status(self, label: str, status: str) -> None:
        self.conn.execute("UPDATE sessions SET status=?, updated_at=? WHERE label=?", (status, self.now(), label))

    def execute(self, sql: str, params: tuple = ()) -> None:
        """Raw SQL, for tests that plant broken rows."""
        self.conn.execute(sql, params)


# -- a writer process for tests and benchmarks --------------------------------------


def _append_loop(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    words = ("deploy cache token schema migration retry budget latency shard index vector "
             "kafka redis postgres jwt expiry rollout canary alert queue worker").split()
    with LedgerWriter(args.db, seed=args.seed) as w:
        for i in range(args.turns):
            label = f"{args.prefix}-{i % args.sessions}"
            marker = f"{args.marker}{i}" if args.marker else ""
            text = " ".join(rng.choice(words) for _ in range(20))
            tid = w.turn(label, persona=args.persona, user=f"{marker} question {text}", assistant=f"answer {text}")
            if args.fork_every and i and i % args.fork_every == 0:
                w.fork(f"{label}-fork{i}", tid, persona=args.persona)
            print(tid, flush=True)
            if args.delay:
                time.sleep(args.delay)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ledger.writer")
    sub = parser.add_subparsers(dest="cmd", required=True)
    ap = sub.add_parser("append", help="append turns in a loop (a concurrent writer process)")
    ap.add_argument("db")
    ap.add_argument("--turns", type=int, default=100)
    ap.add_argument("--sessions", type=int, default=5)
    ap.add_argument("--persona", default="atlas")
    ap.add_argument("--prefix", default="live")
    ap.add_argument("--marker", default="")
    ap.add_argument("--delay", type=float, default=0.0)
    ap.add_argument("--fork-every", type=int, default=0)
    ap.add_argument("--seed", type=int, default=int(os.environ.get("LEDGER_WRITER_SEED", "7")))
    args = parser.parse_args(argv)
    return _append_loop(args)


if __name__ == "__main__":
    sys.exit(main())
