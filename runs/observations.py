"""Resource observations in the database: recorded from reports once, and read back as history.

C11: once a task is final its reports become observations, each exactly once. A marker
`tasks/<task>/recorded/<worker>-<attempt>.json` is written after the row; the row itself is
unique per (run, task, worker, attempt), so a crash between the two, or two controllers at
once, still yields one row. A kill for memory without a report is an observation at the pod's
limit, under the same marker name. A merge pod's report (or its kill without one) is recorded
under the role `merge`: the merge's memory is learned from merges only, and a merge never
blurs the workers' history (`history` reads one role).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from runs.models import ResourceObservation, Run, Task
from runs.models.observation import MERGE, WORKER
from runs.plans import ObservationValue, TaskPlan, merge_pod
from runs.resources import observation_at_limit, observation_of_report
from simrun_harness import store_reads
from simrun_harness.layout import TaskPaths, report_name
from simrun_harness.report import report_names, task_report

log = logging.getLogger(__name__)

HISTORY_LIMIT = 200
"""How many of the newest observations the resolution and the estimate look at."""


def history(
    *, task_type: str, model_digest: str = "", role: str = WORKER, limit: int = HISTORY_LIMIT
) -> list[ObservationValue]:
    """The newest observations of a type's workers (its merges for `role="merge"`), of one
    model when `model_digest` is given."""
    rows = ResourceObservation.objects.filter(task_type=task_type, role=role)
    if model_digest:
        rows = rows.filter(model_digest=model_digest)
    return [_value(row) for row in rows.order_by("-created_at", "-id")[:limit]]


def model_of(run: Run) -> str:
    """The model a run's observations are kept under: its first source's digest, else ''."""
    sources = run.sources or []
    if not sources:
        return ""
    first = sources[0]
    return str(first.get("digest", "")) if isinstance(first, dict) else str(first)


def record_task(
    *,
    task: Task,
    paths: TaskPaths,
    kills: Mapping[str, Iterable[int]] | None = None,
    model_digest: str | None = None,
) -> int:
    """C11: record every report of a final task, and every kill for memory without one.

    Args:
        task: The task (its run, type and plan).
        paths: The task's directory in the run store.
        kills: Attempts killed for memory, by pod; pods of other tasks are left out.
        model_digest: The model the observations are kept under, the run's by default.

    Returns:
        How many observations were recorded now (0 when everything was recorded before).
    """
    model = model_of(task.run) if model_digest is None else model_digest
    recorded = 0
    for name in report_names(paths):
        recorded += record_report(task=task, paths=paths, name=name, model_digest=model)
    for worker, attempts in (kills or {}).items():
        if not _is_worker_of(task, worker):
            continue  # another task's pod (the run's kills are kept for all its tasks)
        killed = set(attempts)
        for attempt in sorted(killed):
            recorded += record_kill(
                task=task,
                paths=paths,
                worker=worker,
                attempt=attempt,
                retried=attempt - 1 in killed,
                model_digest=model,
            )
    return recorded


def _is_worker_of(task: Task, worker: str) -> bool:
    """Whether `worker` is a pod of `task`: `<task>`, or `<task>-w<i>` and `<task>-merge` if
    split."""
    if not task.splittable:
        return worker == task.task_id
    return re.fullmatch(rf"{re.escape(task.task_id)}-(w\d+|merge)", worker) is not None


def record_report(*, task: Task, paths: TaskPaths, name: str, model_digest: str) -> bool:
    """Record the report `reports/<name>` once; True when an observation was recorded now."""
    marker = paths.recorded / name
    if store_reads.kind(paths.store_root, marker) is not None:
        return False
    try:
        report = task_report(paths, name)
    except (OSError, ValueError) as exc:
        log.warning("report %s of %s cannot be read: %s", name, task, exc)
        return False
    value = observation_of_report(report, run_id=task.run_id)
    role = MERGE if report.role == "merge" else WORKER
    return _save(
        task=task, marker=marker, value=value, node=report.node, model=model_digest, role=role
    )


def record_kill(
    *,
    task: Task,
    paths: TaskPaths,
    worker: str,
    attempt: int,
    retried: bool,
    model_digest: str,
) -> bool:
    """C11: a kill for memory without a report, recorded once as an observation at the limit.

    `retried`: the attempt ran at the retry memory (the one before it was killed for memory).
    The limit is the pod's own shape's (the merge's for `<task>-merge`). Nothing is recorded
    when the attempt has a report (that is the better evidence) or for a task without a plan.
    """
    name = report_name(worker, attempt)
    marker = paths.recorded / name
    root = paths.store_root
    if store_reads.kind(root, marker) is not None:
        return False
    if store_reads.is_file(root, paths.reports / name):
        return False
    if not task.plan:
        return False
    shape = TaskPlan.from_json(task.plan).shape_of_pod(task_id=task.task_id, pod=worker)
    value = observation_at_limit(
        shape=shape, retried=retried, worker=worker, attempt=attempt, run_id=task.run_id
    )
    role = MERGE if worker == merge_pod(task.task_id) else WORKER
    return _save(task=task, marker=marker, value=value, node="", model=model_digest, role=role)


def _save(
    *, task: Task, marker: Path, value: ObservationValue, node: str, model: str, role: str
) -> bool:
    """The row (unique per run, task, worker and attempt), then the marker."""
    row, created = ResourceObservation.objects.get_or_create(
        run_id=task.run_id,
        task_id=task.task_id,
        worker=value.worker,
        attempt=value.attempt,
        defaults={
            "task_type": task.type,
            "role": role,
            "model_digest": model,
            "node": node,
            "processes": value.processes,
            "units_done": value.units_done,
            "unit_seconds_median": value.unit_seconds_median,
            "peak_memory_per_process_gb": value.peak_memory_per_process_gb,
            "peak_memory_gb": value.peak_memory_gb,
            "memory_limit_gb": value.memory_limit_gb,
            "memory_per_worker_gb": value.memory_per_worker_gb,
            "oom_killed": value.oom_killed,
            "from_report": value.from_report,
        },
    )
    _mark(marker, row.pk)
    return created


def _mark(marker: Path, observation: int | None) -> None:
    """Write the marker atomically (a temporary name, then a rename), never through a link
    the task's code put in `recorded/`. Without the run's directory there is nothing to mark:
    the row, unique per attempt, keeps the observation from being recorded twice."""
    try:
        store_reads.write_file(
            TaskPaths(marker.parent.parent).store_root,
            marker,
            (json.dumps({"observation": observation}) + "\n").encode(),
            make_dirs=3,  # tasks/<task>/recorded
        )
    except store_reads.NotInStore:
        log.warning("no marker %s: the run's directory is gone", marker)


def _value(row: ResourceObservation) -> ObservationValue:
    return ObservationValue(
        run_id=row.run_id,
        worker=row.worker,
        attempt=row.attempt,
        processes=row.processes,
        units_done=row.units_done,
        unit_seconds_median=row.unit_seconds_median,
        peak_memory_per_process_gb=row.peak_memory_per_process_gb,
        peak_memory_gb=row.peak_memory_gb,
        memory_limit_gb=row.memory_limit_gb,
        memory_per_worker_gb=row.memory_per_worker_gb,
        oom_killed=row.oom_killed,
        from_report=row.from_report,
    )
