"""The writer lock: one writer per index dir, released by the kernel on death."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from indexer.state.lock import LOCK_NAME, Holder, LockHeldError, WriterLock, acquire, read_holder

ROOT = Path(__file__).resolve().parents[1]

HOLDER_SCRIPT = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {root!r})
    from indexer.state.lock import acquire
    lock = acquire(sys.argv[1], sys.argv[2])
    print("locked", flush=True)
    if sys.argv[3] == "exit":
        sys.exit(0)          # no release(): the kernel drops the lock
    time.sleep(120)
    """
)


def _start_holder(index_dir: Path, role: str = "run", mode: str = "sleep") -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER_SCRIPT.format(root=str(ROOT)), str(index_dir), role, mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    assert line.strip() == "locked", proc.stderr.read()
    return proc


def _try_acquire_in_subprocess(index_dir: Path, role: str = "sync") -> subprocess.CompletedProcess:
    code = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from indexer.state.lock import acquire, LockHeldError
        try:
            with acquire({str(index_dir)!r}, {role!r}):
                print("acquired")
        except LockHeldError as exc:
            print("held:", exc)
            sys.exit(1)
        """
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_second_acquire_in_the_same_process_fails_and_names_the_holder(tmp_path):
    with acquire(tmp_path, "run") as lock:
        assert lock.held
        with pytest.raises(LockHeldError) as info:
            acquire(tmp_path, "sync", wait=0.05)
        err = info.value
        assert err.holder is not None and err.holder.pid == os.getpid() and err.holder.role == "run"
        msg = str(err)
        assert f"pid {os.getpid()}" in msg
        assert "ledger-indexer run" in msg and "since" in msg
        assert "systemctl stop ledger-indexer" in msg and "ledger-indexer reindex" in msg
        assert str(tmp_path) in msg
    # released on exit of the with block
    assert not lock.held
    with acquire(tmp_path, "sync"):
        pass


def test_holder_record_and_read_holder(tmp_path):
    assert read_holder(tmp_path) is None  # no lock file yet
    lock = acquire(tmp_path, "reindex", extra={"api": "http://127.0.0.1:8765"})
    try:
        holder = read_holder(tmp_path)
        assert isinstance(holder, Holder)
        assert holder.pid == os.getpid() and holder.role == "reindex"
        assert holder.since is not None and abs(time.time() - holder.since.timestamp()) < 60
        assert holder.extra == {"api": "http://127.0.0.1:8765"}
        record = json.loads((tmp_path / LOCK_NAME).read_text())
        assert record["pid"] == os.getpid() and record["role"] == "reindex"
        lock.update(port=8765)
        assert read_holder(tmp_path).extra == {"api": "http://127.0.0.1:8765", "port": 8765}
        # read_holder's probe must not make the holder lose its lock
        assert lock.held
    finally:
        lock.release()
    assert read_holder(tmp_path) is None
    assert (tmp_path / LOCK_NAME).exists()  # the file is kept, its record cleared
    assert (tmp_path / LOCK_NAME).read_text() == "\n"


def test_second_acquire_in_a_subprocess_fails(tmp_path):
    with acquire(tmp_path, "run"):
        res = _try_acquire_in_subprocess(tmp_path, "sync")
        assert res.returncode == 1, res.stderr
        assert "held:" in res.stdout and f"pid {os.getpid()}" in res.stdout
        assert "ledger-indexer run" in res.stdout
    res = _try_acquire_in_subprocess(tmp_path, "sync")
    assert res.returncode == 0 and "acquired" in res.stdout, res.stdout + res.stderr


def test_lock_held_by_a_subprocess_then_released_on_its_exit(tmp_path):
    proc = _start_holder(tmp_path, "sync", mode="sleep")
    try:
        holder = read_holder(tmp_path)
        assert holder is not None and holder.pid == proc.pid and holder.role == "sync"
        with pytest.raises(LockHeldError) as info:
            acquire(tmp_path, "run", wait=0.05)
        assert f"pid {proc.pid}" in str(info.value)
        assert "Wait for that `ledger-indexer sync` to finish" in str(info.value)
    finally:
        proc.terminate()
        proc.wait(10)
    with acquire(tmp_path, "run"):
        pass
    # and a holder that exits without releasing (sys.exit, no release()):
    proc = _start_holder(tmp_path, "sync", mode="exit")
    proc.wait(10)
    assert read_holder(tmp_path) is None
    with acquire(tmp_path, "run"):
        pass


def test_kill_9_never_leaves_a_stale_lock(tmp_path):
    proc = _start_holder(tmp_path, "run")
    assert read_holder(tmp_path).pid == proc.pid
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    # The stale record is still in the file, but nobody holds the lock.
    assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == proc.pid
    assert read_holder(tmp_path) is None
    with acquire(tmp_path, "run", wait=0) as lock:
        assert lock.held
        assert read_holder(tmp_path).pid == os.getpid()


def test_context_manager_class_and_idempotent_release(tmp_path):
    lock = WriterLock(tmp_path / "new" / "index", "sync")
    with lock:
        assert lock.held and lock.path.exists()  # the index dir is created
        assert lock.acquire() is lock  # re-entrant acquire is a no-op
    lock.release()
    lock.release()
    assert not lock.held
    with pytest.raises(RuntimeError):
        lock.update(x=1)


def test_messages_depend_on_who_holds_it(tmp_path):
    run_holder = Holder(pid=12, role="run", since=None)
    msg = str(LockHeldError(tmp_path, run_holder, "sync"))
    assert "pid 12 (ledger-indexer run)" in msg and "ledger-indexer reindex" in msg
    msg = str(LockHeldError(tmp_path, run_holder, "reindex"))
    assert "delegates to the running daemon" in msg and "admin_token_file" in msg
    msg = str(LockHeldError(tmp_path, Holder(pid=None, role=None, since=None), "run"))
    assert "an unknown process" in msg and "systemctl stop ledger-indexer" in msg


def test_unreadable_record_still_reports_the_lock(tmp_path):
    import fcntl

    path = tmp_path / LOCK_NAME
    path.write_text("not json")
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a holder that wrote garbage
        holder = read_holder(tmp_path)
        assert holder == Holder(pid=None, role=None, since=None)
        with pytest.raises(LockHeldError, match="an unknown process"):
            acquire(tmp_path, "sync", wait=0)
    finally:
        os.close(fd)
