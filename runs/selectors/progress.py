"""Progress of tasks and runs, read from the rows and the ledgers in the store (S6, S7)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from runs.models import Run, Task
from runs.states import TaskState
from runs.store import task_paths
from simrun_harness import store_reads
from simrun_harness.layout import TaskPaths
from simrun_harness.ledger_reads import LedgerCounts, counts
from simrun_harness.progress import LINE_MAX_BYTES

UNFINISHED_TASK_MAX = 0.99
OVER = frozenset({TaskState.DONE, TaskState.SKIPPED})


@dataclass(frozen=True)
class TaskProgress:
    """S6: a task's ledger counts and the first and last lines of its progress file."""

    task_id: str
    state: str
    counts: LedgerCounts | None
    first: dict[str, Any] | None
    last: dict[str, Any] | None

    @property
    def fraction(self) -> float:
        if self.state in OVER:
            return 1.0
        if self.counts is None or not self.counts.total:
            return 0.0
        return min(self.counts.done / self.counts.total, UNFINISHED_TASK_MAX)


def _first_and_last_lines(paths: TaskPaths) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The first and last complete JSON lines, reading only the ends of the file."""
    try:
        with store_reads.open_file(paths.store_root, paths.progress) as f:
            first_raw = f.readline(LINE_MAX_BYTES)
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - 4096))
            tail = f.read(4096).split(b"\n")
    except FileNotFoundError:
        return None, None

    def parse(raw: bytes) -> dict[str, Any] | None:
        try:
            value = json.loads(raw)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    last = next((parse(line) for line in reversed(tail) if parse(line) is not None), None)
    return parse(first_raw), last


def task_progress(task: Task) -> TaskProgress:
    paths = task_paths(task.run_id, task.task_id)
    first, last = _first_and_last_lines(paths) if task.splittable else (None, None)
    return TaskProgress(
        task_id=task.task_id,
        state=task.state,
        counts=_split_counts(task, paths) if task.splittable else None,
        first=first,
        last=last,
    )


def _split_counts(task: Task, paths: TaskPaths) -> LedgerCounts | None:
    """The ledger's counts; before the coordinator made the ledger, the units planned at
    submission, all pending (a 25-unit task reads 0/25, never 0/1)."""
    found = counts(paths)
    if found is None and task.units_total and task.state not in OVER:
        total = task.units_total
        return LedgerCounts(pending=total, claimed=0, done=0, total=total)
    return found


def run_progress(progress: list[TaskProgress]) -> float:
    """S7: the mean over tasks; an ended task whole, one with a ledger its share (below 1)."""
    if not progress:
        return 0.0
    return sum(p.fraction for p in progress) / len(progress)


def progress_of(run: Run) -> float | None:
    """An active run's progress from 0 to 1; None once it has ended."""
    if run.ended:
        return None
    return run_progress([task_progress(t) for t in run.tasks.all()])
