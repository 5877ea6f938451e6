"""A run store the harness cannot write: a failure of the store, not of the analysis.

Every attempt checks first that it can create, write and remove a file in its task directory;
a write that fails later for a reason of the file system (read-only, no permission, no space,
quota) is the same failure. Either exits `EXIT_STORE` (5) with one line naming the path, and
the service reports "the store is not writable: PATH" instead of blaming a unit.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

STORE_ERRNOS = frozenset(
    {errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
)


class StoreNotWritable(Exception):
    """The run store refused a write: `path` and why."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"the store is not writable: {path} ({reason})")
        self.path = str(path)
        self.reason = reason


def probe(directory: Path) -> None:
    """Create, write, flush and remove a small file in `directory`; StoreNotWritable if not."""
    name = directory / f".simrun-probe-{os.getpid()}"
    try:
        with name.open("wb") as handle:
            handle.write(b"simrun\n")
            handle.flush()
            os.fsync(handle.fileno())
        name.unlink()
    except OSError as exc:
        raise StoreNotWritable(directory, exc.strerror or str(exc)) from exc


def as_store_failure(exc: BaseException, store: Path | None) -> StoreNotWritable | None:
    """The store failure an exception is, if it is one: a refused write under `store`."""
    if isinstance(exc, StoreNotWritable):
        return exc
    if not isinstance(exc, OSError) or exc.errno not in STORE_ERRNOS or store is None:
        return None
    where = exc.filename
    if where is None or not Path(os.fsdecode(where)).is_relative_to(store):
        return None
    return StoreNotWritable(os.fsdecode(where), exc.strerror or str(exc))
