"""Cancel, delete and cleanup answer at once; a Celery worker does the work.

The request writes the row (a conditional update) and enqueues `settle_run` or `delete_run`
on commit. The backend here is the real local backend whose `cancel` waits until the test
opens a gate: the request has answered while that call has not returned, and a real worker
(tests/celery_worker.py, on the Redis broker) finishes it once the gate opens. A task that is
lost is done by the controller's next tick; a task run twice changes nothing more.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.utils import timezone

import runs.tasks
from cluster.local.backend import LocalBackend
from runs.controller.backoff import Backoff
from runs.controller.seen import Seen
from runs.controller.tick import tick
from runs.models import Run, Task
from runs.ports import RunLaunch, WorkflowPhase
from runs.services import background
from runs.services.runs import cancel_run, request_deletion
from runs.store import run_paths
from tests import factories
from tests.api.conftest import Lab
from tests.celery_worker import celery_worker
from tests.cluster.local.builders import command_task, shape
from tests.waiting import wait_for

DEADLINE_S = 30.0
HUGE = shape(cores=64)  # more than the backend has: the pod waits and the run stays queued


class CountingBackend(LocalBackend):
    """The local backend, noting the thread of each `cancel` (C16's backend work)."""

    def __init__(self, store: Path) -> None:
        super().__init__(store, cores=2, memory_gb=2)
        self.cancelled_in: list[str] = []

    def cancel(self, name: str) -> None:
        self.cancelled_in.append(threading.current_thread().name)
        super().cancel(name)


class GatedBackend(CountingBackend):
    """Its `cancel` waits for the test's `gate`; in the test's own thread (the request's) it
    fails at once instead (it would wait for ever)."""

    def __init__(self, store: Path) -> None:
        super().__init__(store)
        self.entered = threading.Event()
        self.gate = threading.Event()

    def cancel(self, name: str) -> None:
        self.entered.set()
        if threading.current_thread() is threading.main_thread():
            self.cancelled_in.append("the request")
            raise RuntimeError("the backend was called in the request")
        if not self.gate.wait(DEADLINE_S):
            raise TimeoutError("the test never opened the gate")
        super().cancel(name)


@pytest.fixture
def gated(store: Path, monkeypatch: pytest.MonkeyPatch) -> GatedBackend:
    """The backend the Celery tasks use (the worker runs in this process)."""
    made = GatedBackend(store)
    monkeypatch.setattr(runs.tasks, "backend", lambda: made)
    return made


@pytest.fixture
def counting(store: Path, monkeypatch: pytest.MonkeyPatch) -> CountingBackend:
    made = CountingBackend(store)
    monkeypatch.setattr(runs.tasks, "backend", lambda: made)
    return made


@pytest.fixture
def worker(transactional_db: None, gated: GatedBackend) -> Iterator[None]:
    with celery_worker():
        try:
            yield
        finally:
            gated.gate.set()  # a task still waiting lets the worker stop


def submitted_run(
    backend: LocalBackend, *, by: Lab, state: str = "queued", **fields: object
) -> Run:
    """A run of one waiting pod on the backend's node, which it reserves."""
    [node] = backend.nodes()
    run = factories.run(
        by=by.person.identity,
        state=state,
        reserve=node.name,
        reserved=True,
        submitted_at=timezone.now(),
        **fields,
    )
    task = command_task("hello", "pass", pod=HUGE)
    Task.objects.filter(run=run).update(plan=task.plan.to_json())
    backend.reserve(node.name, run.pk)
    backend.submit(RunLaunch(run.pk, run.workflow_name, (task,), "service", grace_s=1))
    return run


def cancelled_with_files(backend: LocalBackend, lab: Lab, *, ended_at: datetime) -> Run:
    """A cancelled run whose workflow's cancel and node's release are still pending, with
    files in the store."""
    run = submitted_run(
        backend,
        by=lab,
        state="cancelled",
        ended_at=ended_at,
        pending_cancel=True,
        pending_release=True,
    )
    (run_paths(run.id).root / "tasks").mkdir(parents=True, exist_ok=True)
    return run


def shown(lab: Lab, run: Run) -> tuple[str, str]:
    body = lab.person.client.get(f"/api/runs/{run.id}/").json()
    return body["state"], body["pending"]


def settled(run: Run) -> bool:
    row = Run.objects.get(pk=run.pk)
    return not (row.pending_cancel or row.pending_release or row.pending_logs)


def test_a_cancel_answers_before_its_workflow_is_cancelled_then_a_worker_cancels_it(
    lab: Lab, gated: GatedBackend, worker: None
) -> None:
    """C16: the answer says cancelled and "cancelling" while the backend's cancel has not
    returned (it cannot before the gate opens); the worker's `settle_run` then cancels the
    workflow, releases the node and keeps the logs, and the run is no longer "cancelling"."""
    run = submitted_run(gated, by=lab)

    response = lab.person.client.post(f"/api/runs/{run.id}/cancel/")

    assert response.status_code == 200, response.json()
    assert (response.json()["state"], response.json()["pending"]) == ("cancelled", "cancelling")
    assert gated.entered.wait(DEADLINE_S), "no worker took the settle_run task"
    assert shown(lab, run) == ("cancelled", "cancelling")
    assert gated.nodes()[0].reserved_by == run.pk
    gated.gate.set()
    wait_for(lambda: settled(run), what="the worker to settle the cancelled run")
    assert shown(lab, run) == ("cancelled", "")
    assert gated.cancelled_in != [] and threading.main_thread().name not in gated.cancelled_in
    assert gated.nodes()[0].reserved_by is None
    assert gated.status(run.workflow_name).phase is WorkflowPhase.STOPPED


def test_a_delete_answers_at_once_then_a_worker_settles_and_removes_the_run(
    lab: Lab, gated: GatedBackend, worker: None
) -> None:
    """Deleting a run whose cancel is still pending: the answer (202) says "deleting" and the
    record stays while the backend's cancel waits; then the worker cancels, releases and
    removes the files and the record. Asking again meanwhile changes nothing."""
    run = cancelled_with_files(gated, lab, ended_at=timezone.now())

    response = lab.person.client.delete(f"/api/runs/{run.id}/")

    assert response.status_code == 202, response.json()
    assert response.json()["pending"] == "deleting"
    assert gated.entered.wait(DEADLINE_S), "no worker took the delete_run task"
    again = lab.person.client.delete(f"/api/runs/{run.id}/")
    assert (again.status_code, again.json()["pending"]) == (202, "deleting")
    assert shown(lab, run) == ("cancelled", "deleting")
    assert run_paths(run.id).root.exists()
    gated.gate.set()
    wait_for(lambda: not Run.objects.filter(pk=run.pk).exists(), what="the run to be deleted")
    assert not run_paths(run.id).root.exists()
    assert gated.nodes()[0].reserved_by is None
    assert lab.person.client.get(f"/api/runs/{run.id}/").status_code == 404


def test_a_cleanup_answers_at_once_then_a_worker_removes_the_runs(
    lab: Lab, gated: GatedBackend, worker: None
) -> None:
    """A cleanup marks its runs deleting and answers (202) while the backend's cancel of the
    run still waits; the worker then cancels, releases and removes files and record."""
    run = cancelled_with_files(gated, lab, ended_at=timezone.now() - timedelta(days=30))

    response = lab.person.client.post("/api/cleanup/", {"older_than_days": 7}, format="json")

    assert response.status_code == 202, response.json()
    assert response.json()["runs"] == [run.id]
    assert gated.entered.wait(DEADLINE_S), "no worker took the delete_run task"
    assert shown(lab, run) == ("cancelled", "deleting")
    assert run_paths(run.id).root.exists()
    gated.gate.set()
    wait_for(lambda: not Run.objects.filter(pk=run.pk).exists(), what="the run to be deleted")
    assert not run_paths(run.id).root.exists()
    assert gated.nodes()[0].reserved_by is None


def test_the_tasks_run_twice_change_nothing_more(lab: Lab, counting: CountingBackend) -> None:
    """A Celery task may be delivered twice (acks late): the second `settle_run` makes no
    backend call and changes no field, the second `delete_run` finds nothing to delete."""
    run = submitted_run(counting, by=lab)
    cancel_run(run_id=run.pk, identity=lab.person.identity)
    runs.tasks.settle_run(run.pk)
    assert settled(run) and counting.cancelled_in == ["MainThread"]
    record = Run.objects.filter(pk=run.pk).values().get()

    runs.tasks.settle_run(run.pk)

    assert counting.cancelled_in == ["MainThread"]
    assert Run.objects.filter(pk=run.pk).values().get() == record
    request_deletion(run_id=run.pk, identity=lab.person.identity)
    runs.tasks.delete_run(run.pk)
    assert not Run.objects.filter(pk=run.pk).exists()
    runs.tasks.delete_run(run.pk)
    assert not Run.objects.filter(pk=run.pk).exists()


@pytest.fixture
def lost(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tasks the services enqueue on commit, none delivered (a broker that lost them)."""
    sent: list[str] = []
    names = {background.SETTLE_RUN: "settle", background.DELETE_RUN: "delete"}
    monkeypatch.setattr(
        background, "enqueue", lambda task, *, run_id: sent.append(names.get(task, task))
    )
    return sent


def test_the_next_tick_settles_a_cancelled_run_and_deletes_one_whose_task_was_lost(
    lab: Lab, transactional_db: None, counting: CountingBackend, lost: list[str]
) -> None:
    """C17: the cancel's `settle_run` never runs; the controller's next tick cancels the
    workflow and releases the node. A deletion whose `delete_run` is lost too is finished by
    the tick after it: files and record gone."""
    run = submitted_run(counting, by=lab)
    cancel_run(run_id=run.pk, identity=lab.person.identity)
    assert lost == ["settle"]
    assert counting.cancelled_in == [] and not settled(run)

    tick(counting, seen=Seen(), backoff=Backoff())

    assert counting.cancelled_in == ["MainThread"]
    assert settled(run) and counting.nodes()[0].reserved_by is None
    request_deletion(run_id=run.pk, identity=lab.person.identity)
    assert lost == ["settle", "delete"] and run_paths(run.pk).root.exists()
    tick(counting, seen=Seen(), backoff=Backoff())
    assert not Run.objects.filter(pk=run.pk).exists()
    assert not run_paths(run.pk).root.exists()
