"""What every pod does around its job: its task loaded (a configuration error reported before
it is raised), and for a pod of one job (a merge, an unsplit task's exec) the task's type
checked and the one process the job runs in."""

from __future__ import annotations

from simrun_harness.attempt import Attempt
from simrun_harness.config import ConfigError
from simrun_harness.exits import EXIT_CONFIGURATION
from simrun_harness.jobs import JobRunner
from simrun_harness.plugin import SplitTaskType, UnsplitTaskType
from simrun_harness.pool import ProcessPool
from simrun_harness.report import ReportError
from simrun_harness.store_access import probe
from simrun_harness.taskfile import LoadedTask, load_task


def load_or_report(attempt: Attempt) -> LoadedTask:
    """Load the task; a configuration error is reported (exit 4) before it is raised. Then
    check that the task directory can be written (`store_access.probe`): exit 5 if not."""
    probe(attempt.config.task_dir)
    try:
        task = load_task(attempt.config)
    except ConfigError as exc:
        attempt.error = ReportError(message=str(exc))
        attempt.finish(EXIT_CONFIGURATION)
        raise
    attempt.task_id = task.file.task
    return task


def load_of_kind(
    attempt: Attempt, kind: type[SplitTaskType] | type[UnsplitTaskType], refusal: str
) -> LoadedTask:
    """The task, loaded, whose type is of `kind`; else `refusal` is reported (exit 4) and
    raised as a configuration error."""
    task = load_or_report(attempt)
    if not isinstance(task.task_type, kind):
        attempt.error = ReportError(message=f"type {task.file.type!r} {refusal}")
        attempt.finish(EXIT_CONFIGURATION)
        raise ConfigError(attempt.error.message)
    return task


def one_process(attempt: Attempt, task: LoadedTask) -> tuple[ProcessPool, str]:
    """The one process the job runs in, started, and the token its outputs are written
    under (this attempt of this pod)."""
    token = f"{attempt.worker}@{attempt.config.attempt}"
    pool = ProcessPool(JobRunner(task.task_type, task.context, task.paths.units, token), 1)
    attempt.processes = 1
    pool.start()
    return pool, token
