"""Reconcile against real rows and a real store (no processes needed)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone
from pytest_django import Settings

from cluster.local.backend import LocalBackend
from runs.controller.reconcile import observe, reconcile_run, reconcile_with
from runs.models import Run, Task
from runs.plans import PodShape, TaskPlan
from runs.ports import AttemptFailure, BackendStatus, PodPhase, PodStatus, WorkflowPhase
from runs.services.runs import cancel_run
from runs.services.settle import settle
from runs.store import has_merge_marker, task_paths
from tests import builders, factories
from tests.cluster.local.builders import command_task
from tests.nfs import NegativeLookupCache
from tests.runs.controller.test_tick import launched
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db

PLAN = builders.plan(1, coordinator_merges=True)


def split_run() -> tuple[Run, Task]:
    run = factories.run(state="running")
    task = Task.objects.create(
        run=run, task_id="scan", position=1, type="sleep", splittable=True, plan=PLAN.to_json()
    )
    Task.objects.filter(run=run, task_id="hello").delete()
    return run, task


def test_an_ended_workflow_waits_for_a_coordinators_merge_marker(store: Path) -> None:
    """C6: a run whose workflow ended is not failed while a task waits for its merge marker."""
    run, task = split_run()
    status = BackendStatus(
        phase=WorkflowPhase.SUCCEEDED, pods={"scan-w0": PodStatus("scan-w0", PodPhase.SUCCEEDED)}
    )
    observed = observe(run, [task], status, timezone.now())
    assert observed.outcome is None
    assert observed.tasks[task.pk]["state"] == "running"
    assert "scan" in observed.run["merge_pending"]


def test_the_marker_makes_the_task_done(store: Path) -> None:
    """C2: done when the coordinator succeeded and the marker exists."""
    run, task = split_run()
    paths = task_paths(run.pk, "scan")
    paths.out.mkdir(parents=True)
    (paths.out / ".simrun-merged").write_text("")
    status = BackendStatus(
        phase=WorkflowPhase.SUCCEEDED, pods={"scan-w0": PodStatus("scan-w0", PodPhase.SUCCEEDED)}
    )
    assert observe(run, [task], status, timezone.now()).outcome == "succeeded"


def test_a_missing_marker_is_awaited_for_the_grace_then_fails_the_task(
    store: Path, settings: Settings
) -> None:
    """K12: C2: the coordinator succeeded without a marker: the task runs on through the
    grace (the default, 120 s) from the first poll that saw it, and fails after it."""
    settings.SIMRUN_MERGE_MARKER_GRACE_S = 120.0
    run, task = split_run()
    status = BackendStatus(
        phase=WorkflowPhase.RUNNING, pods={"scan-w0": PodStatus("scan-w0", PodPhase.SUCCEEDED)}
    )
    first = timezone.now()
    assert reconcile_with(run, status, now=first).value == "written"
    assert run.merge_pending == {"scan": first.isoformat()}
    within = observe(run, [task], status, first + timedelta(seconds=119))
    assert within.outcome is None and "scan" in within.run["merge_pending"]
    after = observe(run, [task], status, first + timedelta(seconds=121))
    assert after.outcome == "failed"
    assert "the coordinator ended but no merge marker appeared" in after.run["message"]


def test_the_merge_marker_is_found_by_listing_its_directories(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """C20: the marker is found by listing directories, and is absent without out/: a lookup
    that missed before the pod wrote it (a negative entry an NFS client keeps) does not hide
    it."""
    paths = task_paths("r1", "scan")
    cache = NegativeLookupCache(store).install(monkeypatch)
    assert not has_merge_marker(paths)
    paths.out.mkdir(parents=True)
    assert not has_merge_marker(paths)
    assert not paths.merge_marker.exists()  # this lookup's miss is now cached
    paths.merge_marker.write_text("")  # written by the merge pod on another node
    assert not paths.merge_marker.exists(), "the double answers a lookup from its cache"
    assert cache.stale_answers == 1
    assert has_merge_marker(paths)


def test_a_marker_written_after_a_missed_lookup_makes_the_task_done(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """C20: C2: the coordinator succeeded and the first poll found no marker; the merge writes
    it; the next poll finds it, though the store's lookups still answer from their negative
    cache."""
    run, task = split_run()
    paths = task_paths(run.pk, "scan")
    paths.out.mkdir(parents=True)
    cache = NegativeLookupCache(store).install(monkeypatch)
    status = BackendStatus(
        phase=WorkflowPhase.RUNNING, pods={"scan-w0": PodStatus("scan-w0", PodPhase.SUCCEEDED)}
    )
    first = observe(run, [task], status, timezone.now())
    assert first.tasks[task.pk]["state"] == "running"
    assert not paths.merge_marker.exists()  # a lookup by the service missed: now cached
    paths.merge_marker.write_text("")
    assert not paths.merge_marker.exists() and cache.stale_answers >= 1  # still stale

    second = observe(run, [task], status, timezone.now())

    assert second.tasks[task.pk]["state"] == "done"
    assert second.outcome == "succeeded"


def test_task_states_and_kills_for_memory_are_stored_at_every_poll(store: Path) -> None:
    """C9: each poll's task state is written to the task's row, and a kill for memory to the
    run's record, while the task is still live (not only once it is final), so a workflow
    gone later resolves from what was last seen."""
    run, task = split_run()
    oom = AttemptFailure(0, 137, oom_killed=True)
    polls = [
        (PodStatus("scan-w0", PodPhase.QUEUED), [], "queued", {}),
        (PodStatus("scan-w0", PodPhase.RUNNING, attempts=1), [], "running", {}),
        (PodStatus("scan-w0", PodPhase.RETRYING, attempts=1), [oom], "retrying", {"scan-w0": [0]}),
        (
            PodStatus("scan-w0", PodPhase.PREEMPTED, attempts=2),
            [oom, AttemptFailure(1, None)],
            "preempted",
            {"scan-w0": [0]},
        ),
        (PodStatus("scan-w0", PodPhase.RUNNING, attempts=3), [oom], "running", {"scan-w0": [0]}),
    ]
    for pod, failures, state, kills in polls:
        status = BackendStatus(
            phase=WorkflowPhase.RUNNING, pods={pod.name: pod}, failures={pod.name: failures}
        )
        reconcile_with(Run.objects.get(pk=run.pk), status, now=timezone.now())
        assert Task.objects.get(pk=task.pk).state == state
        stored = Run.objects.get(pk=run.pk)
        assert stored.oom_kills == kills
        assert stored.pods["scan-w0"]["phase"] == str(pod.phase)


class LockWatchingBackend(LocalBackend):
    """The real local backend, noting whether a transaction was open at each call."""

    calls: list[tuple[str, bool]]

    def __getattribute__(self, name: str) -> Any:
        attr = super().__getattribute__(name)
        if name in {"status", "cancel", "stop", "logs", "unreserve", "reserve", "submit"}:

            def watched(*args: Any, **kwargs: Any) -> Any:
                object.__getattribute__(self, "calls").append((name, connection.in_atomic_block))
                return attr(*args, **kwargs)

            return watched
        return attr


@pytest.mark.django_db(transaction=True)
def test_no_backend_call_is_made_inside_a_transaction(store: Path) -> None:
    """C14: no backend call is made while a run's record is locked."""
    backend = LockWatchingBackend(store, cores=2, memory_gb=2)
    backend.calls = []
    run = factories.run(state="running", reserve="elsewhere", reserved=True)
    reconcile_run(Run.objects.get(pk=run.pk), backend)
    other = factories.run(state="running")
    cancel_run(run_id=other.pk, identity=factories.person())
    settle(other.pk, backend)
    settle(run.pk, backend)
    assert backend.calls, "the backend was called"
    assert [call for call in backend.calls if call[1]] == []


def test_a_coordinator_that_exits_5_fails_its_task_as_a_store_failure(store: Path) -> None:
    """Exit 5 is the store refusing writes, named with its path, once."""
    from runs.ports import AttemptFailure

    run, task = split_run()
    status = BackendStatus(
        phase=WorkflowPhase.FAILED,
        pods={"scan-w0": PodStatus("scan-w0", PodPhase.FAILED, exit_code=5)},
        failures={"scan-w0": [AttemptFailure(0, 5, False, "main: Error (exit code 5)")]},
    )
    observed = observe(run, [task], status, timezone.now())
    assert observed.outcome == "failed"
    cause = (
        "pod scan-w0 failed with exit code 5: the store is not writable: "
        f"{task_paths(run.pk, 'scan').root}"
    )
    assert observed.run["message"] == f"task 'scan': {cause}"
    assert observed.tasks[task.pk]["message"] == cause


def test_a_merge_killed_again_fails_naming_the_merges_own_retry_memory(store: Path) -> None:
    """C7 with a shape per pod: the merge pod's retry memory is its own, not the workers'."""
    run = factories.run(state="running")
    plan = TaskPlan(
        pods=1,
        shape=PodShape(cores=4, memory_gb=8, retry_memory_gb=12),
        base_priority="simrun-person",
        extra_priority="simrun-person-extra",
        merge_shape=PodShape(cores=1, memory_gb=2, retry_memory_gb=2.5),
    )
    task = Task.objects.create(
        run=run, task_id="scan", position=1, type="sleep", splittable=True, plan=plan.to_json()
    )
    Task.objects.filter(run=run, task_id="hello").delete()
    killed = [AttemptFailure(0, 137, oom_killed=True), AttemptFailure(1, 137, oom_killed=True)]
    status = BackendStatus(
        phase=WorkflowPhase.RUNNING,
        pods={
            "scan-w0": PodStatus("scan-w0", PodPhase.SUCCEEDED),
            "scan-merge": PodStatus("scan-merge", PodPhase.FAILED, attempts=2),
        },
        failures={"scan-merge": killed},
    )
    observed = observe(run, [task], status, timezone.now())
    assert (observed.outcome, observed.tasks[task.pk]["state"]) == ("failed", "failed")
    message = observed.run["message"]
    assert "scan-merge was killed for memory again at the retry memory of 2.5 GiB" in message


def test_a_status_that_cannot_be_read_keeps_the_run_and_its_tasks_and_says_why(
    store: Path,
) -> None:
    """B13: a workflow whose node status the backend cannot read (Argo offloaded it, no Argo
    server): no task changes, no outcome, the run's message says why; a readable status
    afterwards derives as usual and clears the message."""
    run, task = split_run()
    Task.objects.filter(pk=task.pk).update(state="running")
    why = "Argo offloaded this workflow's node status to its database"
    ended = BackendStatus(phase=WorkflowPhase.SUCCEEDED, unreadable=why)

    assert reconcile_with(Run.objects.get(pk=run.pk), ended, now=timezone.now()).value == "written"

    stored = Run.objects.get(pk=run.pk)
    assert (stored.state, stored.message) == ("running", why)
    assert Task.objects.get(pk=task.pk).state == "running"
    assert reconcile_with(stored, ended, now=timezone.now()).value == "unchanged"
    running = BackendStatus(
        phase=WorkflowPhase.RUNNING, pods={"scan-w0": PodStatus("scan-w0", PodPhase.RUNNING)}
    )
    reconcile_with(Run.objects.get(pk=run.pk), running, now=timezone.now())
    assert (Run.objects.get(pk=run.pk).state, Run.objects.get(pk=run.pk).message) == (
        "running",
        "",
    )


def test_reconcile_run_derives_a_run_from_its_backend_and_says_whether_it_wrote(
    store: Path, tmp_path: Path
) -> None:
    """One run on its own: its status asked of the backend, derived at the time of the call;
    True when the record was written, False when it already said what the status says."""
    backend = LocalBackend(store, cores=2, memory_gb=2)
    go = tmp_path / "go"
    code = f"import pathlib, time\nwhile not pathlib.Path({str(go)!r}).exists(): time.sleep(0.02)"
    run = launched(backend, command_task("hello", code))
    try:
        wait_for(
            lambda: backend.status(run.workflow_name).pods["hello"].phase == PodPhase.RUNNING,
            what="the pod runs",
        )
        before = timezone.now()
        assert reconcile_run(Run.objects.get(pk=run.pk), backend) is True
        stored = Run.objects.get(pk=run.pk)
        assert stored.state == "running"
        assert stored.started_at is not None and stored.started_at >= before
        assert reconcile_run(stored, backend) is False
    finally:
        go.write_text("")
        wait_for(
            lambda: backend.status(run.workflow_name).phase == WorkflowPhase.SUCCEEDED,
            what="the pod ended",
        )
