"""Celery tasks: a few lines each, taking ids and calling the domain.

Each is safe to run twice or be killed half way: the submission holds a lease in the row,
the controller writes only unchanged records.
"""

from __future__ import annotations

import logging

from celery import shared_task

from runs.backends import backend

log = logging.getLogger(__name__)


@shared_task(acks_late=True, ignore_result=True)
def submit_run(run_id: str) -> None:
    """Build or find the environment and create the run's workflow (resumable)."""
    from runs.services.submission import submit_run as submit

    submit(run_id=run_id, backend=backend())


@shared_task(ignore_result=True, expires=30)
def reconcile() -> int:
    """One controller pass over the followed runs."""
    from runs.controller.tick import tick

    return tick(backend(), source="worker")


@shared_task(acks_late=True, ignore_result=True)
def settle_run(run_id: str) -> None:
    """Retry an ended run's pending logs, stop and release."""
    from runs.services.settle import settle

    for failure in settle(run_id, backend()):
        log.warning("settling run %s: %s failed; retried by the controller", run_id, failure)


@shared_task(acks_late=True, ignore_result=True)
def delete_run(run_id: str) -> None:
    """Settle what a deleting run still has pending, then remove its record and files."""
    from runs.services.runs import finish_deletion
    from runs.services.settle import settle

    for failure in settle(run_id, backend()):
        log.warning("deleting run %s: %s failed; retried by the controller", run_id, failure)
    if finish_deletion(run_id=run_id) is None:
        log.info("run %s is deleted once its workflow and node are released", run_id)
