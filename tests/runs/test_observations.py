"""Observations: every report recorded exactly once, kills without a report at the limit (C11)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from runs.models import ResourceObservation, Run, Task
from runs.observations import history, model_of, record_kill, record_report, record_task
from runs.plans import PodShape
from simrun_harness.layout import TaskPaths
from simrun_harness.report import ReportRole, UnitSeconds, WorkerReport, write_report
from tests import factories
from tests.builders import SCAN_SHAPE, plan

pytestmark = pytest.mark.django_db

SHAPE = SCAN_SHAPE
EXTRA = PodShape(cores=8, memory_gb=16.5, processes=8, per_worker_gb=2.0, memory_base_gb=0.5)
MERGE = PodShape(cores=1, memory_gb=3.0, per_worker_gb=2.5, memory_base_gb=0.5)
PLAN = plan(2, SHAPE, extra_shapes=(EXTRA,), merge_shape=MERGE)


@pytest.fixture
def run() -> Run:
    return factories.run(sources=["model-digest", "data-digest"])


@pytest.fixture
def task(run: Run) -> Task:
    return Task.objects.create(
        run=run, task_id="scan", position=1, type="scan", splittable=True, plan=PLAN.to_json()
    )


@pytest.fixture
def paths(tmp_path: Path) -> TaskPaths:
    """A task's directory in a run store (as submission makes it)."""
    found = TaskPaths(tmp_path / "store" / "runs" / "r" / "tasks" / "scan")
    found.root.mkdir(parents=True)
    return found


def report(
    paths: TaskPaths,
    worker: str = "scan-w0",
    attempt: int = 0,
    *,
    role: ReportRole = "base",
    peak: float = 1.5,
    kills: int = 0,
) -> str:
    now = datetime.now(UTC)
    write_report(
        paths.report(worker, attempt),
        WorkerReport(
            task="scan",
            worker=worker,
            role=role,
            attempt=attempt,
            node="n1",
            processes=4,
            units_done=12,
            unit_seconds=UnitSeconds(count=12, median=2.5, max=4.0),
            peak_memory_per_process_gb=peak,
            peak_memory_gb=0.5 + 4 * peak,
            memory_limit_gb=8.5,
            memory_per_worker_gb=2.0,
            oom_kills=kills,
            exit_code=137 if kills else 0,
            started_at=now,
            ended_at=now,
        ),
    )
    return paths.report(worker, attempt).name


def test_a_report_recorded_twice_is_recorded_once(task: Task, paths: TaskPaths) -> None:
    """C11: each report becomes an observation exactly once, a marker beside it."""
    name = report(paths)
    assert record_report(task=task, paths=paths, name=name, model_digest="m")
    assert not record_report(task=task, paths=paths, name=name, model_digest="m")
    assert ResourceObservation.objects.count() == 1
    assert (paths.recorded / name).is_file()
    row = ResourceObservation.objects.get()
    assert (row.task_type, row.model_digest, row.worker, row.attempt) == ("scan", "m", "scan-w0", 0)
    assert (row.peak_memory_per_process_gb, row.units_done, row.unit_seconds_median) == (
        1.5,
        12,
        2.5,
    )
    assert (row.node, row.from_report, row.oom_killed) == ("n1", True, False)


def test_a_row_recorded_before_a_crash_is_not_recorded_again(task: Task, paths: TaskPaths) -> None:
    """C11: the row exists but its marker was never written: the next pass adds no row."""
    name = report(paths)
    record_report(task=task, paths=paths, name=name, model_digest="m")
    (paths.recorded / name).unlink()
    assert not record_report(task=task, paths=paths, name=name, model_digest="m")
    assert ResourceObservation.objects.count() == 1
    assert (paths.recorded / name).is_file()


def test_recording_a_final_task_twice_records_each_report_once(
    task: Task, paths: TaskPaths
) -> None:
    """C11: a task's reports, recorded by two passes of the controller."""
    report(paths, "scan-w0")
    report(paths, "scan-w1")
    report(paths, "scan-w1", 1)
    assert record_task(task=task, paths=paths) == 3
    assert record_task(task=task, paths=paths) == 0
    assert ResourceObservation.objects.filter(model_digest="model-digest").count() == 3


def test_a_kill_for_memory_without_a_report_is_an_observation_at_the_limit(
    task: Task, paths: TaskPaths
) -> None:
    """C11: a kill for memory without a report counts as an observation at the pod's limit."""
    assert record_task(task=task, paths=paths, kills={"scan-w0": [0, 1]}) == 2
    first = ResourceObservation.objects.get(worker="scan-w0", attempt=0)
    assert (first.peak_memory_gb, first.memory_limit_gb, first.memory_per_worker_gb) == (
        8.5,
        8.5,
        2,
    )
    assert first.oom_killed and not first.from_report
    retried = ResourceObservation.objects.get(worker="scan-w0", attempt=1)
    assert (retried.peak_memory_gb, retried.memory_per_worker_gb) == (12.5, 3.0)
    assert (paths.recorded / "scan-w0-0.json").is_file()
    assert record_task(task=task, paths=paths, kills={"scan-w0": [0, 1]}) == 0


def test_kills_of_other_tasks_pods_are_not_this_tasks_observations(
    task: Task, paths: TaskPaths
) -> None:
    kills = {"fit": [0], "scan-w1-w0": [0], "scan-w2": [0], "scan-merge-w0": [0]}
    assert record_task(task=task, paths=paths, kills=kills) == 1
    assert list(ResourceObservation.objects.values_list("worker", flat=True)) == ["scan-w2"]


def test_each_pods_kill_without_a_report_is_observed_at_its_own_shapes_limit(
    task: Task, paths: TaskPaths
) -> None:
    """C11 with a shape per pod: the coordinator, an extra and the merge each at theirs."""
    kills = {"scan-w0": [0], "scan-w1": [0], "scan-merge": [0]}
    assert record_task(task=task, paths=paths, kills=kills) == 3
    limits = dict(ResourceObservation.objects.values_list("worker", "memory_limit_gb"))
    assert limits == {"scan-w0": 8.5, "scan-w1": 16.5, "scan-merge": 3.0}
    roles = dict(ResourceObservation.objects.values_list("worker", "role"))
    assert roles == {"scan-w0": "worker", "scan-w1": "worker", "scan-merge": "merge"}


def test_a_kill_with_a_report_is_recorded_from_the_report(task: Task, paths: TaskPaths) -> None:
    report(paths, "scan-w0", 0, peak=2.2, kills=1)
    assert record_task(task=task, paths=paths, kills={"scan-w0": [0]}) == 1
    row = ResourceObservation.objects.get()
    assert (row.from_report, row.oom_killed, row.peak_memory_per_process_gb) == (True, True, 2.2)


def test_a_merge_report_teaches_the_merges_history_and_never_the_workers(
    task: Task, paths: TaskPaths
) -> None:
    """The merge pod's memory is learned like a worker's, from merges only."""
    name = report(paths, "scan-merge", role="merge", peak=2.0)
    report(paths, "scan-w0")
    assert record_task(task=task, paths=paths, model_digest="m") == 2
    assert (paths.recorded / name).is_file()
    merges = history(task_type="scan", model_digest="m", role="merge")
    assert [(m.worker, m.peak_memory_gb) for m in merges] == [("scan-merge", 8.5)]
    workers = history(task_type="scan", model_digest="m")
    assert [w.worker for w in workers] == ["scan-w0"]
    assert not record_kill(
        task=task, paths=paths, worker="scan-merge", attempt=0, retried=False, model_digest="m"
    )  # it has a report


def test_an_unreadable_report_is_left_for_a_later_pass(task: Task, paths: TaskPaths) -> None:
    paths.reports.mkdir(parents=True)
    (paths.reports / "scan-w0-0.json").write_text("{not json")
    assert record_task(task=task, paths=paths) == 0
    assert not (paths.recorded / "scan-w0-0.json").exists()


def test_history_is_the_newest_observations_of_a_type_and_model(
    task: Task, paths: TaskPaths
) -> None:
    for attempt in range(3):
        report(paths, "scan-w0", attempt, peak=1.0 + attempt)
    record_task(task=task, paths=paths, model_digest="m1")
    other = Task.objects.create(run=task.run, task_id="fit", position=2, type="fit")
    other_paths = TaskPaths(paths.root.parent / "fit")
    report(other_paths, "fit-w0")
    record_task(task=other, paths=other_paths, model_digest="m1")
    found = history(task_type="scan", model_digest="m1")
    assert [v.attempt for v in found] == [2, 1, 0]
    assert all(v.run_id == task.run_id for v in found)
    assert history(task_type="scan", model_digest="m2") == []
    assert len(history(task_type="scan")) == 3
    assert [v.attempt for v in history(task_type="scan", limit=1)] == [2]


def test_a_runs_model_is_its_first_source(run: Run) -> None:
    assert model_of(run) == "model-digest"
    assert model_of(factories.run(sources=[])) == ""
