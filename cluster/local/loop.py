"""The local backend's background loop: one thread that passes over the live runs and tells
the subscribers when something changed.

It passes every `poll_s` and at once when a supervisor rings the doorbell (a pod ended) or
`submit`, `cancel` or `stop` ring it from any process (`cluster.local.doorbell`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from pathlib import Path

from cluster.backend import tell_subscribers
from cluster.local.doorbell import Doorbell, ring

log = logging.getLogger(__name__)

Pass = Callable[[], tuple[bool, Hashable]]
"""One pass: whether it changed anything, and a signature of what it saw."""


class Loop:
    """The thread, started by the first subscriber and stopped by `close`."""

    def __init__(self, one_pass: Pass, *, bell: Path, poll_s: float) -> None:
        self._pass = one_pass
        self._bell = bell
        self._poll_s = poll_s
        self._callbacks: list[Callable[[], None]] = []
        self._thread: threading.Thread | None = None
        self._closing = threading.Event()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def subscribe(self, callback: Callable[[], None]) -> None:
        """Call `callback` from the loop's thread whenever a pass changed something."""
        self._callbacks.append(callback)
        if self._thread is None:
            self._closing.clear()
            self._thread = threading.Thread(target=self._run, name="simrun-local", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        last: Hashable = None
        bell = Doorbell(self._bell)
        try:
            while not self._closing.is_set():
                bell.wait(self._poll_s)
                if self._closing.is_set():
                    return
                try:
                    changed, signature = self._pass()
                except Exception:
                    log.exception("local backend: the pass failed")
                    continue
                if changed or signature != last:
                    last = signature
                    tell_subscribers(self._callbacks, what="the local backend")
        finally:
            bell.close()

    def close(self) -> None:
        """Stop the thread (the pods keep running)."""
        self._closing.set()
        ring(self._bell)
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, self._poll_s * 5))
            self._thread = None
