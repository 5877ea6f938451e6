"""What a stopped service left behind is taken up by the next one's controller (C17).

A restarted service is a new backend object on the same store and a controller that has
noted nothing (`Seen()`); every branch of the recovery is one test: submissions left by a
dead worker are resumed, submissions in flight are left alone, a live record without a
workflow name fails, and the logs, releases and cancels an ended run left pending are done.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from pytest_django import Settings

from cluster.local.backend import LocalBackend
from runs.backends import backend as configured_backend
from runs.controller.seen import Seen
from runs.controller.tick import tick
from runs.models import Run, Task
from runs.ports import RunLaunch, WorkflowPhase
from runs.services.fair_share import stale_submissions
from runs.services.submission import create_run
from runs.store import task_paths
from simrun_site.celery import app
from tests import factories
from tests.cluster.local.builders import command_task, shape
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db

LEASE = timedelta(seconds=30)  # SIMRUN_SUBMIT_LEASE_S as the tests run


@pytest.fixture
def restarted(store: Path, settings: Settings) -> Iterator[LocalBackend]:
    """The backend of a service started on the store; Celery tasks run in the caller (a
    worker of the new service picking up what the controller sends)."""
    settings.SIMRUN_SUBMIT_LEASE_S = LEASE.total_seconds()
    configured_backend.cache_clear()
    eager = app.conf.task_always_eager
    app.conf.task_always_eager = True
    backend = configured_backend()
    assert isinstance(backend, LocalBackend)
    yield backend
    app.conf.task_always_eager = eager
    configured_backend.cache_clear()


def submitting(backend: LocalBackend, *, lease_left: timedelta | None, age: timedelta) -> Run:
    """A run recorded `submitting` `age` ago, its worker's lease running out in `lease_left`
    (None: no worker took it yet)."""
    run, _ = create_run(
        identity=factories.person(),
        workflow={
            "name": "hi",
            "tasks": [{"id": "hi", "type": "command", "settings": {"args": ["true"]}}],
        },
        sources=[],
        nodes=backend.nodes(),
    )
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(
        created_at=now - age, submit_lease_until=None if lease_left is None else now + lease_left
    )
    return Run.objects.get(pk=run.pk)


def has_workflow(backend: LocalBackend, run: Run) -> bool:
    try:
        backend.status(run.workflow_name)
    except KeyError:
        return False
    return True


def test_the_submissions_a_dead_worker_left_are_found_and_those_in_flight_are_not(
    restarted: LocalBackend,
) -> None:
    """C17: a lease run out, or none taken long after the record was written: resumed; a
    lease still held, or a record just written (its task on its way to a worker): left."""
    expired = submitting(restarted, lease_left=-timedelta(seconds=1), age=timedelta(minutes=5))
    never_taken = submitting(restarted, lease_left=None, age=LEASE * 2)
    held = submitting(restarted, lease_left=LEASE, age=timedelta(minutes=5))
    fresh = submitting(restarted, lease_left=None, age=timedelta(seconds=1))
    factories.run(state="queued")

    assert sorted(stale_submissions()) == sorted([expired.pk, never_taken.pk])
    assert {held.pk, fresh.pk}.isdisjoint(stale_submissions())


def test_a_restarted_controller_resumes_a_dead_submission_and_leaves_one_in_flight(
    restarted: LocalBackend,
) -> None:
    """C17: the first tick of the new service submits the run whose worker died (its
    workflow made, the run queued, then derived in the same tick); the one whose worker
    still holds its lease is neither submitted nor failed."""
    dead = submitting(restarted, lease_left=-timedelta(seconds=1), age=timedelta(minutes=5))
    in_flight = submitting(restarted, lease_left=LEASE, age=timedelta(minutes=5))

    tick(restarted, seen=Seen())

    # then derived in the same tick: its one command (`true`) may be done by then
    assert Run.objects.get(pk=dead.pk).state in ("queued", "running", "succeeded")
    assert has_workflow(restarted, dead)
    left = Run.objects.get(pk=in_flight.pk)
    assert (left.state, left.submit_lease_until) == ("submitting", in_flight.submit_lease_until)
    assert not has_workflow(restarted, in_flight)


def test_a_live_record_without_a_workflow_name_fails(restarted: LocalBackend) -> None:
    """C17: a running record with no workflow name has nothing to follow: its tasks have no
    evidence and fail, so the run fails with a message naming them (no workflow to cancel)."""
    run = factories.run(state="running")
    Run.objects.filter(pk=run.pk).update(workflow_name="")

    tick(restarted, seen=Seen())

    failed = Run.objects.get(pk=run.pk)
    assert failed.state == "failed"
    assert "task 'hello': its workflow is gone and its end was not seen" in failed.message
    assert (failed.pending_cancel, failed.pending_logs) == (False, False)


def ended(backend: LocalBackend, state: str, code: str, *, pod: Any = None, **fields: Any) -> Run:
    """An ended run whose workflow exists on the backend, its steps as `fields` left them."""
    run = factories.run(state="queued")
    task = command_task("hello", code, pod=pod)
    Task.objects.filter(run=run).update(plan=task.plan.to_json())
    backend.submit(RunLaunch(run.pk, run.workflow_name, (task,), "service", grace_s=1))
    Run.objects.filter(pk=run.pk).update(state=state, ended_at=timezone.now(), **fields)
    return Run.objects.get(pk=run.pk)


def test_the_logs_releases_and_cancels_left_pending_are_done_at_the_first_tick(
    restarted: LocalBackend,
) -> None:
    """C17: C12: C16: C19: three ended runs left with a step pending by the stopped service:
    the first tick of the new one keeps the logs of the first, cancels the workflow of the
    second (its pod still waiting) and releases the node reserved for the third."""
    logs = ended(restarted, "succeeded", "print('hello from the pod')", pending_logs=True)
    Task.objects.filter(run=logs).update(state="done", observed=True)
    wait_for(
        lambda: restarted.status(logs.workflow_name).phase is WorkflowPhase.SUCCEEDED,
        what="the pod ended",
    )
    cancel = ended(restarted, "cancelled", "pass", pod=shape(cores=64), pending_cancel=True)
    [node] = restarted.nodes()
    release = ended(
        restarted,
        "failed",
        "pass",
        pod=shape(cores=64),
        reserve=node.name,
        reserved=True,
        pending_release=True,
    )
    restarted.reserve(node.name, release.pk)

    tick(restarted, seen=Seen())

    for run in (logs, cancel, release):
        after = Run.objects.get(pk=run.pk)
        assert (after.pending_logs, after.pending_cancel, after.pending_release) == (
            False,
            False,
            False,
        ), run.state
    kept = "".join(p.read_text() for p in task_paths(logs.pk, "hello").logs.iterdir())
    assert "hello from the pod" in kept
    assert restarted.status(cancel.workflow_name).phase is WorkflowPhase.STOPPED
    [node] = restarted.nodes()
    assert node.reserved_by is None
