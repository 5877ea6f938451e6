"""The run page's figures: units done over time with the projected end, memory per task.

Memory per task moves as the run goes: a worker's report (at the end of each attempt) gives
its pod's peak, and every unit done its process's peak (the progress line).

The projected end of a split task: the units not yet done, in rounds over its processes, at
the unit time learned from earlier runs (`runs.selectors.unit_times`), else at the median
unit time of this run so far; counted from the last unit done, so it moves only when units
are done (and the live page only changes when something happened).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.utils.safestring import SafeString

from runs.pages import plots
from runs.plans import TaskPlan
from runs.reuse_plans import count_reused
from runs.selectors.progress_lines import unit_lines
from runs.selectors.unit_times import learned_unit_seconds
from runs.selectors.workers import WorkerView, task_workers
from runs.states import TaskState

if TYPE_CHECKING:
    from runs.models import Run, Task


@dataclass(frozen=True)
class UnitsDone:
    """A task's units done: when each was first done (POSIX seconds, in time order), and the
    median of the seconds each took (None when none said)."""

    stamps: Sequence[float]
    median_s: float | None

    @property
    def points(self) -> list[tuple[float, float]]:
        """(seconds since the first, how many so far), at most `plots.MAX_POINTS` of them."""
        return plots.cumulative_sorted(self.stamps)


def units_done(run: Run, task: Task) -> UnitsDone:
    """From the task's progress file; a unit done twice counts once, at its first time."""
    lines = unit_lines(task)
    return UnitsDone(stamps=lines.done_stamps(), median_s=lines.median_seconds())


def projected_end(
    points: Sequence[tuple[float, float]],
    *,
    total: int | None,
    unit_s: float | None,
    processes: int,
) -> float | None:
    """Seconds (on the points' axis) when the last unit is expected done; None when unknown
    (no total, no unit time) or when every unit is done."""
    done = int(points[-1][1]) if points else 0
    if total is None or unit_s is None or done >= total:
        return None
    last = points[-1][0] if points else 0.0
    return last + unit_s * math.ceil((total - done) / max(1, processes))


def _processes(task: Task, workers: list[WorkerView]) -> int:
    if task.plan:
        return TaskPlan.from_json(task.plan).processes
    return sum(w.processes or 1 for w in workers) or 1


def units_plot(run: Run, task: Task, workers: list[WorkerView]) -> SafeString:
    """The selected split task's units over time (those reused from earlier runs first), with
    its projected end while it runs: none once the task or the run has ended."""
    done = units_done(run, task)
    done_points = done.points
    reused = sum(count_reused(units) for units in (task.reused or {}).values())
    points = [(t, n + reused) for t, n in done_points]
    learned = learned_unit_seconds(run, task)
    basis = "unit time learned from earlier runs"
    if learned is None and done.median_s is not None:
        learned, basis = done.median_s, "unit time of this run so far"
    end = None
    if not run.ended and task.state not in TaskState.final():
        end = projected_end(
            points or [(0.0, float(reused))],
            total=task.units_total,
            unit_s=learned,
            processes=_processes(task, workers),
        )
    projection = None if end is None else plots.Projection(end_s=end, basis=basis)
    return plots.units_over_time(
        done_points,
        total=task.units_total,
        label=task.task_id,
        projection=projection,
        reused=reused,
    )


def task_memory(
    task_id: str, workers: Sequence[WorkerView], plan_limit_gb: float | None
) -> plots.MemoryBar:
    """A task's bar: its worker with the highest reported peak, against that worker's limit
    (the plan's pod memory until a worker reports); killed when any worker was."""
    reported = [w for w in workers if w.peak_memory_gb is not None]
    top = max(reported, key=lambda w: w.peak_memory_gb or 0.0, default=None)
    limit = top.memory_limit_gb if top and top.memory_limit_gb is not None else plan_limit_gb
    return plots.MemoryBar(
        task_id,
        top.peak_memory_gb if top else None,
        limit,
        oom_killed=any(w.oom_killed for w in workers),
    )


def unit_memory(
    task_id: str, peak_gb: float | None, per_worker_gb: float | None
) -> plots.MemoryBar:
    """A split task's second bar, live from its progress lines: the highest peak of a unit's
    process so far against the memory each worker process is given."""
    return plots.MemoryBar(f"{task_id} · per unit", peak_gb, per_worker_gb)


def memory_plot(run: Run, tasks: Sequence[Task]) -> SafeString:
    """Every task's peak memory against its limit (from its workers' reports), and for a split
    task its units' peak so far against the memory per process (from its progress lines)."""
    bars = []
    for task in tasks:
        shape = TaskPlan.from_json(task.plan).shape if task.plan else None
        limit = shape.memory_gb if shape else None
        bars.append(task_memory(task.task_id, task_workers(run, task), limit))
        if task.splittable:
            per_worker = shape.per_worker_gb if shape else None
            bars.append(unit_memory(task.task_id, unit_lines(task).peak_gb, per_worker))
    return plots.memory_per_task(bars)
