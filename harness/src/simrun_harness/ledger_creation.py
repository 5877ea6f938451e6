"""The creation of a split task's ledger by its coordinator: every unit pending (or done, when
reused), built in a temporary directory and renamed into place, so a ledger that exists is
complete and a second coordinator keeps the first one's (`ledger.py` describes the files).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from simrun_harness.layout import TaskPaths
from simrun_harness.ledger import META_FILE, UNITS_FILE, Holder, ledger_exists, unit_names

LEDGER_FORMAT = 1
LINKS_PER_INODE = 10_000
_NO_LINK = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK}


def create_ledger(
    paths: TaskPaths, units: Sequence[Any], holder: Holder, done: Collection[str] = ()
) -> bool:
    """Create the ledger with every unit pending, atomically; False if it already exists.

    The units named in `done` (reused: their outputs already linked into `units/`) start
    done instead, so no worker claims them.

    The ledger is built in a temporary directory beside it and renamed into place: renaming
    onto an existing (non-empty) ledger fails, so a retried coordinator keeps the first one.
    """
    paths.root.mkdir(parents=True, exist_ok=True)
    paths.units.mkdir(exist_ok=True)
    if ledger_exists(paths):
        return False
    tmp = paths.root / f".ledger-{holder.token}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    for sub in ("pending", "claimed", "done", "heartbeats", "memory_kills"):
        (tmp / sub).mkdir(parents=True)
    names = unit_names(len(units))
    (tmp / UNITS_FILE).write_text(json.dumps(list(units)))
    meta = {
        "format": LEDGER_FORMAT,
        "total": len(names),
        "created_at": datetime.now(UTC).isoformat(),
        "created_by": holder.token,
    }
    (tmp / META_FILE).write_text(json.dumps(meta))
    _fill_pending(tmp, [n for n in names if n not in done])
    for name in done:
        _create(os.path.join(tmp, "done", name))
    try:
        os.rename(tmp, paths.ledger)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if ledger_exists(paths):
            return False
        raise
    return True


def _fill_pending(ledger: Path, names: list[str]) -> None:
    """One empty file per unit in `pending/`, as hard links of a few empty files.

    A link only adds a directory entry, several times cheaper than creating a file; a unit
    is a name, whatever inode it shares. A fresh inode every LINKS_PER_INODE names stays far
    below the link limits of file systems (ext4: 65,000).
    """
    pending = os.path.join(ledger, "pending")
    for start in range(0, len(names), LINKS_PER_INODE):
        first = os.path.join(pending, names[start])
        _create(first)
        for name in names[start + 1 : start + LINKS_PER_INODE]:
            try:
                os.link(first, os.path.join(pending, name))
            except OSError as exc:  # no hard links on this file system, or too many
                if exc.errno not in _NO_LINK:
                    raise
                _create(os.path.join(pending, name))


def _create(path: str) -> None:
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
