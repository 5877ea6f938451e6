"""The background work that services and the controller start: Celery tasks by name.

`runs.tasks` (a surface: Celery's entry points) calls the services; naming its tasks here,
rather than importing them, keeps the direction one way (no cycle services → tasks →
services). `runs.apps` imports `runs.tasks` when Django starts, so every process that
enqueues has them registered and Celery's eager mode runs them in place.
"""

from __future__ import annotations

from celery import current_app
from django.db import transaction

SUBMIT_RUN = "runs.tasks.submit_run"
SETTLE_RUN = "runs.tasks.settle_run"
DELETE_RUN = "runs.tasks.delete_run"
RECONCILE = "runs.tasks.reconcile"
TASKS = (SUBMIT_RUN, SETTLE_RUN, DELETE_RUN, RECONCILE)


def enqueue(task: str, *, run_id: str) -> None:
    """Send the Celery task `task` for a run now; KeyError for a task no module registered."""
    current_app.tasks[task].delay(run_id)


def enqueue_on_commit(task: str, *, run_id: str) -> None:
    """Send it once the current transaction commits (never for a rolled back one)."""
    transaction.on_commit(lambda: enqueue(task, run_id=run_id))
