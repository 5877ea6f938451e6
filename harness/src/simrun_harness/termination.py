"""SIGTERM and SIGINT as a flag plus a file descriptor the main loop can wait on.

A preemption sends SIGTERM; the harness must stop claiming, give its claims back, write its
report and exit 143 within the pod's grace period. The handler only records the request; the
wake-up pipe makes a blocked wait return at once so the main loop acts on it.
"""

from __future__ import annotations

import os
import signal
from types import FrameType


class StopSignal:
    """Installed once per process, in the main thread."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def fileno(self) -> int:
        """Readable once a signal arrived (wait on it with the pool's pipes)."""
        return self._read

    def drain(self) -> None:
        try:
            while os.read(self._read, 512):
                pass
        except BlockingIOError:
            pass
