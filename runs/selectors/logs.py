"""The logs of a task's pods: kept in the store once the task is final, else the backend's.

Kept logs are `tasks/<task>/logs/<pod>-<attempt>.log` (C12); while a task runs its pods'
logs are read from the backend, which keeps them only while the pods exist (K11).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from runs.backends import backend
from runs.models import Run, RunState, Task, TaskState
from runs.ports import LOG_LIMIT_BYTES, read_log
from runs.store import task_paths


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
    folder = task_paths(task.run_id, task.task_id).logs
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".log"))
    except FileNotFoundError:
        return []
    entries = []
    for name in names:
        pod, _, attempt = name.removesuffix(".log").rpartition("-")
        number = int(attempt) if attempt.isdigit() else 0
        try:
            text, cut = read_log(folder / name, tail_lines, LOG_LIMIT_BYTES)
            entries.append(LogEntry(pod or name, number, text, True, None, cut, True))
        except OSError as exc:
            entries.append(LogEntry(pod or name, number, "", True, str(exc), False, True))
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
