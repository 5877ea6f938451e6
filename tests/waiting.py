"""Wait on a condition with a deadline: the only way tests synchronise with real processes."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

DEADLINE_S = 30.0
"""How long a test waits, by default, for what takes a moment when all is well (a process
started, a pod run, the next event of a stream): generous for a loaded two-core CI machine,
where a Python process can take seconds to start; it is spent only when something is wrong."""


class Timeout(AssertionError):
    pass


def wait_for(
    condition: Callable[[], T],
    *,
    timeout: float = DEADLINE_S,
    interval: float = 0.05,
    what: str = "",
) -> T:
    """Poll `condition` until it returns something truthy, and return that; fail at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise Timeout(f"timed out after {timeout:.0f}s waiting for {what or condition}")
        time.sleep(interval)
