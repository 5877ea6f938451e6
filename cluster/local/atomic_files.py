"""Small JSON state files written atomically, and the advisory locks that guard them.

Every state file of the local backend is written whole under a temporary name and renamed
into place, so a reader (another process, a restarted service) sees the old file or the new
one, never half of one. A file that must be written once by whichever of two writers comes
first (the exit status of an attempt) is linked into place, which fails when it exists.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from simrun_harness import store_reads


def _temporary(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    return Path(name)


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Replace `path` with `data` as JSON, atomically."""
    temporary = _temporary(path, data)
    try:
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def create_json(path: Path, data: dict[str, Any]) -> bool:
    """Write `data` to `path` only if nothing is there yet; whether this call wrote it."""
    temporary = _temporary(path, data)
    try:
        os.link(temporary, path)
    except FileExistsError:
        return False
    finally:
        temporary.unlink(missing_ok=True)
    return True


STATE_MAX_BYTES = 1024 * 1024
"""A state file is a few hundred bytes; a larger one is not one of ours."""


def read_json(path: Path, *, root: Path | None = None) -> dict[str, Any] | None:
    """The JSON object in `path`, None when the file does not exist. A run's code (the
    service's user here) may have replaced the file: a link, a FIFO or a device reads as
    absent and at most STATE_MAX_BYTES are read (`store_reads`), so /dev/zero hangs nothing.
    `root`: the trusted directory `path` lies below (the run store, for a run's files), no
    link below it followed; without it, only the file itself (the backend's own state)."""
    if root is not None:
        path = Path(os.path.abspath(path))
    try:
        text = store_reads.read_bytes(root or path.parent, path, limit=STATE_MAX_BYTES)
    except FileNotFoundError:
        return None
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return data


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive `flock` on `path` (created if missing) for the block.

    Each call opens the file anew, so two threads of one process exclude each other as two
    processes do.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
