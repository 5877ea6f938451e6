"""The controller's rules (docs/architecture.md) over the Argo backend: runs end to end.

Each test submits through the domain (`create_run`, then the submission a Celery worker would
run), then calls the controller's `tick` until the run has ended and settled, as beat and the
watcher do in the service.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from cluster.argo.backend import ArgoBackend
from runs.controller.tick import tick
from runs.models import Identity, Run
from runs.ports import PodPhase, WorkflowPhase
from runs.services.submission import create_run, submit_run
from runs.store import task_paths
from tests import factories
from tests.cluster.argo.lab import Lab
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db

Settings = Callable[[], ArgoBackend]


def sleep_task(
    task_id: str, units: int, seconds: float, split: Any = 3, **more: Any
) -> dict[str, Any]:
    return {
        "id": task_id,
        "type": "sleep",
        "settings": {"units": units, "seconds": seconds},
        "split": split,
        **more,
    }


def grow_task(mb: int, hold: float = 1.0) -> dict[str, Any]:
    """One unit allocating `mb` MiB; the pod has 0.5 GiB with 0.25 GiB per worker, its retry
    0.75 GiB with 0.5 GiB per worker (the harness kills the largest unit process when the pod
    nears its limit)."""
    return {
        "id": "grow",
        "type": "allocate",
        "settings": {"units": 1, "mb": mb, "hold_seconds": hold},
        "split": "none",
        "resources": {"memory_per_worker_gb": 0.25, "memory_base_gb": 0.25},
    }


def submit(
    backend: ArgoBackend, *tasks: dict[str, Any], by: Identity | None = None, **options: Any
) -> Run:
    """Create the run as the API does, then submit it as the Celery task does."""
    run, _ = create_run(
        identity=by or factories.person(),
        workflow={"name": "test", "tasks": list(tasks)},
        sources=[],
        nodes=backend.nodes(),
        **options,
    )
    submit_run(run_id=run.pk, backend=backend)
    return Run.objects.get(pk=run.pk)


def settled(run: Run) -> bool:
    return run.ended and not (run.pending_cancel or run.pending_logs or run.pending_release)


def drive(
    backend: ArgoBackend, run_id: str, until: Callable[[Run], bool] = settled, timeout: float = 120
) -> Run:
    """Tick the controller until `until` holds for the run."""

    def reached() -> Run | None:
        tick(backend)
        run = Run.objects.get(pk=run_id)
        return run if until(run) else None

    return wait_for(reached, timeout=timeout, interval=0.2, what=f"run {run_id}")


def pod_phase(backend: ArgoBackend, run: Run, pod: str) -> PodPhase:
    return backend.status(run.workflow_name).pods[pod].phase


def units(run: Run, task: str = "scan") -> list[int]:
    return json.loads((task_paths(run.pk, task).out / "units.json").read_text())


def test_a_split_task_over_three_nodes_succeeds(lab: Lab, argo_settings: Settings) -> None:
    """C1: C5: C11: C12: K11: the merge makes the task done and the run succeeded; every worker
    ran on a node of its own; reports became observations and the logs of every pod were kept
    at the task's end, as a deleted pod's would be gone with it."""
    backend = argo_settings()
    run = submit(backend, sleep_task("scan", 6, 0.2))

    run = drive(backend, run.pk)

    assert run.state == "succeeded", run.message
    assert len({run.pods[f"scan-w{i}"]["node"] for i in range(3)}) == 3
    assert units(run) == list(range(6))
    task = run.tasks.get(task_id="scan")
    assert (task.state, task.observed, task.logs_kept) == ("done", True, True)
    kept = {p.name for p in task_paths(run.pk, "scan").logs.glob("*.log")}
    assert {"scan-w0-0.log", "scan-w1-0.log", "scan-w2-0.log", "scan-merge-0.log"} <= kept


def test_a_higher_priority_run_preempts_the_extras_which_finish_later_with_no_unit_lost(
    lab: Lab, argo_settings: Settings
) -> None:
    """K2: K4: C3: C18: the owner's pod takes an agent's extra worker's node; the extra gives
    its claims back, waits preempted, and runs again once the owner's run is done."""
    backend = argo_settings()
    agent = submit(backend, sleep_task("scan", 36, 1.0), by=factories.agent())
    drive(
        backend,
        agent.pk,
        lambda r: all(r.pods.get(f"scan-w{i}", {}).get("phase") == "running" for i in range(3)),
    )
    lab.past_argo_grace()
    owner = submit(backend, sleep_task("first", 3, 1.0, split="none"), by=factories.owner())

    owner = drive(backend, owner.pk)
    agent = drive(backend, agent.pk)

    assert (owner.state, agent.state) == ("succeeded", "succeeded"), agent.message
    extras = {p: agent.pods[p] for p in ("scan-w1", "scan-w2")}
    assert all(p["phase"] == "succeeded" for p in extras.values())
    assert max(p["attempts"] for p in extras.values()) >= 2
    assert agent.pods["scan-w0"]["attempts"] == 1
    assert units(agent) == list(range(36))


def test_a_kill_for_memory_is_retried_with_the_retry_memory_and_succeeds(
    lab: Lab, argo_settings: Settings
) -> None:
    """C7: C8: the attempt's report counts the kill; one retry at the retry memory."""
    backend = argo_settings()
    run = drive(backend, submit(backend, grow_task(600)).pk)
    assert run.state == "succeeded", run.message
    assert run.oom_kills == {"grow-w0": [0]}


def test_a_second_kill_for_memory_fails_the_run_naming_the_retry_memory(
    lab: Lab, argo_settings: Settings
) -> None:
    """C7: killed again at the retry memory: the run fails, its message names that memory."""
    backend = argo_settings()
    run = drive(backend, submit(backend, grow_task(900)).pk)
    assert run.state == "failed"
    assert "grow-w0 was killed for memory again at the retry memory of 0.75 GiB" in run.message
    assert run.oom_kills == {"grow-w0": [0, 1]}


def test_a_kill_after_a_preemption_that_followed_a_kill_does_not_count(
    lab: Lab, argo_settings: Settings
) -> None:
    """K9: C7: attempt 1 (retry memory) is preempted; attempt 2 gets the first memory and is
    killed again, which does not fail the run; attempt 3 has the retry memory and succeeds."""
    backend = argo_settings()
    run = submit(backend, grow_task(600, hold=3.0))
    drive(
        backend,
        run.pk,
        lambda r: (
            r.pods.get("grow-w0", {}).get("attempts") == 2
            and r.pods["grow-w0"]["phase"] == "running"
        ),
    )
    lab.preempt(run.workflow_name, "grow-w0")

    run = drive(backend, run.pk)

    assert run.state == "succeeded", run.message
    assert run.oom_kills == {"grow-w0": [0, 2]}
    assert run.pods["grow-w0"]["attempts"] == 4


def test_a_workflow_deleted_by_its_ttl_before_its_end_was_seen_resolves_from_the_store(
    lab: Lab, argo_settings: Settings
) -> None:
    """C10: C9: the states stored while it ran and the merge marker decide: the split task is
    done, the run succeeded."""
    backend = argo_settings()
    run = submit(backend, sleep_task("scan", 4, 0.3, split=2))
    drive(backend, run.pk, lambda r: r.state == "running")
    wait_for(lambda: backend.status(run.workflow_name).phase is WorkflowPhase.SUCCEEDED, timeout=60)
    lab.expire(run.workflow_name)

    run = drive(backend, run.pk)

    assert run.state == "succeeded", run.message
    assert run.tasks.get(task_id="scan").state == "done"


def test_after_a_ttl_deletion_only_undetermined_tasks_fail(
    lab: Lab, argo_settings: Settings
) -> None:
    """C10: the split task with its marker is done; the command after it, last seen waiting,
    has no evidence: it fails and the message says why."""
    backend = argo_settings()
    after = {
        "id": "after",
        "type": "command",
        "settings": {"args": ["true"]},
        "inputs": {"scan": "scan"},
    }
    run = submit(backend, sleep_task("scan", 4, 0.3, split=2), after)
    drive(backend, run.pk, lambda r: r.tasks.get(task_id="scan").state == "running")
    wait_for(lambda: backend.status(run.workflow_name).phase is WorkflowPhase.SUCCEEDED, timeout=60)
    lab.expire(run.workflow_name)

    run = drive(backend, run.pk)

    assert run.state == "failed"
    assert run.tasks.get(task_id="scan").state == "done"
    assert "task 'after': its workflow is gone and its end was not seen" in run.message


@pytest.mark.parametrize("outcome", ["succeeded", "failed"])
def test_a_reserved_runs_node_is_released_at_its_end(
    lab: Lab, argo_settings: Settings, outcome: str
) -> None:
    """C5: C19: B4: B5: the run's pods ran on its reserved node; after the end the node has
    neither the taint nor the label."""
    backend = argo_settings()
    task = (
        sleep_task("scan", 3, 0.2, split=1)
        if outcome == "succeeded"
        else {
            "id": "bad",
            "type": "fail",
            "settings": {"units": 2, "fail_unit": 1},
            "split": "none",
        }
    )
    reserved = lab.workers[1]
    run = submit(backend, task, reserve=reserved)
    assert lab.node(reserved)["metadata"]["labels"]["simrun/reserved"] == run.pk

    run = drive(backend, run.pk)

    assert run.state == outcome, run.message
    assert {p["node"] for p in run.pods.values() if p["node"]} == {reserved}
    node = lab.node(reserved)
    assert "simrun/reserved" not in node["metadata"].get("labels", {})
    assert not [t for t in node["spec"].get("taints") or [] if t["key"] == "simrun/reserved"]


def test_the_workflow_is_stopped_after_success_while_extras_are_still_gated(
    lab: Lab, argo_settings: Settings
) -> None:
    """C2: C5: K10: K12: the coordinator merges, and the marker it wrote in the store is seen
    by the controller at once; its extras never got a node (two nodes reserved elsewhere, the
    third taken at once by a pod above them); once the run succeeded the workflow is stopped
    and the gated pods are gone."""
    backend = argo_settings()
    run, _ = create_run(
        identity=factories.agent(),
        workflow={
            "name": "gated",
            "tasks": [sleep_task("scan", 6, 0.3, split=3, coordinator_merges=True)],
        },
        sources=[],
        nodes=backend.nodes(),
    )
    first, *others = lab.workers
    for node in others:
        backend.reserve(node, "elsewhere")
    submit_run(run_id=run.pk, backend=backend)
    wait_for(lambda: pod_phase(backend, run, "scan-w0") is PodPhase.RUNNING, timeout=60)
    lab.block(first, "simrun-owner-extra")

    run = drive(backend, run.pk)

    assert run.state == "succeeded", run.message
    assert run.merge_pending == {}  # the marker was there when the coordinator had ended
    assert pod_phase(backend, run, "scan-w1") is PodPhase.SKIPPED
    assert backend.status(run.workflow_name).phase is WorkflowPhase.STOPPED
    assert lab.pod(run.workflow_name, "scan-w1") is None
    assert lab.pod(run.workflow_name, "scan-w2") is None
    for node in others:
        backend.unreserve(node, "elsewhere")


def test_a_restarted_service_continues_a_run_it_did_not_start(
    lab: Lab, argo_settings: Settings
) -> None:
    """C15: the controller keeps nothing in memory: a new backend (a new process) carries on."""
    backend = argo_settings()
    run = submit(backend, sleep_task("scan", 6, 0.5))
    drive(backend, run.pk, lambda r: r.state == "running")
    backend.close()

    run = drive(lab.new_backend(), run.pk)

    assert run.state == "succeeded", run.message
    assert units(run) == list(range(6))
