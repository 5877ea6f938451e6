"""The file broker's doorbells: one FIFO per consumer, rung by every publisher.

A consumer (a connection that drains: the Celery worker, a `ping` waiting for its reply) makes
`<pid>.<random>.fifo` in the doorbell folder and waits on it between empty looks at the queue
folder; a publisher, once its message is renamed into the queue folder, writes one byte to
every doorbell there. Ringing never blocks and never fails a publish: a doorbell nobody reads
(its consumer died) is removed, a full one is ringing already, anything that is not a FIFO
(a regular file, a link, a directory) is neither opened blocking nor followed.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import stat
import time
import uuid
from pathlib import Path

log = logging.getLogger("simrun.broker")

SUFFIX = ".fifo"


class Doorbell:
    """The listening end of one consumer's doorbell, in `folder`."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        name = f"{os.getpid()}.{uuid.uuid4().hex[:12]}{SUFFIX}"
        # made under a hidden name and renamed once it has a reader: a publisher that met it
        # before would find no reader and remove it
        hidden = folder / f".{name}"
        os.mkfifo(hidden, 0o600)
        self._fds: list[int] = []
        try:
            self._fds.append(os.open(hidden, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW))
            # held open for writing too, so a ringer that leaves is no end-of-file
            self._fds.append(os.open(hidden, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW))
            self.path = folder / name
            os.rename(hidden, self.path)
        except BaseException:
            hidden.unlink(missing_ok=True)
            self._close_fds()
            raise
        self._read_fd = self._fds[0]

    def wait(self, timeout_s: float) -> bool:
        """Wait until a publisher rings or `timeout_s` passes; whether it rang."""
        try:
            readable, _, _ = select.select([self._read_fd], [], [], max(timeout_s, 0.0))
        except (OSError, ValueError):  # closed by another thread: the connection is closing
            return True
        if not readable:
            return False
        with contextlib.suppress(OSError):  # every ring so far (EAGAIN: none left)
            while os.read(self._read_fd, 4096):
                pass
        return True

    def close(self) -> None:
        """Remove the doorbell and close both ends."""
        self.path.unlink(missing_ok=True)
        self._close_fds()

    def _close_fds(self) -> None:
        while self._fds:
            with contextlib.suppress(OSError):
                os.close(self._fds.pop())


def ring_all(folder: Path) -> None:
    """Ring every doorbell in `folder`; never blocks, never raises."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return
    except OSError as exc:
        log.debug("broker: cannot list the doorbells in %s: %s", folder, exc)
        return
    for name in names:
        if name.endswith(SUFFIX) and not name.startswith("."):
            try:
                _ring(folder / name)
            except Exception as exc:  # a doorbell must never fail a publish
                log.debug("broker: could not ring %s: %s", folder / name, exc)


def _ring(path: Path) -> None:
    """One byte to the FIFO at `path`; a FIFO without a reader is removed."""
    try:
        if not stat.S_ISFIFO(os.lstat(path).st_mode):
            return  # not a doorbell: never opened
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # no reader: its consumer is gone
            path.unlink(missing_ok=True)
        return
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):  # replaced since the lstat: not written
            with contextlib.suppress(BlockingIOError):  # full: a ring is pending anyway
                os.write(fd, b"!")
    finally:
        os.close(fd)


def clean_doorbells(folder: Path, *, older_than_s: float = 60.0) -> list[str]:
    """Remove the doorbells in `folder` nobody listens to any more (their consumer died),
    older than `older_than_s` (a consumer may be making one). Only FIFOs. The names removed."""
    removed = []
    now = time.time()
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(folder):
            path = Path(entry.path)
            with contextlib.suppress(OSError):
                info = entry.stat(follow_symlinks=False)
                if not stat.S_ISFIFO(info.st_mode) or now - info.st_mtime <= older_than_s:
                    continue
                try:
                    os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW))
                except OSError as exc:
                    if exc.errno != errno.ENXIO:
                        raise
                    path.unlink()
                    removed.append(entry.name)
    return removed
