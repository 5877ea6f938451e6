"""A doorbell for the local backend's loop: a FIFO in the backend's state directory.

A supervisor rings it once it has written how its attempt ended, so the loop passes at once
(the next pod is admitted, the watcher is told) instead of at its next interval. Ringing
never blocks and never fails: with no loop listening it does nothing, and a bell already
rung (a full pipe) needs no second ring.
"""

from __future__ import annotations

import contextlib
import os
import select
import stat
from pathlib import Path

BELL_FILE = "doorbell"


class Doorbell:
    """The listening end, held by the backend's loop."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkfifo(path, 0o600)
        if not stat.S_ISFIFO(path.stat().st_mode):
            raise RuntimeError(f"{path} exists and is not a FIFO")
        # Read-write, so the FIFO always has a writer: no end-of-file when a ringer leaves.
        self._fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)

    def wait(self, timeout_s: float) -> bool:
        """Wait until the bell rings or `timeout_s` passes; whether it rang."""
        readable, _, _ = select.select([self._fd], [], [], timeout_s)
        if not readable:
            return False
        with contextlib.suppress(BlockingIOError):
            while os.read(self._fd, 4096):
                pass
        return True

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)


def ring(path: Path) -> None:
    """Ring the bell at `path` if a loop listens; never blocks, never raises."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # no bell, or nobody listening (ENXIO)
        return
    try:
        os.write(fd, b"!")
    except OSError:  # full: it is ringing already
        pass
    finally:
        os.close(fd)
