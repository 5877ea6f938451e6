"""Files and folders only the service's user may read: what holds secrets on disk.

The data directory holds the secret key, the SQLite database (password and token hashes) and
the file-system broker's messages. Each is made private when it is created (0700 folders,
0600 files, whatever the umask) and made private again at every start, so a folder or file
created looser by an earlier version, or by hand, is fixed.
"""

from __future__ import annotations

import os
from pathlib import Path

FOLDER_MODE = 0o700
FILE_MODE = 0o600


def private_folder(path: Path) -> Path:
    """`path` (and missing parents) created, then made 0700."""
    path.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
    path.chmod(FOLDER_MODE)
    return path


def private_file(path: Path) -> Path:
    """`path` created empty if missing (never truncated), then made 0600."""
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, FILE_MODE))
    path.chmod(FILE_MODE)
    return path


def private_sqlite(path: Path) -> None:
    """A SQLite database file and its journals (SQLite gives these its file's mode) 0600.

    An empty file is a new database to SQLite, so creating it first only sets its mode.
    """
    if not path.parent.is_dir():
        return  # Django names the missing folder when it connects
    private_file(path)
    for suffix in ("-wal", "-shm", "-journal"):
        journal = path.with_name(path.name + suffix)
        if journal.exists():
            journal.chmod(FILE_MODE)
