"""A real Celery worker in a thread of the test process, on the test's broker and database.

It consumes the queue the services enqueue to (Redis under `deploy/local/dev.sh test`), so a
task goes through the broker as in production; being in this process, it uses whatever
backend the test hands `runs.tasks`, and the test can block that backend on an event.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from celery.contrib.testing.worker import TestWorkController, start_worker
from celery.signals import task_postrun
from django.db import connections

from simrun_site.celery import app
from tests.waiting import DEADLINE_S


class _StartedInTime(TestWorkController):
    """Celery's test worker, whose start is awaited with a deadline (Celery's waits for ever:
    a worker that never consumes would hang the suite instead of failing the test)."""

    __test__ = False

    def ensure_started(self) -> None:
        if not self._on_started.wait(DEADLINE_S):
            raise TimeoutError(f"the test's Celery worker was not consuming after {DEADLINE_S}s")


def _close_connections(**_: Any) -> None:
    """The worker thread's database connection, closed after each task: an open one would
    keep the test database from being dropped."""
    connections.close_all()


@contextmanager
def celery_worker() -> Iterator[None]:
    """A worker consuming the services' queue until the block ends (messages left there by
    earlier tests are purged first)."""
    app.control.purge()
    task_postrun.connect(_close_connections, weak=False)
    try:
        with start_worker(
            app,
            pool="solo",
            perform_ping_check=False,
            shutdown_timeout=30,
            WorkController=_StartedInTime,
        ):
            yield
    finally:
        task_postrun.disconnect(_close_connections)
