"""Dropping tables no reader uses: retired generations past their grace, orphans of killed builds
(``LanceSink`` delegates here)."""

from __future__ import annotations

import logging

from exporters.lancedb.schema import TABLE_PREFIX
from exporters.lancedb.store import _now_ms

log = logging.getLogger("exporters.lancedb")


def drop_retired_and_orphans(sink) -> list[str]:
    """Drop retired tables past ``retire_grace`` and orphans; the names dropped."""
    now = _now_ms()
    grace_ms = sink.retire_grace.total_seconds() * 1000
    dropped: list[str] = []
    keep_retired = []
    for r in sink._active["retired"]:
        if now - int(r.get("retired_ms", 0)) >= grace_ms:
            if sink._drop_table(r["table"]):
                dropped.append(r["table"])
                continue
        keep_retired.append(r)
    if len(keep_retired) != len(sink._active["retired"]):
        data = sink._edit_active()
        data["retired"] = keep_retired
        sink._save_active(data)
    return dropped + drop_orphans(sink, grace_ms)

def drop_orphans(sink, grace_ms: float) -> list[str]:
    """Drop tables no pointer names (a build killed before its switch).

    Maintenance waits ``grace_ms`` after a table's last write; at open, with
    the writer lock held by this process, no build can be in progress, and an
    orphan was never live (no reader has it open), so it goes at once.
    """
    now = _now_ms()
    dropped: list[str] = []
    known = ({e["table"] for e in sink._active["personas"].values()}
             | {r["table"] for r in sink._active["retired"]} | sink._building)
    try:
        names = sink._table_names()
    except Exception as e:
        log.warning("lancedb: cannot list tables: %s", e)
        return dropped
    for n in names:
        if n.startswith(TABLE_PREFIX) and n not in known:
            age = age_ms(sink, n, now, grace_ms)
            if age >= grace_ms and sink._drop_table(n):  # a crashed rebuild's leftover
                dropped.append(n)
    return dropped

def age_ms(sink, name: str, now: int, default: float) -> float:
    """Time since the table's last write (local: file times; object storage: its latest version)."""
    try:
        if sink.db_dir is not None:
            base = sink.db_dir / f"{name}.lance"
            mtime = max(p.stat().st_mtime for p in (base, base / "_versions") if p.exists())
            return now - mtime * 1000
        versions = sink._db.open_table(name).list_versions()
        stamp = max(v["timestamp"] for v in versions)
        return now - stamp.timestamp() * 1000
    except Exception:
        return default
