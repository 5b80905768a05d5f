"""A real full file system for tests: a small tmpfs mounted in ``tmp_path``, filled to the last byte.

Mounting needs root (or CAP_SYS_ADMIN): CI runs as root. Elsewhere the tests
that use it are skipped, saying so.
"""

from __future__ import annotations

import errno
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

FILLER = ".filler"


class SmallDisk:
    """A mounted tmpfs; :meth:`fill` takes every free byte, :meth:`make_room` gives them back."""

    def __init__(self, path: Path):
        self.path = path

    def free_bytes(self) -> int:
        return shutil.disk_usage(self.path).free

    def fill(self) -> None:
        """Write a filler until ENOSPC, in ever smaller pieces, so not one byte is left."""
        with open(self.path / FILLER, "ab", buffering=0) as f:
            for piece in (1 << 20, 1 << 16, 1 << 12, 1):
                try:
                    while True:
                        f.write(b"\0" * piece)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
        assert self.free_bytes() == 0

    def make_room(self) -> None:
        (self.path / FILLER).unlink(missing_ok=True)


def mount_small_disk(where: Path, size: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"a real full disk needs a tmpfs mount (root or CAP_SYS_ADMIN): {done.stderr.strip()}")


def unmount(where: Path) -> None:
    if subprocess.run(["umount", str(where)], capture_output=True, check=False).returncode != 0:
        subprocess.run(["umount", "-l", str(where)], check=True)  # still busy (a killed process): detach


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    """A 16 MiB tmpfs at ``tmp_path/disk``, unmounted at teardown."""
    where = tmp_path / "disk"
    mount_small_disk(where, "16m")
    try:
        yield SmallDisk(where)
    finally:
        unmount(where)
