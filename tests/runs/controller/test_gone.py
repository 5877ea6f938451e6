"""A workflow gone before its end was seen (deleted by its time to live), through the path
production takes: `reconcile_with` as a tick calls it, and a tick over the real local backend,
which knows no such workflow (C10)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pytest_django import Settings

from cluster.local.backend import LocalBackend
from runs.controller.reconcile import reconcile_with
from runs.controller.seen import Seen
from runs.controller.tick import tick
from runs.models import Run, Task
from runs.ports import BackendStatus, PodPhase, PodStatus, WorkflowPhase
from runs.store import task_paths
from tests import builders, factories

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("store")]

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
GRACE_S = 120.0
COORDINATOR_DONE = BackendStatus(
    WorkflowPhase.RUNNING, {"scan-w0": PodStatus("scan-w0", PodPhase.SUCCEEDED)}
)


@pytest.fixture(autouse=True)
def grace(settings: Settings) -> None:
    settings.SIMRUN_MERGE_MARKER_GRACE_S = GRACE_S


def merging_run() -> Run:
    """A running run of one split task whose coordinator merges."""
    run = factories.run(state="running")
    Task.objects.filter(run=run).delete()
    Task.objects.create(
        run=run,
        task_id="scan",
        position=0,
        type="sleep",
        splittable=True,
        state="running",
        plan=builders.plan(2, coordinator_merges=True).to_json(),
    )
    return fresh(run)


def fresh(run: Run) -> Run:
    """The run as a tick fetches it: its row now, its tasks prefetched."""
    return Run.objects.prefetch_related("tasks").get(pk=run.pk)


def write_marker(run: Run) -> None:
    out = task_paths(run.pk, "scan").out
    out.mkdir(parents=True, exist_ok=True)
    (out / ".simrun-merged").write_text("")


def awaiting_marker_when_gone() -> Run:
    """A run whose coordinator was seen done without its marker, then whose workflow went."""
    run = merging_run()
    reconcile_with(run, COORDINATOR_DONE, now=NOW)
    assert fresh(run).merge_pending == {"scan": NOW.isoformat()}
    return fresh(run)


def test_a_gone_workflow_keeps_the_run_open_while_a_task_awaits_its_marker() -> None:
    """C10: the workflow went within the grace of a task awaiting its merge marker: the task
    stays running and the run open, nothing failed."""
    run = awaiting_marker_when_gone()

    reconcile_with(run, None, now=NOW + timedelta(seconds=10))

    run = fresh(run)
    assert (run.state, run.tasks.get().state, run.message) == ("running", "running", "")


def test_a_gone_workflow_is_done_once_the_awaited_marker_appears() -> None:
    """C10: the marker the task awaited appears after its workflow went: the task is done and
    the run succeeded."""
    run = awaiting_marker_when_gone()
    reconcile_with(run, None, now=NOW + timedelta(seconds=10))
    write_marker(run)

    reconcile_with(fresh(run), None, now=NOW + timedelta(seconds=20))

    run = fresh(run)
    assert (run.state, run.tasks.get().state) == ("succeeded", "done"), run.message


def test_a_gone_workflow_fails_a_task_whose_marker_wait_is_over() -> None:
    """C10: C2: no marker by the end of the grace: the task fails, and the message says the
    marker never appeared."""
    run = awaiting_marker_when_gone()
    reconcile_with(run, None, now=NOW + timedelta(seconds=10))

    reconcile_with(fresh(run), None, now=NOW + timedelta(seconds=GRACE_S + 1))

    run = fresh(run)
    assert (run.state, run.tasks.get().state) == ("failed", "failed")
    assert "task 'scan': the coordinator ended but no merge marker appeared" in run.message


def test_a_tick_follows_a_gone_workflows_run_until_the_awaited_marker_appears(
    store: Path, settings: Settings
) -> None:
    """C10: through the tick, with a backend that knows no such workflow: the run stays open
    at every tick while the marker is awaited, and succeeds at the tick after it appears."""
    settings.SIMRUN_MERGE_MARKER_GRACE_S = 3600.0  # the real clock runs: never over here
    backend = LocalBackend(store, cores=2, memory_gb=2)
    run = merging_run()
    reconcile_with(run, COORDINATOR_DONE, now=datetime.now(UTC))
    seen = Seen()
    tick(backend, seen=seen)
    tick(backend, seen=seen)
    assert (fresh(run).state, fresh(run).tasks.get().state) == ("running", "running")
    write_marker(run)

    tick(backend, seen=seen)

    run = fresh(run)
    assert (run.state, run.tasks.get().state) == ("succeeded", "done"), run.message
