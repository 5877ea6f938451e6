"""The services' logs: what each service writes to its stdout and stderr, kept in
`logs/<name>.log` and rotated by size (`SIMRUN_LOG_MAX_BYTES`, `SIMRUN_LOG_BACKUPS`).

A service writes into a pipe; serve's `LogPump` thread reads every pipe and appends to the
log, so a log is rotated without the service knowing (a file a process holds open could not
be renamed from under it without losing what it writes next). The pump only reads and
writes; it never starts a process. A write that fails (the disk is full) is dropped and the
count of bytes lost is written once the log can be written again.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
from pathlib import Path

CHUNK = 65536


class RotatingLog:
    """A log file that is renamed to `.1` (and `.1` to `.2` …) once it holds `max_bytes`."""

    def __init__(self, path: Path, *, max_bytes: int, backups: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.backups = backups
        self.lost = 0  # bytes dropped since the last write that succeeded
        self._file = path.open("ab")

    def write(self, data: bytes) -> None:
        """Append `data`, rotating whenever the log is full (a file never holds more than
        `max_bytes`: what does not fit goes to the next, cut after a line where one ends);
        drop it when it cannot be written (counted, and said once it can be written again)."""
        try:
            if self.lost:
                self._put(f"[simrun: {self.lost} bytes of output lost]\n".encode())
                self.lost = 0
            self._put(data)
            self._file.flush()
        except OSError:
            self.lost += len(data)
            with contextlib.suppress(OSError):
                self._file.close()
            with contextlib.suppress(OSError):
                self._file = self.path.open("ab")

    def _put(self, data: bytes) -> None:
        while data:
            room = self.max_bytes - self._file.tell()
            if len(data) <= room:
                self._file.write(data)
                return
            if room > 0:
                end = data.rfind(b"\n", 0, room) + 1
                if end == 0 and self._file.tell() == 0:  # a line longer than a whole file
                    end = room
                self._file.write(data[:end])
                data = data[end:]
            self._rotate()

    def _rotate(self) -> None:
        self._file.close()
        if self.backups > 0:
            for n in range(self.backups - 1, 0, -1):
                older = self.path.with_name(f"{self.path.name}.{n}")
                if older.exists():
                    os.replace(older, self.path.with_name(f"{self.path.name}.{n + 1}"))
            os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        self._file = self.path.open("wb")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()


class LogPump:
    """One thread that copies every service's output pipe into its `RotatingLog`."""

    def __init__(self) -> None:
        self._logs: dict[int, RotatingLog] = {}
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="simrun-logs", daemon=True)
        self._thread.start()

    def add(self, fd: int, log: RotatingLog) -> None:
        """Copy what is written into the read end `fd` to `log` until its writers closed it
        (the pump then closes `fd`; the log is its owner's to close)."""
        with self._lock:
            self._logs[fd] = log
        os.write(self._wake_w, b"x")

    def _run(self) -> None:
        while True:
            with self._lock:
                fds = list(self._logs)
            if self._stopping and not fds:
                return
            readable, _, _ = select.select([self._wake_r, *fds], [], [])
            for fd in readable:
                if fd == self._wake_r:
                    os.read(self._wake_r, CHUNK)
                    continue
                self._copy(fd)

    def _copy(self, fd: int) -> None:
        try:
            data = os.read(fd, CHUNK)
        except OSError:
            data = b""
        with self._lock:
            log = self._logs.get(fd)
        if log is None:
            return
        if data:
            log.write(data)
            return
        with self._lock:  # every writer closed it: the service and what it started ended
            del self._logs[fd]
        os.close(fd)  # the log stays open: the service's next process writes to it too

    def stop(self, timeout: float = 5.0) -> None:
        """Copy what is left (until the pipes' writers are gone, at most `timeout`), then end."""
        self._stopping = True
        os.write(self._wake_w, b"x")
        self._thread.join(timeout)
