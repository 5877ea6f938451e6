"""The watcher process (`simrun watch`): a tick whenever the backend says something changed,
and at least every SIMRUN_POLL_S, until SIGTERM or SIGINT.

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
    while not stopping.is_set():
        wake.wait(settings.SIMRUN_POLL_S)
        wake.clear()
        if stopping.is_set():
            break
        try:
            close_old_connections()
            tick(the_backend)
            stamp("watcher")  # a pass ended: serve's sign that the watcher makes progress
        except Exception:  # the database restarting, say: try again at the next wake
            log.exception("reconcile failed; retrying")
            stopping.wait(RETRY_AFTER_S)
    the_backend.close()
