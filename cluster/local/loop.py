"""The local backend's background loop: one thread that passes over the live runs and tells
the subscribers when something changed.

It passes at once when a supervisor rings the doorbell (a pod ended) or `submit`, `cancel` or
`stop` ring it from any process (`cluster.local.doorbell`), and otherwise every `poll_s`, or
less often when passes are long (many live runs): with nothing ringing, the loop spends at
most `1 / (1 + IDLE_FACTOR)` of a core on them (see `idle_wait`). Unasked passes that find
nothing new space out, doubling up to `CALM_S`: a run whose pods just compute (a scan of
thousands of units) is not read four times a second for minutes; a ring or a change brings
the interval back to `poll_s`. With no live run there is nothing an unasked pass could catch,
so the loop waits for a ring, or until what its owner says is due (`quiet`: a standby's idle
time running out), at most `QUIET_S`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable
from pathlib import Path

from cluster.local.doorbell import Doorbell, ring
from runs.ports import tell_subscribers

log = logging.getLogger(__name__)

Pass = Callable[[], tuple[bool, Hashable]]
"""One pass: whether it changed anything, and a signature of what it saw."""

IDLE_FACTOR = 4.0
QUIET_S = 60.0
CALM_S = 2.0
"""The longest the calming adds between unasked passes that keep finding nothing new while
runs are live: what rings nobody (a supervisor killed with its pod) is seen within this, or
within `poll_s` or `IDLE_FACTOR` times the last pass when either is longer."""


def idle_wait(
    *, poll_s: float, last_pass_s: float, quiet_s: float | None = None, calm: int = 0
) -> float:
    """How long the loop waits for a ring before it passes unasked: `poll_s`, doubled for
    each of the last `calm` passes that came unasked and found nothing new (up to `CALM_S`),
    or `IDLE_FACTOR` times the last pass when that is longer. The unasked passes only catch
    what rings nobody (a supervisor killed with its pod, the grace of a cancellation running
    out), so they need not cost a thousand live runs a whole core, nor one long scan four
    passes a second. With no live run (`quiet_s`: what the owner says is due, None while
    runs are live), until then, at most `QUIET_S`."""
    if quiet_s is not None:
        return max(0.0, min(QUIET_S, quiet_s))
    calmed = min(poll_s * 2.0 ** min(calm, 16), max(poll_s, CALM_S))
    return max(calmed, IDLE_FACTOR * last_pass_s)


class Loop:
    """The thread, started by the first subscriber and stopped by `close`."""

    def __init__(
        self,
        one_pass: Pass,
        *,
        bell: Path,
        poll_s: float,
        quiet: Callable[[], float | None] = lambda: None,
    ) -> None:
        """`quiet`: after a pass, None while runs are live, else the seconds until something
        is due that rings nobody (the loop then waits for a ring that long, at most
        `QUIET_S`)."""
        self._pass = one_pass
        self._quiet = quiet
        self._bell = bell
        self._poll_s = poll_s
        self._callbacks: list[Callable[[], None]] = []
        self._thread: threading.Thread | None = None
        self._closing = threading.Event()
        self.next_wait_s: float | None = None
        """How long the loop now waits for a ring before it passes unasked (None: not started)."""

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
        last_pass_s = 0.0
        calm = 0  # unasked passes in a row that found nothing new
        bell = Doorbell(self._bell)
        try:
            while not self._closing.is_set():
                quiet_s = self._quiet() if last_pass_s else None
                wait_s = idle_wait(
                    poll_s=self._poll_s, last_pass_s=last_pass_s, quiet_s=quiet_s, calm=calm
                )
                self.next_wait_s = wait_s
                rang = bell.wait(wait_s)
                if self._closing.is_set():
                    return
                started = time.monotonic()
                try:
                    changed, signature = self._pass()
                except Exception:
                    log.exception("local backend: the pass failed")
                    calm = 0
                    continue
                finally:
                    last_pass_s = time.monotonic() - started
                calm = 0 if rang or changed or signature != last else calm + 1
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
