"""The tasks of a run with their progress: row fields, ledger counts, first and last lines (S6)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from runs.models import Run
from runs.selectors.progress import task_progress
from simrun_harness.ledger_reads import LedgerCounts


@dataclass(frozen=True)
class TaskView:
    """A task as shown: its row, its ledger counts (None without a ledger) and the first and
    last lines of its progress file (the first unit done tells when it began delivering)."""

    task_id: str
    type: str
    state: str
    splittable: bool
    dependencies: list[str]
    units_total: int | None
    counts: LedgerCounts | None
    first: dict[str, Any] | None
    last: dict[str, Any] | None
    fraction: float
    message: str
    started_at: datetime | None
    ended_at: datetime | None
    reuse: dict[str, Any]
    """Why it reused what it did (`Task.reuse_note`): reused, units, text, compared_with,
    differs; {} before its submission keyed it."""


def run_tasks(run: Run) -> list[TaskView]:
    """Every task of a run in topological order (reads its ledgers and progress files)."""
    views = []
    for task in run.tasks.all():
        progress = task_progress(task)
        views.append(
            TaskView(
                task_id=task.task_id,
                type=task.type,
                state=task.state,
                splittable=task.splittable,
                dependencies=list(task.dependencies),
                units_total=task.units_total,
                counts=progress.counts,
                first=progress.first,
                last=progress.last,
                fraction=progress.fraction,
                message=task.message,
                started_at=task.started_at,
                ended_at=task.ended_at,
                reuse=dict(task.reuse_note or {}),
            )
        )
    return views
