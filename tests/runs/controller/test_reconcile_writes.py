"""What a reconcile writes of a run and its tasks, against real rows: only over the version it
read (C22), the time of the write, the states and times of the tasks, the pods, the messages
and the steps left pending. Gaps found by mutation testing (docs/testing.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db.models import F
from django.utils import timezone

from runs.controller.reconcile import Reconciled, observe, reconcile_with
from runs.controller.seen import derived_from
from runs.models import Run, Task
from runs.plans import PodShape, TaskPlan
from runs.ports import AttemptFailure, BackendStatus, PodPhase, PodStatus, WorkflowPhase
from runs.services.runs import cancel_run
from runs.store import task_paths
from tests import builders, factories

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("store")]

P = PodPhase
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def run_of(*tasks: tuple[str, bool, TaskPlan | None], **fields: object) -> Run:
    """A run whose tasks are these (id, splittable, plan), in this order."""
    run = factories.run(**fields)
    Task.objects.filter(run=run).delete()
    for position, (task_id, splittable, plan) in enumerate(tasks):
        Task.objects.create(
            run=run,
            task_id=task_id,
            position=position,
            type="sleep" if splittable else "command",
            splittable=splittable,
            plan=plan.to_json() if plan else {},
        )
    return Run.objects.prefetch_related("tasks").get(pk=run.pk)


def status(
    phase: WorkflowPhase = WorkflowPhase.RUNNING,
    failures: dict[str, list[AttemptFailure]] | None = None,
    **pods: PodPhase | PodStatus,
) -> BackendStatus:
    """A workflow's status; a pod given by its phase alone, or whole (`-` spelt `_`)."""
    found = {}
    for name, pod in pods.items():
        name = name.replace("_", "-")
        found[name] = pod if isinstance(pod, PodStatus) else PodStatus(name, pod)
    return BackendStatus(phase, found, failures or {})


def fresh(run: Run) -> Run:
    """The run as a tick fetches it: its row now, its tasks prefetched."""
    return Run.objects.prefetch_related("tasks").get(pk=run.pk)


def task(run: Run, task_id: str) -> Task:
    return Task.objects.get(run=run, task_id=task_id)


def test_a_record_written_meanwhile_by_a_cancel_is_left_as_the_cancel_wrote_it() -> None:
    """C22: a tick read the run, then a cancel wrote it: the reconcile that follows writes
    neither the run nor its tasks, and says so."""
    run = run_of(("hello", False, None), state="queued")
    read = fresh(run)
    cancel_run(run_id=run.pk, identity=factories.person())

    assert reconcile_with(read, status(hello=P.RUNNING), now=NOW) is Reconciled.CONFLICT

    stored = Run.objects.get(pk=run.pk)
    assert (stored.state, stored.pods) == ("cancelled", {})
    assert task(run, "hello").state == "cancelled"


def test_noting_the_status_a_record_derives_from_touches_that_row_at_that_version_only() -> None:
    """C22: a record the status leaves as it is notes the status in its own row, and only
    while the row is at the version read; another run's row at the same version is left."""
    run = run_of(("hello", False, None), state="queued")
    queued = status(hello=P.QUEUED)
    reconcile_with(fresh(run), queued, now=NOW)
    version = Run.objects.get(pk=run.pk).version
    other = factories.run(state="queued", version=version, derived_from=f"{version}:other")
    Run.objects.filter(pk=run.pk).update(derived_from="")  # as a row noting nothing

    assert reconcile_with(fresh(run), queued, now=NOW) is Reconciled.UNCHANGED

    assert Run.objects.get(pk=run.pk).derived_from == derived_from(version, queued)
    assert Run.objects.get(pk=other.pk).derived_from == f"{version}:other"
    read = fresh(run)
    Run.objects.filter(pk=run.pk).update(version=F("version") + 1, derived_from="theirs")
    reconcile_with(read, status(hello=P.QUEUED, message="elsewhere"), now=NOW)
    assert Run.objects.get(pk=run.pk).derived_from == "theirs"


def test_a_write_records_when_the_record_was_last_written() -> None:
    """A restarted process lets the backend answer only from what it observed after the
    record's last write (`tick.reusable`): every write moves that time."""
    run = run_of(("hello", False, None), state="queued")
    before = timezone.now()

    assert reconcile_with(fresh(run), status(hello=P.RUNNING), now=NOW) is Reconciled.WRITTEN

    assert Run.objects.get(pk=run.pk).updated_at >= before


def test_a_write_is_applied_to_the_run_and_its_tasks_as_fetched() -> None:
    """What follows a reconcile in the same tick (the notes of `seen.py`, the observations of
    tasks that ended) works from the run and tasks as fetched: they carry the write."""
    run = run_of(("hello", False, None), state="queued", version=4)
    fetched = fresh(run)

    reconcile_with(fetched, status(hello=P.RUNNING), now=NOW)

    assert (fetched.version, fetched.state) == (5, "running")
    assert [(t.state, t.started_at) for t in fetched.tasks.all()] == [("running", NOW)]


def test_the_row_notes_the_revision_the_status_was_read_at() -> None:
    """A restarted process whose backend has the revision a row names skips reading that run's
    status: the row notes it when written, and when only the note changes."""
    run = run_of(("hello", False, None), state="queued")
    queued = status(hello=P.QUEUED)

    reconcile_with(fresh(run), queued, now=NOW, revision="7")
    version = Run.objects.get(pk=run.pk).version
    assert Run.objects.get(pk=run.pk).derived_from == derived_from(version, queued, "7")

    reconcile_with(fresh(run), queued, now=NOW, revision="8")
    assert Run.objects.get(pk=run.pk).derived_from == derived_from(version, queued, "8")


def test_each_pod_is_stored_with_its_phase_attempts_node_and_exit_code() -> None:
    """C9: the pages and the API show every pod as the last poll saw it."""
    run = run_of(("hello", False, None))
    pod = PodStatus("hello", P.RETRYING, attempts=2, node="n1", exit_code=137)

    reconcile_with(fresh(run), status(hello=pod), now=NOW)

    assert Run.objects.get(pk=run.pk).pods == {
        "hello": {"phase": "retrying", "attempts": 2, "node": "n1", "exit_code": 137}
    }


def test_the_open_tasks_of_a_run_that_failed_are_cancelled() -> None:
    """C5: a task failed, so the run failed and its workflow is stopped: the tasks still
    open will not go on and are written cancelled, saying why; final ones stay."""
    run = run_of(("a", False, None), ("b", False, None), ("c", False, None))
    Task.objects.filter(run=run, task_id="c").update(state="done")
    failed = status(failures={"a": [AttemptFailure(0, 3)]}, a=P.FAILED, c=P.SUCCEEDED)

    reconcile_with(fresh(run), failed, now=NOW)

    assert Run.objects.get(pk=run.pk).state == "failed"
    b = task(run, "b")
    assert (b.state, b.message, b.ended_at) == ("cancelled", "stopped: the run failed", NOW)
    assert task(run, "c").state == "done"


def test_the_runs_message_names_every_failed_task_in_order() -> None:
    """Each failed task's reason is the run's message, joined in the tasks' order, and each
    task's own message, whatever the tasks between them did."""
    run = run_of(("a", False, None), ("b", False, None), ("c", False, None))
    failures = {"a": [AttemptFailure(0, 3)], "c": [AttemptFailure(0, 4)]}

    reconcile_with(fresh(run), status(failures=failures, a=P.FAILED, c=P.FAILED), now=NOW)

    assert Run.objects.get(pk=run.pk).message == (
        "task 'a': pod a failed with exit code 3; task 'c': pod c failed with exit code 4"
    )
    assert task(run, "a").message == "pod a failed with exit code 3"


def test_a_pod_the_backend_gave_up_retrying_is_named_with_its_last_failure() -> None:
    """K7: evicted at every attempt until the backend gave up (no verdict of its own): the
    task fails with the last attempt's exit code and message."""
    run = run_of(("t", False, None))
    failures = {
        "t": [
            AttemptFailure(0, 137, message="evicted"),
            AttemptFailure(1, 137, message="node drained"),
        ]
    }

    reconcile_with(fresh(run), status(failures=failures, t=P.FAILED), now=NOW)

    assert Run.objects.get(pk=run.pk).message == (
        "task 't': pod t failed (exit code 137): node drained"
    )


def test_a_run_and_its_task_start_when_first_seen_running_and_keep_that_start() -> None:
    """A run and a task queued have no start; the poll that first sees them running gives
    it; later changes (an attempt retried) keep it."""
    run = run_of(("hello", False, None), state="queued")
    polls = [
        (status(hello=P.QUEUED), None),
        (status(hello=P.RUNNING), NOW + timedelta(seconds=1)),
        (status(hello=P.RETRYING), NOW + timedelta(seconds=1)),
    ]
    for seconds, (read, start) in enumerate(polls):
        reconcile_with(fresh(run), read, now=NOW + timedelta(seconds=seconds))
        assert Run.objects.get(pk=run.pk).started_at == start
        assert task(run, "hello").started_at == start


def test_an_ended_run_keeps_its_logs_and_stop_pending_unless_its_workflow_is_gone() -> None:
    """C12, C13: a run that ended with its workflow there has its logs to keep and its
    workflow to stop; one whose workflow is gone has neither."""
    run = run_of(("t", False, None))
    failed = status(failures={"t": [AttemptFailure(0, 3)]}, t=P.FAILED)

    ended = observe(run, list(run.tasks.all()), failed, NOW).run
    gone = observe(run, list(run.tasks.all()), None, NOW).run

    assert (ended["pending_logs"], ended["pending_cancel"]) == (True, True)
    assert (gone["state"], gone["pending_logs"], gone["pending_cancel"]) == ("failed", False, False)


def test_a_task_whose_plan_has_no_shape_is_refused_naming_it() -> None:
    """A corrupt plan is an error naming the task and the plan (the tick logs it and backs
    off), not a guess."""
    run = run_of(("hello", False, None))
    Task.objects.filter(run=run).update(plan={"pods": 1})

    with pytest.raises(ValueError, match=r"task 'hello': its plan has no shape: \{'pods': 1\}"):
        observe(fresh(run), list(fresh(run).tasks.all()), status(hello=P.RUNNING), NOW)


def test_a_split_task_runs_while_an_extra_worker_runs() -> None:
    """C18: every worker of the plan counts: the coordinator waiting, an extra running."""
    run = run_of(("scan", True, builders.plan(2)))

    reconcile_with(fresh(run), status(scan_w0=P.QUEUED, scan_w1=P.RUNNING), now=NOW)

    assert task(run, "scan").state == "running"


def test_a_gone_workflow_resolves_planned_tasks_from_their_records_and_markers() -> None:
    """C10: planned tasks too: a split task with its marker is done, an open one failed."""
    merging = builders.plan(2, coordinator_merges=True)
    run = run_of(("scan", True, merging), ("t", False, builders.plan(1)))
    Task.objects.filter(run=run).update(state="running")
    out = task_paths(run.pk, "scan").out
    out.mkdir(parents=True)
    (out / ".simrun-merged").write_text("")

    reconcile_with(fresh(run), None, now=NOW)

    assert (task(run, "scan").state, task(run, "t").state) == ("done", "failed")


def test_an_unsplit_task_killed_for_memory_twice_fails_naming_its_retry_memory() -> None:
    """C7: the second kill, at the retry memory of the task's plan, fails it naming that."""
    plan = builders.plan(1, PodShape(cores=1, memory_gb=2, retry_memory_gb=8))
    run = run_of(("t", False, plan))
    kills = [AttemptFailure(0, 137, oom_killed=True), AttemptFailure(1, 137, oom_killed=True)]

    reconcile_with(fresh(run), status(failures={"t": kills}, t=P.FAILED), now=NOW)

    assert (
        task(run, "t").message
        == "pod t was killed for memory again at the retry memory of 8 GiB: the pod was killed "
        "at its limit of 8.00 GB; give its units more memory: in the workflow, the task's "
        "resources: {memory_per_worker_gb: 16}"
    )
