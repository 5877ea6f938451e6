"""One pass of the controller over every followed run; driven by beat and by the watcher."""

from __future__ import annotations

import logging

from cluster.backend import Backend
from runs.controller.reconcile import followed_runs, reconcile_run
from runs.controller.rules import FINAL
from runs.controller.settle import keep_task_logs, settle
from runs.models import Run, Task
from runs.services.submission import stale_submissions
from runs.store import task_paths

log = logging.getLogger(__name__)


def tick(backend: Backend) -> int:
    """Reconcile every live run, settle ended ones, resume dead submissions; runs looked at."""
    for run_id in stale_submissions():
        from runs.tasks import submit_run

        submit_run.delay(run_id)
    runs = followed_runs()
    for run in runs:
        try:
            if run.state == "submitting":
                continue
            if not run.ended:
                reconcile_run(run, backend)
            after_reconcile(run.pk, backend)
        except Exception:  # C15: one bad record must not stop the others
            log.exception("reconciling run %s failed; skipped this tick", run.pk)
    return len(runs)


def after_reconcile(run_id: str, backend: Backend) -> None:
    """Observations and logs of final tasks (C11, C12), then the ended run's pending steps."""
    from runs.observations import record_task

    run = Run.objects.filter(pk=run_id).first()
    if run is None:
        return
    for task in run.tasks.filter(state__in=FINAL):
        if not task.observed:
            kills = {pod: attempts for pod, attempts in run.oom_kills.items()}
            record_task(task=task, paths=task_paths(run.pk, task.task_id), kills=kills)
            Task.objects.filter(pk=task.pk).update(observed=True)
        if not task.logs_kept and keep_task_logs(run, task, backend):
            Task.objects.filter(pk=task.pk).update(logs_kept=True)
    if run.ended:
        settle(run.pk, backend)
