"""An extra worker that fails on the local backend, while its task's coordinator still runs
(C3, M2): its failure is ignored; the merge and the tasks after it run once the coordinator
is done, and the controller keeps their reports and logs (C11, C12).

The extra worker `scan-w1` of these runs fails at its start (exit 1, never retried), before
it claims a unit; the coordinator `scan-w0` waits for a gate file the test opens, then runs
the real harness, as does the merge: the order of the two is the test's, not the clock's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pytest_django import Settings

from cluster.local.backend import LocalBackend
from runs.controller.seen import Seen
from runs.controller.tick import tick
from runs.models import ResourceObservation, Run, Task
from runs.ports import PodPhase, RunLaunch, TaskLaunch, WorkflowPhase
from simrun_harness.layout import StorePaths
from tests import factories
from tests.builders import PY
from tests.cluster.local.builders import command_task, fake_environment, shape, split_task
from tests.waiting import wait_for

REAL_BIN = Path(PY).parent
WORKER = """\
import os, sys, time
if os.environ["SIMRUN_ROLE"] == "extra":
    print("the extra worker crashed", flush=True)
    sys.exit(1)
while not os.path.exists({gate!r}):
    time.sleep(0.02)
os.execv({real!r}, [{real!r}])
"""
MERGE = "import os\nos.execv({real!r}, [{real!r}])\n"


def broken_extras(store: Path, gate: Path) -> str:
    """An environment whose extra workers crash at their start and whose coordinator runs
    the real `simrun-worker` once `gate` exists; the real `simrun-merge`."""
    worker = WORKER.format(gate=str(gate), real=str(REAL_BIN / "simrun-worker"))
    merge = MERGE.format(real=str(REAL_BIN / "simrun-merge"))
    return fake_environment(
        store, "broken-extras", {"simrun-worker": worker, "simrun-merge": merge}
    )


def scan_then_after(store: Path, run_id: str) -> tuple[TaskLaunch, TaskLaunch]:
    """A split task of two pods and its merge, then a command that checks what it merged."""
    scan = split_task("scan", 2, pod=shape(cores=0.5, memory_gb=0.5))
    merged = StorePaths(store).run(run_id).task("scan").out / "units.json"
    check = f"import json, sys; sys.exit(json.load(open({str(merged)!r})) != [0, 1, 2, 3])"
    return scan, command_task("after", check, deps=["scan"])


def write_scan(store: Path, run_id: str) -> None:
    """What the service writes before it submits: the split task's `task.json`."""
    paths = StorePaths(store).run(run_id).task("scan")
    paths.root.mkdir(parents=True)
    record = {"task": "scan", "type": "sleep", "settings": {"units": 4, "seconds": 0.01}}
    paths.task_file.write_text(json.dumps(record | {"inputs": {}}))


def test_a_failed_extra_worker_leaves_the_merge_and_the_task_after_it_to_the_coordinator(
    backend: LocalBackend, store: Path
) -> None:
    """C3: M2: the extra failed while the coordinator runs: the merge and the task after it
    wait for the coordinator (not skipped as after a failure); then all of them run."""
    gate = store / "gate"
    environment = broken_extras(store, gate)
    write_scan(store, "r1")
    name = backend.submit(
        RunLaunch("r1", "wf-r1", scan_then_after(store, "r1"), environment, grace_s=1)
    )
    wait_for(
        lambda: backend.status(name).pods["scan-w1"].phase is PodPhase.FAILED,
        what="the extra worker failed",
    )

    status = backend.status(name)

    phases = {pod: status.pods[pod].phase for pod in ("scan-w0", "scan-merge", "after")}
    assert phases == {
        "scan-w0": PodPhase.RUNNING,
        "scan-merge": PodPhase.WAITING,
        "after": PodPhase.WAITING,
    }
    assert status.phase is WorkflowPhase.RUNNING
    gate.touch()
    wait_for(
        lambda: backend.status(name).phase in (WorkflowPhase.SUCCEEDED, WorkflowPhase.FAILED),
        what="the workflow ended",
        timeout=60,
    )
    ended = backend.status(name)
    assert ended.phase is WorkflowPhase.SUCCEEDED, ended.message
    assert ended.pods["after"].phase is PodPhase.SUCCEEDED


def ticked(backend: LocalBackend, seen: Seen, run_id: str) -> Run:
    """The run's record after a tick of the controller."""
    tick(backend, seen=seen)
    return Run.objects.get(pk=run_id)


@pytest.mark.django_db
def test_a_run_whose_extra_worker_failed_succeeds_with_the_later_reports_and_logs_kept(
    backend: LocalBackend, store: Path, settings: Settings
) -> None:
    """C3: C11: C12: through the controller's ticks: the task stays open while its coordinator
    runs, then the run succeeds, and the merge's and the later task's logs and the reports
    are kept (none lost to a task taken as final too early)."""
    settings.SIMRUN_STORE = store
    gate = store / "gate"
    environment = broken_extras(store, gate)
    run = factories.run(state="queued")
    Task.objects.filter(run=run).delete()
    tasks = scan_then_after(store, run.pk)
    for position, task in enumerate(tasks):
        Task.objects.create(
            run=run,
            task_id=task.task_id,
            position=position,
            type=task.type,
            splittable=task.splittable,
            plan=task.plan.to_json(),
        )
    write_scan(store, run.pk)
    backend.submit(RunLaunch(run.pk, run.workflow_name, tasks, environment, grace_s=1))
    seen = Seen()
    wait_for(
        lambda: ticked(backend, seen, run.pk).pods.get("scan-w1", {}).get("phase") == "failed",
        what="the controller saw the extra worker fail",
    )
    tick(backend, seen=seen)
    states = dict(Task.objects.filter(run=run).values_list("task_id", "state"))
    assert states == {"scan": "running", "after": "waiting"}

    gate.touch()
    wait_for(lambda: ticked(backend, seen, run.pk).ended, what="the run ended", timeout=60)
    tick(backend, seen=seen)  # the steps that follow the end: logs, observations

    run = Run.objects.get(pk=run.pk)
    assert run.state == "succeeded", run.message
    tasks = {t.task_id: (t.state, t.observed, t.logs_kept) for t in run.tasks.all()}
    assert tasks == {"scan": ("done", True, True), "after": ("done", True, True)}
    logs = sorted(p.name for p in (store / "runs" / run.pk / "tasks").glob("*/logs/*.log"))
    assert logs == ["after-0.log", "scan-merge-0.log", "scan-w0-0.log", "scan-w1-0.log"]
    w1 = store / "runs" / run.pk / "tasks" / "scan" / "logs" / "scan-w1-0.log"
    assert "the extra worker crashed" in w1.read_text()
    assert ResourceObservation.objects.filter(run=run, worker="scan-w0").exists()
