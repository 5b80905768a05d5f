"""Schema 7: the JSON rows of ``meta`` become tables, and pending turns and bad rows join the one
revisit queue.

Up to schema 6 fourteen facts were versioned JSON values in ``meta`` (``…_v1`` keys, scoped by
persona), read and written by five modules outside the migrations. Each moves here, once, into the
table :mod:`indexer.state.schema` declares for it; the late-message checkpoints of the layouts
before keyed digests are converted on the way (they held a message's first and last bytes). A value
that does not parse is dropped, as the code reading it did: the next pass starts that fact afresh.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from peewee import SqliteDatabase, chunked

from indexer.state.install_key import keyed_digest
from ledger.reader import row_digest

# The meta keys of schema 6 (by the module that kept each).
CURSOR = "memory_sessions_ledger_cursor_v1"  # state/db.py
CURSOR_ROW = "cursor_row_fingerprint_v1"  # sync/engine.py
BUILD_IDENTITY = "memory_index_meta_v1"  # state/db.py
BACKFILL_DUE = "backfill_due_v1"  # sync/late.py
LATE_MARK = "late_messages_mark_v1"  # sync/late.py
SECRET_RECHECK = "secret_recheck_v1"  # state/db.py
SESSIONS_TO_BUILD = "sessions_to_build_v1"  # state/db.py
PRIVATE_TURNS = "private_session_own_turns_v1"  # state/private_turns.py
COPIES_IN_FLIGHT = "private_copies_in_flight_v1"  # state/private_turns.py
TRUNCATED = "truncated_documents_v1"  # sync/writes.py
UNSCOPED_HIDDEN = "unscoped_sinks_hidden_sessions_v1"  # sync/visibility.py
MOVED = (CURSOR, CURSOR_ROW, BUILD_IDENTITY, BACKFILL_DUE, LATE_MARK, SECRET_RECHECK, SESSIONS_TO_BUILD,
         PRIVATE_TURNS, COPIES_IN_FLIGHT, TRUNCATED, UNSCOPED_HIDDEN)
# Kept in meta (global scalars): schema_version, ledger_identity_v1, wal_truncate_owed_v1.
WAL_TRUNCATE_OWED = "wal_truncate_owed_v1"
KEYED = "k1:"

#: revisits(persona, reason, session_label, turn_id): indexes for the per-pass queries (bad rows
#: least recently compared first)
INDEXES_7 = {
    "revisits_persona_checked": ("revisits", ("persona", "reason", "checked_at", "session_label", "turn_id")),
}


def _parse(value: str):
    try:
        return json.loads(value)
    except (TypeError, ValueError):
        return None


def _insert(model, rows: list[dict]) -> None:
    for part in chunked(rows, 100):
        model.insert_many(part).on_conflict_ignore().execute()


def _late_rows(persona: str, stored, key: Callable[[], bytes]) -> tuple[list[dict], bool]:
    """The checkpoint rows of a stored mark, keys in today's layout; and whether it was of an earlier
    layout (raw keys or plain digests: the WAL still holds them until truncated)."""
    checkpoints = stored.get("checkpoints") if isinstance(stored, dict) else None
    if not isinstance(checkpoints, list):
        return [], False
    earlier = any(isinstance(c, list) and len(c) == 3 and isinstance(c[2], str) and not c[2].startswith(KEYED)
                  for c in checkpoints)
    rows = []
    try:
        for i, (rowid, mid, row_key) in enumerate(checkpoints):
            if isinstance(row_key, str) and not row_key.startswith(KEYED):  # raw key ("|"-joined) or plain digest
                digest = row_digest(row_key) if "|" in row_key else row_key
                assert digest is not None  # row_digest is None only for a None key, and row_key is a str
                row_key = KEYED + keyed_digest(key(), digest)
            rows.append({"persona": persona, "position": i, "row": int(rowid), "message_id": mid, "row_key": row_key})
    except (TypeError, ValueError):  # unreadable, and it may hold message bytes: dropped
        return [], True
    return rows, earlier


def migrate(db: SqliteDatabase, m, key: Callable[[], bytes]) -> None:
    db.create_tables([m.PersonaState, m.Revisit, m.LateCheckpoint, m.PrivateOwnTurn, m.CopyInFlight,
                      m.TruncatedDocument, m.UnscopedHidden], safe=True)
    for name, (table, columns) in INDEXES_7.items():
        db.execute_sql(f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" ({", ".join(columns)})')
    stored: dict[str, dict[str, str]] = {}  # meta.value is TEXT NOT NULL
    for k, scope, value in db.execute_sql(
            f"SELECT key, scope, value FROM meta WHERE key IN ({','.join('?' * len(MOVED))})", MOVED).fetchall():
        stored.setdefault(scope, {})[k] = value
    personas, revisits, late, own, flight, truncated, hidden = [], [], [], [], [], [], []
    wal_owed = False
    for persona, facts in sorted(stored.items()):
        row = {"persona": persona, "cursor": None, "cursor_row": None, "build_identity": None,
               "backfill_due": facts.get(BACKFILL_DUE), "unscoped_applied": 0}
        try:
            row["cursor"] = int(facts[CURSOR]) if CURSOR in facts else None
        except (TypeError, ValueError):
            pass
        at = _parse(facts.get(CURSOR_ROW, ""))
        if isinstance(at, dict) and row["cursor"] is not None and at.get("cursor") == row["cursor"]:
            row["cursor_row"] = at.get("row")
        identity = _parse(facts.get(BUILD_IDENTITY, ""))
        if isinstance(identity, dict):
            row["build_identity"] = json.dumps(identity, sort_keys=True)
        for reason, k in (("owed_secret", SECRET_RECHECK), ("to_build", SESSIONS_TO_BUILD)):
            labels = _parse(facts.get(k, ""))
            revisits += [{"persona": persona, "reason": reason, "session_label": label, "turn_id": ""}
                         for label in (labels if isinstance(labels, list) else []) if isinstance(label, str)]
        rows, earlier = _late_rows(persona, _parse(facts.get(LATE_MARK, "")), key)
        late += rows
        wal_owed |= earlier
        turns = _parse(facts.get(PRIVATE_TURNS, ""))
        for label, ids in (turns.items() if isinstance(turns, dict) else ()):
            own += [{"persona": persona, "session_label": label, "turn_id": t} for t in ("", *ids)]  # '': recorded
        notes = _parse(facts.get(COPIES_IN_FLIGHT, ""))
        for kind, plural in (("copy", "copies"), ("compaction", "compactions")):
            entries = notes.get(plural, {}) if isinstance(notes, dict) else {}
            flight += [{"persona": persona, "kind": kind, "turn_id": t, "session_label": s}
                       for t, sessions in entries.items() for s in sessions]
        cut = _parse(facts.get(TRUNCATED, ""))
        truncated += [{"persona": persona, "path": p} for p in (cut.get("paths", []) if isinstance(cut, dict) else [])]
        applied = _parse(facts.get(UNSCOPED_HIDDEN, ""))
        if isinstance(applied, dict):
            row["unscoped_applied"] = 1
            hidden += [{"persona": persona, "kind": "session", "value": v} for v in applied.get("sessions", [])]
            hidden += [{"persona": persona, "kind": "turn", "value": v} for v in applied.get("turns", [])]
        if any(row[k] is not None for k in ("cursor", "build_identity", "backfill_due")) or row["unscoped_applied"]:
            personas.append(row)
    tables = {name for (name,) in db.execute_sql("SELECT name FROM sqlite_master WHERE type='table'").fetchall()}
    if "pending_turns" in tables:
        revisits += [{"persona": p, "reason": "pending_turn", "session_label": s, "turn_id": t, "seen_at": at}
                     for p, s, t, at in db.execute_sql(
                         "SELECT persona, session_label, turn_id, seen_at FROM pending_turns").fetchall()]
    if "bad_rows" in tables:
        revisits += [{"persona": p, "reason": "bad_row", "session_label": s, "turn_id": t, "skip": r, "detail": d,
                      "seen_at": seen, "fingerprint": f, "checked_at": checked}
                     for p, s, t, r, d, seen, f, checked in db.execute_sql(
                         "SELECT persona, session_label, turn_id, reason, detail, seen_at, fingerprint, checked_at"
                         " FROM bad_rows").fetchall()]
    for model, rows in ((m.PersonaState, personas), (m.Revisit, revisits), (m.LateCheckpoint, late),
                        (m.PrivateOwnTurn, own), (m.CopyInFlight, flight), (m.TruncatedDocument, truncated),
                        (m.UnscopedHidden, hidden)):
        _insert(model, rows)
    db.execute_sql(f"DELETE FROM meta WHERE key IN ({','.join('?' * len(MOVED))})", MOVED)
    db.execute_sql("DROP TABLE IF EXISTS pending_turns")
    db.execute_sql("DROP TABLE IF EXISTS bad_rows")
    if wal_owed:  # the WAL holds the rows of the earlier layout until truncated (indexer.sync.late)
        db.execute_sql("INSERT OR REPLACE INTO meta(key, scope, value) VALUES(?, '', ?)",
                       (WAL_TRUNCATE_OWED, "late_messages_mark"))
