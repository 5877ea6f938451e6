"""The simulator's clock: real time plus an offset a test can advance.

Everything that waits on the clock of a real cluster reads this one: the time to live of a
finished workflow, Argo's retry backoff, a Job's deadline, the grace between SIGTERM and
SIGKILL. Time passes by itself, so a cluster left alone behaves like a real one; a test that
does not want to wait calls `advance` and the controllers see the new time at their next tick.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime


class SimClock:
    """Wall-clock time shifted by an offset that only grows."""

    def __init__(self) -> None:
        self._offset = 0.0
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []

    def time(self) -> float:
        """Seconds since the epoch, as the simulated cluster sees them."""
        return time.time() + self._offset

    def now(self) -> datetime:
        """The current simulated time, timezone-aware (UTC)."""
        return datetime.fromtimestamp(self.time(), UTC)

    def stamp(self) -> str:
        """The current time as Kubernetes writes it (RFC 3339, whole seconds)."""
        return timestamp(self.time())

    def advance(self, seconds: float) -> None:
        """Jump forward; controllers waiting on a tick are woken at once."""
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        with self._lock:
            self._offset += seconds
            listeners = list(self._listeners)
        for listener in listeners:
            listener()

    def on_advance(self, listener: Callable[[], None]) -> None:
        """Call `listener` after every `advance` (the store uses it to wake its waiters)."""
        with self._lock:
            self._listeners.append(listener)


def timestamp(seconds: float) -> str:
    """Seconds since the epoch as an RFC 3339 UTC timestamp with whole seconds."""
    return datetime.fromtimestamp(int(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(text: str) -> float:
    """An RFC 3339 timestamp as seconds since the epoch."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
