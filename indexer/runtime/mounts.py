"""Which file system a folder lives on (``/proc/self/mountinfo``), and whether an index can live there.

``config check`` must not pass an index folder under ``/proc`` or ``/sys``: root may
"write" there by permission bits, but no file can be created. Read only; Linux
(elsewhere every folder is taken as a real file system).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PSEUDO_FILE_SYSTEMS", "Mount", "mount_of", "unfit_for_files"]

#: Kernel file systems that hold no user files.
PSEUDO_FILE_SYSTEMS = frozenset({
    "proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "debugfs", "tracefs", "securityfs", "pstore",
    "bpf", "configfs", "fusectl", "mqueue", "hugetlbfs", "autofs", "binfmt_misc", "efivarfs", "selinuxfs",
    "nsfs", "rpc_pipefs",
})

MOUNTINFO = Path("/proc/self/mountinfo")


@dataclass(frozen=True, slots=True)
class Mount:
    point: Path
    fstype: str


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal (``\\040``)."""
    return field.encode().decode("unicode_escape").encode("latin-1").decode("utf-8", "replace")


def mount_of(path: Path, mountinfo: Path = MOUNTINFO) -> Mount | None:
    """The mount ``path`` (or its nearest existing parent) lies on; None when unknown."""
    probe = path.absolute()
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    try:
        target = probe.resolve()
        lines = mountinfo.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    best: Mount | None = None
    for line in lines:
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if not sep or len(fields) < 5 or not right.split():
            continue
        point = Path(_unescape(fields[4]))
        if (target == point or point in target.parents) and \
                (best is None or len(point.parts) >= len(best.point.parts)):
            best = Mount(point, right.split()[0])  # later lines over-mount earlier ones
    return best


def unfit_for_files(path: Path) -> str | None:
    """Why no index can be written under ``path`` (a kernel file system, a read-only mount); None
    when nothing says so."""
    mount = mount_of(path)
    if mount is not None and mount.fstype in PSEUDO_FILE_SYSTEMS:
        return f"{mount.point} is a {mount.fstype} file system (the kernel's, not for files)"
    probe = path.absolute()
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    try:
        if os.statvfs(probe).f_flag & os.ST_RDONLY:
            return f"{probe} is on a file system mounted read-only"
    except OSError:
        return None
    return None
