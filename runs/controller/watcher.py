"""The watcher process (`simrun watch`): a tick whenever the backend says something changed,
and at least every SIMRUN_POLL_S while it follows runs (every SIMRUN_IDLE_POLL_S with none:
only a ring brings work then), until SIGTERM or SIGINT.

It holds no state of its own: every tick reads the followed runs from the database, so a
watcher killed and started again goes on where the last one stopped (C15).
"""

from __future__ import annotations

import logging
import signal
import threading

from django.conf import settings
from django.db import close_old_connections

from runs.backends import backend
from runs.controller.tick import tick
from runs.selectors.heartbeat import idle_pass_s
from simrun_site.liveness import stamp

log = logging.getLogger("simrun.watch")
RETRY_AFTER_S = 1.0


def watch() -> None:
    """Reconcile on every ring of the backend's `subscribe` callback until asked to stop."""
    the_backend = backend()
    wake = threading.Event()
    stopping = threading.Event()

    def stop(*_: object) -> None:
        stopping.set()
        wake.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    the_backend.subscribe(wake.set)
    log.info("watching runs (backend %s)", settings.SIMRUN_BACKEND)
    followed = 1
    while not stopping.is_set():
        wake.wait(watch_wait_s(followed))
        wake.clear()
        if stopping.is_set():
            break
        try:
            close_old_connections()
            followed = tick(the_backend)
            stamp("watcher")  # a pass ended: serve's sign that the watcher makes progress
        except Exception:  # the database restarting, say: try again at the next wake
            log.exception("reconcile failed; retrying")
            stopping.wait(RETRY_AFTER_S)
    the_backend.close()


def watch_wait_s(followed: int) -> float:
    """How long the watcher waits for the backend's ring before it ticks unasked: the poll
    interval while it follows runs; with none, only a ring (a submission, a pod's end) brings
    work, so the idle poll (which catches what rings nobody: a dead submission), well within
    the time after which serve takes a silent watcher for dead (SIMRUN_LIVENESS_S)."""
    if followed:
        return float(settings.SIMRUN_POLL_S)
    return idle_pass_s()
