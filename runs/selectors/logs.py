"""The logs of a task's pods: kept in the store once the task is final, else the backend's.

Kept logs are `tasks/<task>/logs/<pod>-<attempt>.log` (C12); while a task runs its pods'
logs are read from the backend, which keeps them only while the pods exist (K11).
"""

from __future__ import annotations

from dataclasses import dataclass

from runs.backends import backend
from runs.models import Run, Task
from runs.ports import LOG_LIMIT_BYTES, read_log
from runs.states import RunState, TaskState
from runs.store import task_paths
from simrun_harness import store_reads

MAX_KEPT_LOGS = 256
"""The most kept logs of one task shown (a task has a pod per server, a few attempts each)."""


@dataclass(frozen=True)
class LogEntry:
    """The log of one attempt of one pod, or why it cannot be read."""

    pod: str
    attempt: int
    text: str
    ended: bool
    error: str | None
    truncated: bool
    kept: bool
    """Read from the copy in the run store (the task is final), not from the backend."""


def _kept(task: Task, tail_lines: int | None) -> list[LogEntry]:
    """The logs kept in the store, each read without following a link (a link, a FIFO or a
    device in `logs/` is no log); at most MAX_KEPT_LOGS of them."""
    paths = task_paths(task.run_id, task.task_id)
    root = paths.store_root
    try:
        found = store_reads.entries(root, paths.logs, limit=MAX_KEPT_LOGS * 4)
    except FileNotFoundError:
        return []
    names = sorted(e.name for e in found if not e.is_dir and e.name.endswith(".log"))
    entries = []
    for name in names[:MAX_KEPT_LOGS]:
        pod, _, attempt = name.removesuffix(".log").rpartition("-")
        number = int(attempt) if attempt.isdigit() else 0
        try:
            handle = store_reads.open_file(root, paths.logs / name)
        except FileNotFoundError:
            continue  # replaced by something else since it was listed
        except OSError as exc:
            entries.append(LogEntry(pod or name, number, "", True, str(exc), False, True))
            continue
        text, cut = read_log(handle, tail_lines, LOG_LIMIT_BYTES)
        entries.append(LogEntry(pod or name, number, text, True, None, cut, True))
    return sorted(entries, key=lambda e: (e.pod, e.attempt))


def task_logs(run: Run, task: Task, tail_lines: int | None = None) -> list[LogEntry]:
    """Every attempt's log of a task's pods, oldest first (the last lines when `tail_lines`)."""
    kept = _kept(task, tail_lines)
    if kept or task.logs_kept or run.state == RunState.SUBMITTING:
        return kept
    try:
        live = backend().logs(run.workflow_name, task.task_id, tail_lines)
    except KeyError:
        return []
    return [LogEntry(e.pod, e.attempt, e.text, e.ended, e.error, e.truncated, False) for e in live]


def followed_logs(run_id: str, task_id: str) -> tuple[list[LogEntry], bool] | None:
    """A task's logs now and whether it is over (the run ended or the task is final), for a
    stream that follows them; None when the run or the task is gone."""
    run = Run.objects.filter(pk=run_id).first()
    task = Task.objects.filter(run_id=run_id, task_id=task_id).first()
    if run is None or task is None:
        return None
    return task_logs(run, task), run.ended or task.state in TaskState.final()
