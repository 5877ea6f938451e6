"""The main job on one machine, for real: Celery worker, watcher, local pods, the store.

Each test submits through the domain, as the CLI does, and waits on the run's row.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import psutil
import pytest
import xarray as xr

from cluster.local.attempts import read_attempts
from runs.backends import backend
from runs.models import Identity, Run
from runs.services.runs import cancel_run
from runs.services.submission import create_run
from runs.store import store, task_paths
from tests import factories
from tests.e2e.conftest import Services, wait_for_end
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow]

SCAN = {
    "id": "scan",
    "type": "ode_scan",
    "settings": {
        "parameters": {"alpha": {"start": 100, "stop": 300, "num": 6}, "n": [1.5, 2.0, 2.5]},
        "t_end": 50,
        "n_points": 51,
        "chunk": 3,
    },
    "split": 2,
}


def submit(workflow: dict[str, Any], *, by: Identity | None = None, **options: Any) -> Run:
    from runs.backends import backend as the_backend

    backend.cache_clear()
    run, _ = create_run(
        identity=by or factories.person(),
        workflow=workflow,
        sources=[],
        nodes=the_backend().nodes(),
        **options,
    )
    return run


def test_a_split_scan_and_its_summary_succeed_with_every_point_once(services: Services) -> None:
    """C1, C5: the merge makes the task done; every task done makes the run succeed."""
    run = submit(
        {
            "name": "ode",
            "tasks": [SCAN, {"id": "summary", "type": "summary", "inputs": {"scan": "scan"}}],
        }
    )
    run = wait_for_end(run.pk)
    assert run.state == "succeeded", run.message
    out = task_paths(run.pk, "scan").out
    assert (out / ".simrun-merged").exists()
    with xr.open_dataset(out / "scan.nc", engine="scipy") as data:
        assert list(data["point"].values) == list(range(18))
    assert any(task_paths(run.pk, "summary").out.iterdir())


def test_logs_of_every_pod_are_kept_in_the_store_after_the_end(services: Services) -> None:
    """C12: the logs of a task's pods are kept in the store once the task is final."""
    run = wait_for_end(submit({"name": "logs", "tasks": [SCAN]}).pk)
    assert run.state == "succeeded", run.message
    every = {"scan-w0-0.log", "scan-w1-0.log", "scan-merge-0.log"}
    # the controller writes them one after another: wait for all, not for the first
    wait_for(
        lambda: every <= {p.name for p in task_paths(run.pk, "scan").logs.glob("*.log")},
        what="kept logs",
    )


def test_a_unit_over_its_memory_is_retried_once_with_the_retry_memory(services: Services) -> None:
    """C7: after a kill for memory the pod is retried once with the retry memory.

    The harness enforces the pod's limit (0.5 GiB), not the memory per worker: the unit's
    600 MiB break the pod at first memory and fit its retry (0.75 GiB)."""
    task = {
        "id": "grow",
        "type": "allocate",
        "settings": {"units": 1, "mb": 600, "hold_seconds": 0.5},
        "split": "none",
        "resources": {"memory_per_worker_gb": 0.25, "memory_base_gb": 0.25},
    }
    run = wait_for_end(submit({"name": "oom-once", "tasks": [task]}).pk)
    assert run.state == "succeeded", run.message
    assert run.oom_kills == {"grow-w0": [0]}


def test_a_second_kill_for_memory_fails_the_run_naming_the_retry_memory(services: Services) -> None:
    """C7: a second kill at the retry memory fails the run; the message names it."""
    task = {
        "id": "grow",
        "type": "allocate",
        "settings": {"units": 1, "mb": 900, "hold_seconds": 0.5},
        "split": "none",
        "resources": {"memory_per_worker_gb": 0.25, "memory_base_gb": 0.25},
    }
    run = wait_for_end(submit({"name": "oom-twice", "tasks": [task]}).pk)
    assert run.state == "failed"
    assert "grow-w0 was killed for memory again at the retry memory of 0.75 GiB" in run.message
    # what the user can change: the unit, what it reached (when the harness measured it
    # before the pod's limit was hit), the limit, and the setting with a value with room
    said = re.search(
        r"unit u000000 (\(value 0\) had reached \d\.\d\d GB in its process when killed|was "
        r"running when the pod was killed) with the pod's limit at 0\.75 GB.*; give its units "
        r"more memory: in the workflow, the task's resources: \{memory_per_worker_gb: ([\d.]+)\}",
        run.message,
    )
    assert said, run.message
    assert float(said[2]) >= 1.0
    # no attempt starts after the run ended: the second kill was the last attempt
    wait_for(
        lambda: not Run.objects.filter(pk=run.pk, pending_cancel=True).exists(),
        what="the workflow stopped",
    )
    attempts = store().runs / run.pk / "pods" / "grow-w0"
    assert sorted(int(n) for n in os.listdir(attempts) if n.isdigit()) == [0, 1]


def test_a_failed_analysis_fails_at_once_naming_pod_and_exit(services: Services) -> None:
    """K7: exit 3 is never retried; the message names the pod and the exit code."""
    task = {"id": "bad", "type": "fail", "settings": {"units": 2, "fail_unit": 1}, "split": "none"}
    run = wait_for_end(submit({"name": "fails", "tasks": [task]}).pk)
    assert run.state == "failed"
    assert "pod bad-w0 failed with exit code 3" in run.message
    assert run.pods["bad-w0"]["attempts"] == 1
    # The cause, once, on the run and on the task
    cause = (
        "pod bad-w0 failed with exit code 3: "
        "unit u000001 raised RuntimeError: unit 1 fails on purpose"
    )
    assert run.message == f"task 'bad': {cause}"
    assert run.tasks.get(task_id="bad").message == cause


def test_cancel_while_running_leaves_no_process(services: Services) -> None:
    """C16: cancel writes the run cancelled, then cancels the workflow: every pod is gone.
    Its open tasks, running or waiting, are cancelled with it."""
    task = {"id": "nap", "type": "sleep", "settings": {"units": 4, "seconds": 60}, "split": 2}
    after = {"id": "after", "type": "summary", "inputs": {"scan": "nap"}}
    run = submit({"name": "cancel-me", "tasks": [task, after]})
    wait_for(
        lambda: Run.objects.get(pk=run.pk).tasks.get(task_id="nap").state == "running",
        what="running",
        timeout=120,
    )
    person = factories.person()
    cancelled = cancel_run(run_id=run.pk, identity=person)
    assert cancelled.state == "cancelled"
    tasks = {t.task_id: t for t in cancelled.tasks.all()}
    assert {t: (x.state, x.ended_at) for t, x in tasks.items()} == {
        "nap": ("cancelled", cancelled.ended_at),
        "after": ("cancelled", cancelled.ended_at),
    }
    assert tasks["nap"].message == f"cancelled by {person.name}"
    run_dir = str(task_paths(run.pk, "nap").root.parent)

    def pods_left() -> list[int]:
        found = []
        for proc in psutil.process_iter(["pid", "cmdline", "environ"]):
            text = " ".join(proc.info.get("cmdline") or []) + " ".join(
                (proc.info.get("environ") or {}).values()
            )
            if run_dir in text:
                found.append(proc.pid)
        # a pod handed to a standby names the run in neither: its attempt's files name it
        for pod in (Path(run_dir) / "pods").glob("*"):
            for attempt in read_attempts(pod):
                found += [p.pid for p in (attempt.supervisor, attempt.child) if p and p.alive()]
        return found

    wait_for(lambda: not pods_left(), what="every pod of the cancelled run to exit", timeout=60)
    assert Run.objects.get(pk=run.pk).state == "cancelled"
    assert {t.state for t in Run.objects.get(pk=run.pk).tasks.all()} == {"cancelled"}


def test_a_task_still_running_when_another_fails_the_run_is_cancelled(services: Services) -> None:
    """No task stays running under a run that ended."""
    bad = {"id": "bad", "type": "fail", "settings": {"units": 2, "fail_unit": 1}, "split": "none"}
    nap = {"id": "nap", "type": "sleep", "settings": {"units": 2, "seconds": 60}, "split": "none"}
    run = wait_for_end(submit({"name": "one-fails", "tasks": [bad, nap]}).pk)
    assert run.state == "failed", run.message
    states = {t.task_id: (t.state, t.message) for t in run.tasks.all()}
    assert states["bad"][0] == "failed"
    assert states["nap"] == ("cancelled", "stopped: the run failed")
    assert run.tasks.get(task_id="nap").ended_at == run.ended_at
