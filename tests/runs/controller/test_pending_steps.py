"""An ended run's steps that fail stay pending and are retried (C13, C17).

The backend is the real local backend with a fault injected at its port: its first calls of
`stop`, `cancel`, `unreserve` or `logs` raise, as a call does while the API server is away;
later calls go through.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from cluster.local.backend import LocalBackend
from runs.controller.backoff import MAX_S, Backoff
from runs.controller.seen import Seen
from runs.controller.tick import tick
from runs.models import Run, Task
from runs.ports import BackendStatus, PodLog, RunLaunch, WorkflowPhase
from runs.services.runs import cancel_run
from runs.services.settle import settle
from tests import factories
from tests.cluster.local.builders import command_task, shape
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db

HUGE = shape(cores=64)  # more than the backend has: the pod waits and the run stays queued


class ApiServerAway(ConnectionError):
    """What a call raises while the backend cannot be reached."""


class FailingFirst(LocalBackend):
    """The local backend whose first `failures[name]` calls of each named method raise."""

    def __init__(self, store: Path, *, failures: dict[str, int]) -> None:
        super().__init__(store, cores=2, memory_gb=2)
        self.failures = dict(failures)
        self.calls: list[str] = []
        self.asked: list[str] = []  # workflows whose status was asked

    def _call(self, name: str) -> None:
        self.calls.append(name)
        if self.failures.get(name, 0) > 0:
            self.failures[name] -= 1
            raise ApiServerAway(f"{name}: the API server did not answer")

    def stop(self, name: str) -> None:
        self._call("stop")
        super().stop(name)

    def cancel(self, name: str) -> None:
        self._call("cancel")
        super().cancel(name)

    def unreserve(self, node: str, run_id: str) -> None:
        self._call("unreserve")
        super().unreserve(node, run_id)

    def logs(self, name: str, task_id: str, tail_lines: int | None = None) -> list[PodLog]:
        self._call("logs")
        return super().logs(name, task_id, tail_lines)

    def statuses(
        self, names: Collection[str], *, may_reuse: Collection[str] = ()
    ) -> dict[str, BackendStatus | None]:
        self.asked.extend(names)
        return super().statuses(names, may_reuse=may_reuse)


class LaterTicks:
    """Ticks of one controller, each after its backoff's wait for a failing run has run out:
    C13 is about retrying a pending step at all; when is `runs/controller/backoff.py`'s."""

    def __init__(self, backend: LocalBackend) -> None:
        self.backend = backend
        self.now = 0.0
        self.backoff = Backoff(clock=lambda: self.now)

    def __call__(self) -> None:
        self.now += MAX_S + 1
        tick(self.backend, seen=Seen(), backoff=self.backoff)


def reserved_run(backend: LocalBackend, code: str, *, pod: Any = None) -> Run:
    """A queued run of one command task on the backend's node, reserved for it."""
    [node] = backend.nodes()
    run = factories.run(
        state="queued", reserve=node.name, reserved=True, submitted_at=timezone.now()
    )
    task = command_task("hello", code, pod=pod)
    Task.objects.filter(run=run).update(plan=task.plan.to_json())
    backend.reserve(node.name, run.pk)
    backend.submit(RunLaunch(run.pk, run.workflow_name, (task,), "service", grace_s=1))
    return run


def record(run: Run) -> tuple[Any, ...]:
    """What a tick must not change on an ended run: all but its pending steps."""
    r = Run.objects.get(pk=run.pk)
    tasks = tuple(Task.objects.filter(run=run).values_list("state", "ended_at"))
    return (r.state, r.message, r.version, r.ended_at, r.pods, tasks)


def pending(run: Run) -> tuple[bool, bool, bool]:
    r = Run.objects.get(pk=run.pk)
    return (r.pending_logs, r.pending_cancel, r.pending_release)


def reserved_by(backend: LocalBackend) -> str | None:
    [node] = backend.nodes()
    return node.reserved_by


def test_a_failed_cancel_and_release_stay_pending_and_later_ticks_retry_only_them(
    store: Path,
) -> None:
    """C13: C16: the cancel writes the run cancelled first; its workflow's cancel and the
    node's release fail twice (at the cancel, at the first tick) and stay pending, the node
    still reserved; the tick after retries them and they succeed. The ticks do nothing else
    for the ended run: its status is never asked, its record and tasks stay as written."""
    backend = FailingFirst(store, failures={"cancel": 2, "unreserve": 2})
    later_tick = LaterTicks(backend)
    run = reserved_run(backend, "pass", pod=HUGE)

    cancelled = cancel_run(run_id=run.pk, identity=factories.person())
    assert cancelled.state == "cancelled"
    assert backend.calls == [], "the cancel itself makes no backend call"
    settle(run.pk, backend)  # what its `settle_run` task does

    assert pending(run) == (False, True, True)
    assert reserved_by(backend) == run.pk
    written = record(run)
    later_tick()
    assert pending(run) == (False, True, True)
    assert reserved_by(backend) == run.pk
    assert record(run) == written
    later_tick()
    assert pending(run) == (False, False, False)
    assert reserved_by(backend) is None
    assert backend.status(run.workflow_name).phase is WorkflowPhase.STOPPED
    assert backend.calls.count("cancel") == 3 and backend.calls.count("unreserve") == 3
    assert record(run) == written
    assert run.workflow_name not in backend.asked
    later_tick()
    assert backend.calls.count("cancel") == 3, "a step done is not made again"


def test_a_run_that_failed_is_written_failed_before_its_stop_and_release_are_retried(
    store: Path,
) -> None:
    """C13: C5: the run's pod exits 1: the tick writes the run failed although stopping its
    workflow and releasing its node fail; both stay pending and the next tick, finding the
    backend back, does them and nothing else."""
    backend = FailingFirst(store, failures={"stop": 1, "unreserve": 1})
    later_tick = LaterTicks(backend)
    run = reserved_run(backend, "raise SystemExit(1)")
    wait_for(
        lambda: backend.status(run.workflow_name).phase is WorkflowPhase.FAILED,
        what="the pod failed",
    )

    later_tick()

    ended = Run.objects.get(pk=run.pk)
    assert ended.state == "failed", ended.message
    assert "exit code 1" in ended.message
    assert pending(run) == (False, True, True)
    assert reserved_by(backend) == run.pk
    written = record(run)
    asked = len(backend.asked)
    later_tick()
    assert pending(run) == (False, False, False)
    assert reserved_by(backend) is None
    assert record(run) == written
    assert len(backend.asked) == asked, "an ended run's status is not asked again"
    assert backend.calls.count("stop") == 2 and backend.calls.count("unreserve") == 2
