"""The status of many local runs at once, as a reconcile tick reads them."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from cluster.local.backend import LocalBackend
from cluster.local.run_files import RunFiles
from cluster.local.statuses import RunStatuses
from runs.ports import BackendStatus, PodPhase, WorkflowPhase
from simrun_harness.layout import StorePaths
from tests.cluster.local.builders import command_task, launch, shape
from tests.waiting import wait_for

HUGE = shape(cores=64)  # more than the test machine: its pod waits, and its files stay


def waiting_run(backend: LocalBackend, run_id: str) -> str:
    return backend.submit(launch(run_id, command_task("t", "pass", pod=HUGE)))


def test_statuses_are_each_runs_status_and_none_for_an_unknown_one(
    backend: LocalBackend,
) -> None:
    done = backend.submit(launch("r1", command_task("t", "pass")))
    waiting = waiting_run(backend, "r2")
    wait_for(lambda: backend.status(done).phase is WorkflowPhase.SUCCEEDED, what="success")

    found = backend.statuses([done, waiting, "wf-nothing"])

    assert found == {
        done: backend.status(done),
        waiting: backend.status(waiting),
        "wf-nothing": None,
    }
    assert found[waiting] is not None
    assert found[waiting].pods["t"].phase is PodPhase.QUEUED


def test_a_change_right_after_a_read_is_in_the_next_read(backend: LocalBackend) -> None:
    """A run's status is read again when its files changed, however soon after a read."""
    name = waiting_run(backend, "r1")
    before = backend.statuses([name])[name]
    assert before is not None and before.pods["t"].phase is PodPhase.QUEUED

    backend.cancel(name)

    after = backend.statuses([name])[name]
    assert after is not None
    assert (after.phase, after.pods["t"].phase) == (WorkflowPhase.STOPPED, PodPhase.SKIPPED)


def test_a_run_whose_files_did_not_change_is_not_read_again(
    backend: LocalBackend, store: Path
) -> None:
    """Once its files are older than the racy window (none here), an unchanged run costs a
    few `stat` calls: its status is the one read before."""
    name = waiting_run(backend, "r1")
    statuses = RunStatuses(lambda _: RunFiles(StorePaths(store).run("r1")), racy_s=0.0)
    [node] = backend.nodes()

    first = statuses.read([name], node)
    second = statuses.read([name], node)

    assert statuses.reads == 1
    assert second[name] is first[name]
    assert first[name] == backend.status(name)


def test_a_run_whose_files_are_gone_has_no_status(backend: LocalBackend, store: Path) -> None:
    name = waiting_run(backend, "r1")
    assert backend.statuses([name])[name] is not None
    shutil.rmtree(store / "runs" / "r1")

    assert backend.statuses([name]) == {name: None}


def test_with_a_loop_a_status_may_be_what_its_last_pass_read(
    make_backend: Callable[..., LocalBackend],
) -> None:
    """What the loop's passes read answers names the caller may reuse, and follows changes."""
    backend = make_backend()
    backend.subscribe(lambda: None)
    name = waiting_run(backend, "r1")

    backend.cancel(name)

    def reused() -> BackendStatus | None:
        status = backend.statuses([name], may_reuse=[name])[name]
        return status if status is not None and status.phase is WorkflowPhase.STOPPED else None

    assert wait_for(reused, what="the loop's pass saw the cancel") == backend.status(name)
