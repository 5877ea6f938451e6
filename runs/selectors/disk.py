"""Is the disk of this installation full? `status`, `follow`, the run page and the API say
so (the rules and values are `runs.disk_space`'s; the paths and the limit are the settings')."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from runs.disk_space import MIB, DiskFull, disk_full, free_bytes, is_disk_full

__all__ = ["DiskFull", "disk_of_failure", "installation_disk", "is_disk_full", "min_free_bytes"]


def installation_paths() -> list[Path]:
    """The directories simrun writes to: the data directory, then the run store."""
    return [Path(settings.DATA_DIR), Path(settings.SIMRUN_STORE)]


def min_free_bytes() -> int:
    return int(settings.SIMRUN_DISK_MIN_FREE_MB * MIB)


def installation_disk() -> DiskFull | None:
    """The full disk of this installation, None while every one has room."""
    return disk_full(installation_paths(), min_free=min_free_bytes())


def disk_of_failure(exc: BaseException) -> DiskFull:
    """The full disk behind a write that failed for want of space: the installation's disk
    that is short of room, else the disk of the file that could not be written."""
    found = installation_disk()
    if found is not None:
        return found
    filename = getattr(exc, "filename", None)
    path = Path(filename).parent if isinstance(filename, str) else Path(settings.DATA_DIR)
    return DiskFull(str(path), free_bytes(path) or 0, min_free_bytes())
