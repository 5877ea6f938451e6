"""After the end: keep logs, stop the workflow, release the node (C12, C13, C19).

The terminal record is written first; each step that fails stays pending in the row and is
retried by later ticks, which do nothing else for an ended run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from runs.models import Run, Task
from runs.ports import Backend
from runs.selectors import progress_lines
from runs.states import RunState
from runs.store import task_paths
from simrun_harness import store_reads


def keep_task_logs(run: Run, task: Task, backend: Backend) -> bool:
    """Write the logs of a task's pods into the store; False when a pod has not ended."""
    try:
        logs = backend.logs(run.workflow_name, task.task_id)
    except KeyError:
        return True  # the workflow is gone: there is nothing left to keep
    if any(not entry.ended and entry.error is None for entry in logs):
        return False
    paths = task_paths(run.id, task.task_id)
    for entry in logs:
        text = entry.text if entry.error is None else f"[log not available: {entry.error}]\n"
        # the task's code may have put a link where a log goes: replaced, never written through
        try:
            store_reads.write_file(
                paths.store_root,
                paths.logs / f"{entry.pod}-{entry.attempt}.log",
                text.encode(),
                make_dirs=3,  # tasks/<task>/logs
            )
        except store_reads.NotInStore:
            return True  # the run's directory is gone (or a link): nowhere to keep them
    if task.splittable:
        # its progress lines no longer grow: what they say is read once here and saved, so
        # the first view of a large task in a web process does not read them all
        with contextlib.suppress(OSError, store_reads.NotInStore):
            progress_lines.save_for_views(task)
    return True


def settle(run_id: str, backend: Backend) -> list[str]:
    """Retry what an ended run still has pending, in order: logs, then stop, then release.

    Returns the steps that failed, each with its error, for the caller to log (the
    controller's tick backs off and logs once a step: `backoff.py`); they stay pending."""
    run = Run.objects.filter(pk=run_id).first()
    if run is None or not run.ended:
        return []  # C19: a deleted run is ignored
    failed: list[str] = []
    if run.pending_logs:
        try:
            kept = all(
                keep_task_logs(run, task, backend) for task in run.tasks.filter(logs_kept=False)
            )
        except Exception as exc:
            failed.append(f"keeping the logs: {type(exc).__name__}: {exc}")
            kept = False
        if kept:
            Task.objects.filter(run=run).update(logs_kept=True)
            Run.objects.filter(pk=run.pk, pending_logs=True).update(pending_logs=False)
    if run.pending_cancel and _attempt(
        "stopping the workflow", lambda: _stop(run, backend), failed
    ):
        Run.objects.filter(pk=run.pk, pending_cancel=True).update(pending_cancel=False)
    if run.pending_release and _attempt(
        "releasing the node", lambda: _release(run, backend), failed
    ):
        Run.objects.filter(pk=run.pk, pending_release=True).update(pending_release=False)
    return failed


def _stop(run: Run, backend: Backend) -> None:
    """Cancel (every pod stopped) the workflow of a cancelled run or of one whose submission
    failed (C21); stop (no new pod, running base pods finish) that of a run that ended."""
    if run.state == RunState.CANCELLED or run.submitted_at is None:
        backend.cancel(run.workflow_name)
    else:
        backend.stop(run.workflow_name)


def _release(run: Run, backend: Backend) -> None:
    if run.reserve:
        backend.unreserve(run.reserve, run.pk)


def _attempt(what: str, step: Callable[[], object], failed: list[str]) -> bool:
    """Run one settling step; True when it is done (C19: an unknown workflow or node counts
    as done), False when it failed (noted in `failed`) and stays pending for a later tick."""
    try:
        step()
    except KeyError:
        return True
    except Exception as exc:
        failed.append(f"{what}: {type(exc).__name__}: {exc}")
        return False
    return True
