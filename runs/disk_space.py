"""Free space on the disks simrun writes to, in plain values (no Django: the commands that
talk to the service load this, and the settings read its default).

simrun needs `SIMRUN_DISK_MIN_FREE_MB` free on each disk it writes (the data directory: the
database, the broker, the logs; the run store): below that its writes start failing (a message
half written, a database that refuses a row, a log line lost), so it counts that disk as full
and names it, with what is free and what it needs. A write that failed for want of space
(`ENOSPC`, SQLite's "database or disk is full") is named the same way, never as a fault of the
service whose id would be in a log on that very disk.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MIB = 1024 * 1024
DEFAULT_MIN_FREE_MB = 100.0  # SIMRUN_DISK_MIN_FREE_MB's default


def size_text(count: int) -> str:
    """A size in one word: 0B, 812KiB, 3.9MiB, 12GiB."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            text = f"{value:.1f}" if unit != "B" and value < 10 else f"{value:.0f}"
            return f"{text}{unit}"
        value /= 1024
    raise AssertionError  # the loop returns at GiB


@dataclass(frozen=True)
class DiskFull:
    """A disk simrun writes to that has less free space than simrun needs."""

    path: str  # the directory of simrun's on that disk (the data directory, the store)
    free_bytes: int
    needed_bytes: int

    def message(self) -> str:
        return (
            f"the disk of {self.path} is full: {size_text(self.free_bytes)} free, "
            f"simrun needs {size_text(self.needed_bytes)} free"
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "full": True,
            "path": self.path,
            "free_bytes": self.free_bytes,
            "needed_bytes": self.needed_bytes,
        }


def free_bytes(path: Path) -> int | None:
    """Bytes an unprivileged writer may still use on the disk of `path`; None if unknown."""
    try:
        found = os.statvfs(path)
    except OSError:
        return None
    return found.f_bavail * found.f_frsize


def disk_full(paths: Iterable[Path], *, min_free: int) -> DiskFull | None:
    """The first of `paths` whose disk has less than `min_free` bytes free, if any."""
    for path in paths:
        free = free_bytes(path)
        if free is not None and free < min_free:
            return DiskFull(str(path), free, min_free)
    return None


def failed_write(exc: OSError, *, data_dir: Path | None) -> DiskFull:
    """The full disk behind a write of this process that failed for want of space, without
    Django's settings (a command that talks to the service): named by the data directory
    when the file was in it, else by the file's directory."""
    filename = exc.filename if isinstance(exc.filename, str) else None
    path = Path(filename).parent if filename else (data_dir or Path.cwd())
    if data_dir is not None and (path == data_dir or data_dir in path.parents):
        path = data_dir
    needed = float(os.environ.get("SIMRUN_DISK_MIN_FREE_MB") or DEFAULT_MIN_FREE_MB)
    return DiskFull(str(path), free_bytes(path) or 0, int(needed * MIB))


def is_disk_full(exc: BaseException) -> bool:
    """Whether `exc` (or what caused it) is a write refused for want of space."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if "database or disk is full" in str(current):  # SQLite's SQLITE_FULL
            return True
        current = current.__cause__ or current.__context__
    return False
