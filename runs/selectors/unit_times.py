"""How long a unit of a task takes, as learned from earlier runs (for the run page's projection)."""

from __future__ import annotations

from runs.estimates import unit_seconds
from runs.models import Run, Task
from runs.observations import history, model_of


def learned_unit_seconds(run: Run, task: Task) -> float | None:
    """The median unit time of the task's type (and model) over earlier runs; None without."""
    return unit_seconds(history(task_type=task.type, model_digest=model_of(run)))
