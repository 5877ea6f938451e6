"""What a tick does besides deriving runs, with the real local backend and real rows: it
keeps the observations and logs of tasks that ended, finishes a deletion whose task was lost,
goes on when the statuses cannot be read, and by default works from its process's notes as
the watcher. Gaps found by mutation testing (docs/testing.md)."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import pytest

from cluster.local.backend import LocalBackend
from runs.controller import tick as tick_module
from runs.controller.backoff import Backoff
from runs.controller.seen import Seen
from runs.controller.tick import tick
from runs.models import ResourceObservation, Run, Task
from runs.ports import BackendStatus, PodPhase, RunLaunch, TaskLaunch
from runs.selectors import progress_lines, progress_saved
from runs.selectors.heartbeat import last_reconcile
from runs.selectors.progress_lines import UnitLines
from runs.store import task_paths
from simrun_harness.progress import ProgressWriter
from tests import builders, factories
from tests.cluster.local.builders import command_task, shape
from tests.runs.controller.test_tick import launched
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db

HUGE = shape(cores=64)  # more than the backend has: its pod waits


def run_of(backend: LocalBackend, *tasks: TaskLaunch) -> Run:
    """A run record of these tasks, in this order, submitted to the backend."""
    run = factories.run(state="queued")
    Task.objects.filter(run=run).delete()
    for position, task in enumerate(tasks):
        Task.objects.create(
            run=run,
            task_id=task.task_id,
            position=position,
            type=task.type,
            splittable=task.splittable,
            plan=task.plan.to_json(),
        )
    backend.submit(RunLaunch(run.pk, run.workflow_name, tasks, "service", grace_s=1))
    return run


def test_a_task_that_ends_while_its_run_goes_on_is_observed_and_its_logs_kept(
    store: Path,
) -> None:
    """C11, C12: in the tick that sees a task end, it is observed (its reports become
    observations) and its pods' logs are kept in the store, whatever the open tasks before
    it; an open task has neither yet."""
    backend = LocalBackend(store, cores=2, memory_gb=2)
    waiting = command_task("waiting", "pass", pod=HUGE)
    run = run_of(backend, waiting, command_task("hello", "print('hi')"))
    wait_for(
        lambda: backend.status(run.workflow_name).pods["hello"].phase == PodPhase.SUCCEEDED,
        what="the task hello ended",
    )

    tick(backend, seen=Seen())

    hello = Task.objects.get(run=run, task_id="hello")
    assert (hello.state, hello.observed, hello.logs_kept) == ("done", True, True)
    assert "hi" in "".join(p.read_text() for p in task_paths(run.pk, "hello").logs.iterdir())
    opened = Task.objects.get(run=run, task_id="waiting")
    assert (opened.state, opened.observed, opened.logs_kept) == ("queued", False, False)


def test_a_kill_for_memory_the_run_counted_without_a_report_is_observed(store: Path) -> None:
    """C11: an attempt killed for memory that left no report is observed at its pod's limit
    (the planner sizes the next run from it); the task is observed once."""
    run = factories.run(state="failed", pending_logs=True, oom_kills={"hello": [0]})
    Task.objects.filter(run=run).update(state="failed", plan=builders.plan(1).to_json())

    tick(LocalBackend(store, cores=2, memory_gb=2), seen=Seen())

    found = ResourceObservation.objects.filter(run_id=run.pk)
    assert list(found.values_list("worker", "attempt", "oom_killed")) == [("hello", 0, True)]
    assert Task.objects.get(run=run).observed


def test_a_deleting_run_with_nothing_left_pending_is_removed_by_the_tick(store: Path) -> None:
    """Its `delete_run` task was lost: the tick removes its files, then its record."""
    run = factories.run(state="failed", deleting=True)
    Task.objects.filter(run=run).update(state="failed", observed=True, logs_kept=True)
    task_paths(run.pk, "hello").root.mkdir(parents=True)

    tick(LocalBackend(store, cores=2, memory_gb=2), seen=Seen())

    assert not Run.objects.filter(pk=run.pk).exists()
    assert not (store / "runs" / run.pk).exists()


class StatusesAway(LocalBackend):
    """The local backend whose statuses cannot be read, as while the API server is away."""

    def statuses(
        self, names: Collection[str], *, may_reuse: object = ()
    ) -> dict[str, BackendStatus | None]:
        raise ConnectionError("the API server did not answer")


def test_a_tick_that_cannot_read_the_statuses_settles_what_it_can_and_says_so(
    store: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """C15: the live runs are left as they are (derived at a later tick), an ended run's
    pending steps are done, one line says why, and the heartbeat is recorded."""
    backend = StatusesAway(store, cores=2, memory_gb=2)
    live = launched(backend, command_task("hello", "pass", pod=HUGE))
    ended = factories.run(state="failed", pending_cancel=True)  # its workflow is unknown
    Task.objects.filter(run=ended).update(state="failed", observed=True, logs_kept=True)

    tick(backend, seen=Seen())

    assert Run.objects.get(pk=live.pk).version == live.version
    assert not Run.objects.get(pk=ended.pk).pending_cancel
    [line] = [r for r in caplog.records if "statuses" in r.getMessage()]
    assert line.getMessage() == "reading the statuses of 1 runs failed; retried later"
    assert line.exc_info is not None
    assert last_reconcile(source="watcher") is not None


def test_a_tick_given_nothing_works_from_its_processs_notes_as_the_watcher(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watcher calls `tick(backend)`: its process's notes are used (and kept for its
    next tick), and its heartbeat is the watcher's."""
    process = Seen()
    monkeypatch.setattr(tick_module, "SEEN", process)
    monkeypatch.setattr(tick_module, "BACKOFF", Backoff())
    backend = LocalBackend(store, cores=2, memory_gb=2)
    launched(backend, command_task("hello", "pass", pod=HUGE))

    tick(backend)

    assert len(process) == 1
    assert last_reconcile(source="watcher") is not None


def test_the_tick_that_keeps_an_ended_split_task_s_logs_saves_its_progress_for_the_views(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large task's progress lines are read to their end when it ends and what they say is
    saved (however little was appended since a view saved them): the first view of it in a
    web process reads none of them."""
    monkeypatch.setattr(progress_saved, "SAVE_EVERY", 300)  # bytes: two lines and a half
    backend = LocalBackend(store, cores=2, memory_gb=2)
    run = launched(backend, command_task("scan", "pass"))
    Task.objects.filter(run=run).update(splittable=True)
    wait_for(
        lambda: backend.status(run.workflow_name).pods["scan"].phase == PodPhase.SUCCEEDED,
        what="the task ended",
    )
    progress = task_paths(run.pk, "scan").progress
    progress.parent.mkdir(parents=True, exist_ok=True)
    writer = ProgressWriter(progress, "scan-w0")
    for unit in ("u000000", "u000001", "u000002"):
        writer.unit_done(unit, 0.5, 0.1)
    writer.flush()
    progress_lines.unit_lines(Task.objects.get(run=run))  # a view while it ran: saved
    progress_lines._SUMMARIES.clear()
    writer.unit_done("u000003", 0.5, 0.1)  # the last line, fewer bytes than SAVE_EVERY
    writer.close()

    tick(backend, seen=Seen())

    assert Task.objects.get(run=run).logs_kept
    assert not progress_lines._SUMMARIES  # saved, not kept in the watcher's memory
    read: list[bytes] = []
    monkeypatch.setattr(UnitLines, "read", lambda self, data: read.append(data))
    assert progress_lines.unit_lines(Task.objects.get(run=run)).units_by_worker() == {"scan-w0": 4}
    assert read == []
