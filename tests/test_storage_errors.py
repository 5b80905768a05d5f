"""Storage failures named by their cause (indexer.runtime.storage_errors), the state DB's rollbacks
that no longer hide them, and the API's answers for them (in process, over the fake backend).

The same on a real full file system, end to end: tests/test_full_disk.py."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from peewee import SqliteDatabase
from structlog.testing import capture_logs

from indexer.core.errors import describe
from indexer.runtime.storage_errors import StorageCause, StorageFailure, classify, sqlite_code
from indexer.service.api import create_app
from indexer.state.db import StateDB
from tests.test_api import AUTH, TOKEN, FakeBackend


def sqlite_full_error(tmp_path: Path) -> sqlite3.Error:
    """A real SQLITE_FULL: the file may not grow by one page."""
    conn = sqlite3.connect(tmp_path / "full.sqlite", isolation_level=None)
    conn.execute("CREATE TABLE t (v TEXT)")
    conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")
    try:
        conn.execute("INSERT INTO t VALUES (?)", ("x" * 100_000,))
    except sqlite3.Error as exc:
        return exc
    finally:
        conn.close()
    raise AssertionError("the insert did not fail")


def fill_in_one_transaction(db, rows: int = 2000) -> None:
    with db.atomic(), db.atomic():  # a transaction, and a savepoint inside it as the sync's nested writes take
        for i in range(rows):
            db.execute_sql("INSERT INTO meta (key, scope, value) VALUES (?, '', ?)", (f"k{i}", "x" * 500))


def test_sqlite_full_is_a_full_disk_pinned_to_the_folder(tmp_path):
    fault = classify(sqlite_full_error(tmp_path), [tmp_path / "not-yet-created", tmp_path])
    assert fault is not None and fault.cause is StorageCause.DISK_FULL
    assert fault.where == tmp_path / "not-yet-created"  # measured on its parent's file system
    assert fault.free_bytes is not None and fault.total_bytes
    assert fault.message.startswith(f"disk full at {tmp_path / 'not-yet-created'} (")
    assert "free space on that file system" in fault.message and "database or disk is full" in fault.message
    assert fault.log_fields()["cause"] == "disk_full"


def test_a_damaged_file_is_corrupt_and_a_busy_one_is_no_storage_cause(tmp_path):
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"not a database at all " * 200)
    with pytest.raises(sqlite3.DatabaseError) as caught:
        sqlite3.connect(bad).execute("SELECT * FROM sqlite_master").fetchall()
    assert sqlite_code(caught.value) == 26
    assert classify(caught.value).cause is StorageCause.CORRUPT

    holder = sqlite3.connect(tmp_path / "busy.sqlite", isolation_level=None)
    holder.execute("CREATE TABLE t (v)")
    holder.execute("BEGIN EXCLUSIVE")
    with pytest.raises(sqlite3.OperationalError) as busy:
        sqlite3.connect(tmp_path / "busy.sqlite", timeout=0).execute("SELECT * FROM t").fetchall()
    holder.close()
    assert classify(busy.value, [tmp_path]) is None  # "database is locked": not a storage fault


@pytest.mark.parametrize("code,cause", [(errno.ENOSPC, StorageCause.DISK_FULL), (errno.EDQUOT, StorageCause.DISK_FULL),
                                        (errno.EROFS, StorageCause.READ_ONLY), (errno.EACCES, StorageCause.PERMISSION)])
def test_os_errors_by_errno(code, cause):
    exc = OSError(code, "boom", "/srv/index/x")
    assert classify(exc).cause is cause


def test_errors_without_codes_are_read_by_their_text_and_a_code_outranks_the_text():
    lance = RuntimeError("LanceError(IO): Generic LocalFileSystem error: No space left on device (os error 28)")
    assert classify(lance).cause is StorageCause.DISK_FULL
    assert classify(RuntimeError("Read-only file system (os error 30)")).cause is StorageCause.READ_ONLY
    misleading = sqlite3.OperationalError("no such table: permission denied")
    misleading.sqlite_errorcode = 1  # SQLITE_ERROR: its text is a name, not a cause
    assert classify(misleading) is None
    assert classify(ValueError("visibility must be 'shared' or 'private'")) is None


def test_a_storage_failure_keeps_its_pinned_fault(tmp_path):
    fault = classify(sqlite_full_error(tmp_path), [tmp_path])
    wrapped = RuntimeError("surfaced")
    wrapped.__cause__ = StorageFailure(fault)
    assert classify(wrapped, [Path("/elsewhere")]) is fault


def test_peewee_masking_rollback_is_seen_through(tmp_path):
    """A plain peewee database still masks SQLITE_FULL with "cannot rollback": the chain holds it."""
    db = SqliteDatabase(str(tmp_path / "plain.sqlite"))
    db.execute_sql("CREATE TABLE meta (key TEXT, scope TEXT, value TEXT)")
    db.execute_sql(f"PRAGMA max_page_count = {db.execute_sql('PRAGMA page_count').fetchone()[0]}")
    with pytest.raises(Exception) as caught:
        fill_in_one_transaction(db)
    assert "cannot rollback" in str(caught.value) or "no such savepoint" in str(caught.value)
    assert classify(caught.value).cause is StorageCause.DISK_FULL


def test_the_state_db_raises_the_full_disk_not_a_failed_rollback(tmp_path):
    state = StateDB(tmp_path / "state.sqlite")
    db = state.db
    db.execute_sql(f"PRAGMA max_page_count = {db.execute_sql('PRAGMA page_count').fetchone()[0]}")
    with pytest.raises(Exception) as caught:
        fill_in_one_transaction(db)
    assert str(caught.value) == "database or disk is full", describe(caught.value)
    assert "rollback" not in describe(caught.value) and "savepoint" not in describe(caught.value)
    assert not db.connection().in_transaction
    db.execute_sql("PRAGMA max_page_count = 1073741823")
    state.set_meta("after", "room again")  # usable at once: no transaction left open
    assert state.get_meta("after") == "room again" and state.get_meta("k0") is None
    state.close()


def test_a_failing_commit_is_raised_as_itself(tmp_path):
    """The commit itself hits the full disk (the visibility change's path): its error, not the rollback's."""
    state = StateDB(tmp_path / "state.sqlite")
    state.register_sessions([("s1", "atlas", "active")])
    db = state.db
    db.execute_sql("PRAGMA wal_autocheckpoint = 0")
    db.execute_sql(f"PRAGMA max_page_count = {db.execute_sql('PRAGMA page_count').fetchone()[0]}")
    with pytest.raises(Exception) as caught, state.atomic():
        for i in range(300):
            state.set_meta(f"m{i}", "y" * 1000)
    assert "full" in str(caught.value) and "rollback" not in describe(caught.value)
    state.close()


@pytest.fixture
def api(tmp_path):
    backend = FakeBackend()
    return backend, TestClient(create_app(backend, admin_token=TOKEN), raise_server_exceptions=False)


def test_the_api_names_a_full_disk_507_and_other_causes_503(api, tmp_path):
    backend, client = api
    backend.fail_with = StorageFailure(classify(sqlite_full_error(tmp_path), [tmp_path]))
    with capture_logs() as logs:
        r = client.put("/v1/admin/sessions/visibility", json={"label": "main", "visibility": "private"}, headers=AUTH)
    assert r.status_code == 507, r.text
    assert r.json()["error"].startswith(f"disk full at {tmp_path} (") and "free space" in r.json()["error"]
    assert r.headers["Retry-After"]
    (event,) = [e for e in logs if e["event"] == "api.storage_error"]
    assert event["cause"] == "disk_full" and event["where"] == str(tmp_path)
    assert event["error"] == "OperationalError: database or disk is full"

    backend.fail_with = OSError(errno.EROFS, "Read-only file system", "/srv/index/state.sqlite")
    r = client.post("/v1/admin/projects/p/sessions", json={"labels": ["main"]}, headers=AUTH)
    assert r.status_code == 503 and r.json()["error"].startswith("read-only file system: ")
    assert "remount it read-write" in r.json()["error"]

    backend.fail_with = RuntimeError("something else")
    r = client.put("/v1/admin/sessions/visibility", json={"label": "main", "visibility": "private"}, headers=AUTH)
    assert r.status_code == 503 and r.json() == {"error": "index unavailable, retry"}


def test_readyz_says_why_when_the_backend_does(api):
    backend, client = api
    backend.ready = False
    backend.not_ready_reason = lambda: "disk full at /srv/index (0 B free of 1.0 GiB): free space"
    r = client.get("/readyz")
    assert r.status_code == 503
    assert r.json() == {"status": "starting", "reason": "disk full at /srv/index (0 B free of 1.0 GiB): free space"}
    backend.ready = True
    assert client.get("/readyz").json() == {"status": "ready"}


def test_507_is_documented_wherever_503_is(api):
    _, client = api
    paths = client.get("/openapi.json").json()["paths"]
    put = paths["/v1/admin/sessions/visibility"]["put"]["responses"]
    assert "507" in put and "503" in put
