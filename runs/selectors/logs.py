"""The logs of a task's pods: kept in the store once the task is final, else the backend's.

Kept logs are `tasks/<task>/logs/<pod>-<attempt>.log` (C12); while a task runs its pods'
logs are read from the backend, which keeps them only while the pods exist (K11).

An answer holds at most SIMRUN_LOG_ANSWER_MAX_BYTES of logs in all, whatever a run's code
wrote into `logs/`: each log gets a share of it and shows its last bytes within the share
(`runs.selectors.log_windows`), and says so (`cut`, `start`). Kept logs are read no further
than their shares; a backend's logs are read whole by the backend (each at most
LOG_LIMIT_BYTES, from its start) and then cut to their shares.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from django.conf import settings

from runs.backends import backend
from runs.models import Run, Task
from runs.ports import LOG_LIMIT_BYTES
from runs.selectors.log_windows import read_end, shares, text_end
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
    cut: str | None = None
    """Why `text` is not all of the log (or of its lines asked for): "log", the most one log
    shows (LOG_LIMIT_BYTES), or "answer", its share of SIMRUN_LOG_ANSWER_MAX_BYTES; None
    when it is whole."""
    start: int = 0
    """The bytes of the log before `text`."""


def answer_bytes() -> int:
    return int(settings.SIMRUN_LOG_ANSWER_MAX_BYTES)


def _cut(budget: int, size: int) -> str:
    return "answer" if budget < min(size, LOG_LIMIT_BYTES) else "log"


def _kept(task: Task, tail_lines: int | None, pod: str | None) -> tuple[list[LogEntry], bool]:
    """The logs kept in the store (of one pod when given), each read without following a
    link (a link, a FIFO or a device in `logs/` is no log); at most MAX_KEPT_LOGS of them,
    each from its end within its share of the answer. And whether the task has any."""
    paths = task_paths(task.run_id, task.task_id)
    root = paths.store_root
    try:
        found = store_reads.entries(root, paths.logs, limit=MAX_KEPT_LOGS * 4)
    except FileNotFoundError:
        return [], False
    logs = sorted((e for e in found if not e.is_dir and e.name.endswith(".log")), key=_name)
    any_kept = bool(logs)
    if pod is not None:
        logs = [e for e in logs if _pod_attempt(e.name)[0] == pod]
    logs = logs[:MAX_KEPT_LOGS]
    sizes = [min(e.size, LOG_LIMIT_BYTES) for e in logs]
    entries = []
    for log, budget in zip(logs, shares(sizes, answer_bytes()), strict=True):
        name, number = _pod_attempt(log.name)
        try:
            handle = store_reads.open_file(root, paths.logs / log.name)
        except FileNotFoundError:
            continue  # replaced by something else since it was listed
        except OSError as exc:
            entries.append(LogEntry(name, number, "", True, str(exc), False, True))
            continue
        window = read_end(handle, budget, tail_lines)
        text = window.data.decode("utf-8", errors="replace")
        cut = _cut(budget, log.size) if window.short else None
        entries.append(
            LogEntry(name, number, text, True, None, cut is not None, True, cut, window.start)
        )
    return sorted(entries, key=lambda e: (e.pod, e.attempt)), any_kept


def _name(entry: store_reads.Entry) -> str:
    return entry.name


def _pod_attempt(name: str) -> tuple[str, int]:
    pod, _, attempt = name.removesuffix(".log").rpartition("-")
    return pod or name, int(attempt) if attempt.isdigit() else 0


def _within_answer(entries: list[LogEntry]) -> list[LogEntry]:
    """A backend's logs, each cut to its share of the answer from its end."""
    sizes = [len(e.text.encode()) for e in entries]
    cut = []
    for entry, size, budget in zip(entries, sizes, shares(sizes, answer_bytes()), strict=True):
        if budget >= size:
            cut.append(entry)
            continue
        text, left_out = text_end(entry.text, budget)
        cut.append(replace(entry, text=text, truncated=True, cut="answer", start=left_out))
    return cut


def task_logs(
    run: Run, task: Task, tail_lines: int | None = None, *, pod: str | None = None
) -> list[LogEntry]:
    """Every attempt's log of a task's pods (of one pod when given), oldest first (the last
    lines when `tail_lines`), within SIMRUN_LOG_ANSWER_MAX_BYTES in all."""
    kept, any_kept = _kept(task, tail_lines, pod)
    if any_kept or task.logs_kept or run.state == RunState.SUBMITTING:
        return kept
    try:
        live = backend().logs(run.workflow_name, task.task_id, tail_lines)
    except KeyError:
        return []
    return _within_answer(
        [
            LogEntry(
                e.pod,
                e.attempt,
                e.text,
                e.ended,
                e.error,
                e.truncated,
                False,
                "log" if e.truncated else None,
            )
            for e in live
            if pod is None or e.pod == pod
        ]
    )


def followed_logs(run_id: str, task_id: str) -> tuple[list[LogEntry], bool] | None:
    """A task's logs now and whether it is over (the run ended or the task is final), for a
    stream that follows them; None when the run or the task is gone."""
    run = Run.objects.filter(pk=run_id).first()
    task = Task.objects.filter(run_id=run_id, task_id=task_id).first()
    if run is None or task is None:
        return None
    return task_logs(run, task), run.ended or task.state in TaskState.final()
