"""Split tasks on the local backend with the real harness (`simrun-worker`, `simrun-merge`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cluster.local.attempts import read_attempts
from cluster.local.backend import LocalBackend
from runs.ports import PodPhase, WorkflowPhase
from simrun_harness.layout import MERGE_MARKER, StorePaths
from simrun_harness.report import read_report
from tests.cluster.local.builders import command_task, launch, shape, split_task
from tests.waiting import wait_for


def write_task(
    backend: LocalBackend, run_id: str, task_id: str, type_name: str, **settings: Any
) -> None:
    """What the service writes before it submits: the task's `task.json`."""
    paths = StorePaths(backend.store.root).run(run_id).task(task_id)
    paths.root.mkdir(parents=True)
    record = {"task": task_id, "type": type_name, "settings": settings, "inputs": {}}
    paths.task_file.write_text(json.dumps(record))


def test_a_split_task_runs_its_workers_and_merge_then_the_task_reading_it(
    backend: LocalBackend,
) -> None:
    """M1, M11: coordinator, extra workers and merge share the units; the merge waits for the
    coordinator only, and a task reading the split task waits for the merge."""
    write_task(backend, "r1", "scan", "sleep", units=6, seconds=0.05)
    out = StorePaths(backend.store.root).run("r1").task("scan").out
    units = out / "units.json"
    check = f"import json, sys; sys.exit(json.load(open({str(units)!r})) != list(range(6)))"
    scan = split_task("scan", 3, pod=shape(cores=0.5, memory_gb=0.5))
    name = backend.submit(launch("r1", scan, command_task("after", check, deps=["scan"])))

    wait_for(lambda: backend.status(name).phase is WorkflowPhase.SUCCEEDED, timeout=60)

    status = backend.status(name)
    assert {p: s.phase for p, s in status.pods.items()} == {
        "scan-w0": PodPhase.SUCCEEDED,
        "scan-w1": PodPhase.SUCCEEDED,
        "scan-w2": PodPhase.SUCCEEDED,
        "scan-merge": PodPhase.SUCCEEDED,
        "after": PodPhase.SUCCEEDED,
    }
    assert (out / MERGE_MARKER).exists()
    reports = sorted(p.name for p in (out.parent / "reports").iterdir())
    assert "scan-w0-0.json" in reports
    logs = backend.logs(name, "scan")
    assert sorted(log.pod for log in logs) == ["scan-merge", "scan-w0", "scan-w1", "scan-w2"]
    assert logs[-1].pod == "scan-merge"  # oldest first: the merge started last
    assert "every unit is done" in logs[0].text


def test_each_pod_runs_at_its_own_shape(backend: LocalBackend, store: Path) -> None:
    """A shape per pod: the coordinator, an extra worker and the merge each start with their
    own cores and memory limit, and the harness is told its own (its report's limit)."""
    write_task(backend, "r1", "scan", "sleep", units=4, seconds=0.05)
    small, large = shape(cores=0.5, memory_gb=0.5), shape(cores=1, memory_gb=1.0, processes=2)
    merge = shape(cores=0.25, memory_gb=0.75)
    scan = split_task("scan", 2, pod=small, extras=(large,), merge=merge)
    name = backend.submit(launch("r1", scan))

    wait_for(lambda: backend.status(name).phase is WorkflowPhase.SUCCEEDED, timeout=60)

    pods = store / "runs" / "r1" / "pods"
    started = {
        pod: [(a.cores, a.memory_gb) for a in read_attempts(pods / pod)]
        for pod in ("scan-w0", "scan-w1", "scan-merge")
    }
    assert started == {
        "scan-w0": [(0.5, 0.5)],
        "scan-w1": [(1.0, 1.0)],
        "scan-merge": [(0.25, 0.75)],
    }
    reports = StorePaths(backend.store.root).run("r1").task("scan").reports
    limits = {p.stem: read_report(p).memory_limit_gb for p in reports.glob("*.json")}
    assert limits == {"scan-w0-0": 0.5, "scan-w1-0": 1.0, "scan-merge-0": 0.75}


def test_a_failed_analysis_in_the_coordinator_fails_the_task_without_a_retry(
    backend: LocalBackend,
) -> None:
    """K7, C3: exit 3 of the coordinator is never retried; the merge is skipped."""
    write_task(backend, "r1", "bad", "fail", units=2, fail_unit=1)
    name = backend.submit(launch("r1", split_task("bad", 1)))

    wait_for(lambda: backend.status(name).phase is WorkflowPhase.FAILED, timeout=60)

    status = backend.status(name)
    assert status.pods["bad-w0"].phase is PodPhase.FAILED
    assert status.pods["bad-w0"].attempts == 1
    assert [f.exit_code for f in status.failures["bad-w0"]] == [3]
    assert status.pods["bad-merge"].phase is PodPhase.SKIPPED
