"""A controller tick over many runs, with the real local backend and real rows.

A tick asks the backend once for every live run's status and derives only the runs whose
status changed since their record was derived (or whose derivation depends on the store or
the clock); a run that did not change is neither written nor queried.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pytest_django import Settings

from cluster.local.backend import LocalBackend
from runs.controller.seen import Seen
from runs.controller.tick import tick
from runs.models import Run, Task
from runs.ports import RunLaunch, TaskLaunch, WorkflowPhase
from runs.store import task_paths
from tests import factories
from tests.cluster.local.builders import command_task, fake_environment, shape, split_task
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db

HUGE = shape(cores=64)  # more than the backend has: its pod waits and its status stays
TICK_QUERIES = 3  # stale submissions, followed runs, the heartbeat: whatever their number


def launched(backend: LocalBackend, task: TaskLaunch, environment: str = "service") -> Run:
    """A run record whose one task is `task`, submitted to the backend as the worker does."""
    run = factories.run(state="queued")
    Task.objects.filter(run=run).delete()
    Task.objects.create(
        run=run,
        task_id=task.task_id,
        position=0,
        type=task.type,
        splittable=task.splittable,
        plan=task.plan.to_json(),
    )
    backend.submit(RunLaunch(run.pk, run.workflow_name, (task,), environment, grace_s=1))
    return run


def versions(*runs: Run) -> dict[str, int]:
    return dict(Run.objects.filter(pk__in=[r.pk for r in runs]).values_list("pk", "version"))


def test_a_run_whose_status_did_not_change_is_not_written_and_costs_no_query(
    store: Path, django_assert_num_queries: Any
) -> None:
    backend = LocalBackend(store, cores=2, memory_gb=2)
    runs = [launched(backend, command_task("hello", "pass", pod=HUGE)) for _ in range(3)]
    seen = Seen()
    tick(backend, seen=seen)  # the first tick of a process derives every run once
    first = versions(*runs)
    assert {Run.objects.get(pk=r.pk).pods["hello"]["phase"] for r in runs} == {"queued"}

    with django_assert_num_queries(TICK_QUERIES):
        tick(backend, seen=seen)

    assert versions(*runs) == first


def test_a_run_whose_status_changed_is_reconciled_in_the_same_tick(store: Path) -> None:
    backend = LocalBackend(store, cores=2, memory_gb=2)
    [node] = backend.nodes()
    backend.reserve(node.name, "elsewhere")  # nothing of these runs starts meanwhile
    quiet = launched(backend, command_task("hello", "pass", pod=HUGE))
    moving = launched(backend, command_task("hello", "pass"))
    seen = Seen()
    tick(backend, seen=seen)
    tick(backend, seen=seen)
    assert Run.objects.get(pk=moving.pk).state == "queued"
    before = versions(quiet)
    backend.unreserve(node.name, "elsewhere")
    wait_for(
        lambda: backend.status(moving.workflow_name).phase is WorkflowPhase.SUCCEEDED,
        what="the moving run's pod succeeded",
    )

    tick(backend, seen=seen)

    run = Run.objects.get(pk=moving.pk)
    assert run.state == "succeeded", run.message
    assert run.tasks.get().state == "done"
    assert versions(quiet) == before


def test_a_run_awaiting_its_merge_marker_is_derived_at_every_tick(
    store: Path, settings: Settings
) -> None:
    """C6: the coordinator ended without a marker (not visible yet): the status stays as it
    is, yet the marker appearing in the store makes the task done at the next tick."""
    settings.SIMRUN_MERGE_MARKER_GRACE_S = 300.0
    backend = LocalBackend(store, cores=2, memory_gb=2)
    env = fake_environment(store, "fake", {"simrun-worker": "pass\n"})
    run = launched(backend, split_task("scan", 1, coordinator_merges=True), environment=env)
    wait_for(
        lambda: backend.status(run.workflow_name).phase is WorkflowPhase.SUCCEEDED,
        what="the coordinator ended",
    )
    seen = Seen()
    tick(backend, seen=seen)
    tick(backend, seen=seen)
    waiting = Run.objects.get(pk=run.pk)
    assert (waiting.state, list(waiting.merge_pending)) == ("running", ["scan"])
    out = task_paths(run.pk, "scan").out
    out.mkdir(parents=True, exist_ok=True)
    (out / ".simrun-merged").write_text("")

    tick(backend, seen=seen)

    done = Run.objects.get(pk=run.pk)
    assert done.state == "succeeded", done.message
    assert done.tasks.get().state == "done"


def test_a_new_process_derives_every_run_once(store: Path) -> None:
    """C15: nothing noted (a restarted service): the runs are derived from their status."""
    backend = LocalBackend(store, cores=2, memory_gb=2)
    run = launched(backend, command_task("hello", "pass", pod=HUGE))
    tick(backend, seen=Seen())
    # as a service that died before its write: the row as before it, noting no status
    Run.objects.filter(pk=run.pk).update(pods={}, derived_from="")
    tick(backend, seen=Seen())
    assert Run.objects.get(pk=run.pk).pods["hello"]["phase"] == "queued"


def test_every_tick_records_the_heartbeat_of_its_source(store: Path) -> None:
    """`follow` and `simrun status` read when the controller last ticked."""
    from runs.selectors.heartbeat import controller_idle_s, last_reconcile

    backend = LocalBackend(store, cores=2, memory_gb=2)
    assert last_reconcile() is None and controller_idle_s() is None
    tick(backend, seen=Seen(), source="worker")
    first = last_reconcile(source="worker")
    assert first is not None and last_reconcile(source="watcher") is None
    tick(backend, seen=Seen(), source="watcher")
    tick(backend, seen=Seen(), source="worker")
    later = last_reconcile(source="worker")
    assert later is not None and later > first
    assert last_reconcile() == max(later, last_reconcile(source="watcher"))  # type: ignore[type-var]


def test_a_run_whose_reconcile_keeps_failing_backs_off_and_logs_once_a_step(
    store: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Retried after 1, 2, 4 … poll intervals (at most a minute), one line
    a step (the first with its traceback), and a line when it works again."""
    from runs.controller.backoff import MAX_S, Backoff

    backend = LocalBackend(store, cores=2, memory_gb=2)
    run = launched(backend, command_task("hello", "pass", pod=HUGE))
    Task.objects.filter(run=run).update(plan={"not": "a plan"})  # deriving it raises
    now = [0.0]
    backoff = Backoff(clock=lambda: now[0])
    waits = []
    for _ in range(9):
        caplog.clear()
        for _ in range(3):  # ticks before the wait is over try nothing and say nothing
            tick(backend, seen=Seen(), backoff=backoff)
        failed = [r for r in caplog.records if f"reconciling run {run.pk} failed" in r.message]
        assert len(failed) == 1, [r.message for r in caplog.records]
        waits.append(backoff.steps[run.pk].retry_at - now[0])
        now[0] = backoff.steps[run.pk].retry_at
    assert waits[:4] == [2.0, 4.0, 8.0, 16.0] and waits[-1] == MAX_S
    assert caplog.records[0].exc_info is None  # only the first failure carried a traceback
    Task.objects.filter(run=run).update(plan=command_task("hello", "pass", pod=HUGE).plan.to_json())
    caplog.clear()
    tick(backend, seen=Seen(), backoff=backoff)
    assert any(
        f"run {run.pk} reconciles again after 9 failures" in r.message for r in caplog.records
    )
    assert run.pk not in backoff.steps


def test_an_ended_run_whose_settling_keeps_failing_backs_off_too(
    store: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Stopping the workflow of an ended run fails for real (its run
    directory is read-only): one line a step, the step stays pending, and it is done once
    the directory can be written again."""
    import subprocess

    from runs.controller.backoff import Backoff

    backend = LocalBackend(store, cores=2, memory_gb=2)
    run = launched(backend, command_task("hello", "pass", pod=HUGE))
    Run.objects.filter(pk=run.pk).update(state="failed", pending_cancel=True)
    Task.objects.filter(run=run).update(state="failed", observed=True, logs_kept=True)
    folder = store / "runs" / run.pk
    now = [0.0]
    backoff = Backoff(clock=lambda: now[0])
    subprocess.run(["mount", "--bind", str(folder), str(folder)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(folder)], check=True)
        for _ in range(3):
            tick(backend, seen=Seen(), backoff=backoff)
    finally:
        subprocess.run(["umount", str(folder)], check=True)
    failed = [r.message for r in caplog.records if f"reconciling run {run.pk} failed" in r.message]
    assert len(failed) == 1 and "stopping the workflow: " in failed[0], failed
    assert Run.objects.get(pk=run.pk).pending_cancel
    now[0] = backoff.steps[run.pk].retry_at
    tick(backend, seen=Seen(), backoff=backoff)
    assert not Run.objects.get(pk=run.pk).pending_cancel
    assert run.pk not in backoff.steps
