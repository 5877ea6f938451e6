"""Admission on the machine: priorities, preemption of extra workers, reservations."""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from cluster.local.backend import LocalBackend
from cluster.local.machine import SCRATCH_MARGIN_GB, SCRATCH_MARGIN_SHARE
from runs.ports import PodPhase, WorkflowPhase
from tests.cluster.local.builders import (
    NODE,
    command_task,
    fake_environment,
    launch,
    shape,
    split_task,
)
from tests.waiting import wait_for


def wait_file(path: Path) -> str:
    """A program that runs until `path` exists (a pod the test releases)."""
    return f"""
    import os, pathlib, sys, time
    if os.environ["SIMRUN_ATTEMPT"] != "0":
        sys.exit(0)
    while not pathlib.Path({str(path)!r}).exists():
        time.sleep(0.02)
    """


def phase(backend: LocalBackend, workflow: str, pod: str) -> PodPhase:
    return backend.status(workflow).pods[pod].phase


# A fake harness: workers run until SIGTERM on their first attempt, then finish at once.
WORKERS = {
    "simrun-worker": """
    import os, signal, sys, time
    if os.environ["SIMRUN_ATTEMPT"] != "0" or os.environ["SIMRUN_ROLE"] == "base":
        sys.exit(0 if os.environ["SIMRUN_ROLE"] == "extra" else time.sleep(120))
    signal.pause()
    """,
    "simrun-merge": "pass\n",
}


def test_a_base_pod_preempts_an_extra_worker_of_lower_priority(
    backend: LocalBackend, store: Path, tmp_path: Path
) -> None:
    """K2, B1: the extra worker is stopped with SIGTERM (143), reported preempted while it
    waits, and retried once there is room again; the coordinator keeps running."""
    env = fake_environment(store, "fake", WORKERS)
    agent = backend.submit(launch("agent", split_task("scan", 2), environment=env))
    wait_for(lambda: phase(backend, agent, "scan-w1") is PodPhase.RUNNING)
    assert phase(backend, agent, "scan-w0") is PodPhase.RUNNING

    release = tmp_path / "release"
    person = command_task("urgent", wait_file(release), tier="person")
    urgent = backend.submit(launch("person", person))

    wait_for(lambda: phase(backend, urgent, "urgent") is PodPhase.RUNNING)
    status = backend.status(agent)
    assert status.pods["scan-w1"].phase is PodPhase.PREEMPTED
    [failure] = status.failures["scan-w1"]
    assert (failure.exit_code, failure.oom_killed) == (143, False)
    assert failure.message == "pod deleted: preempted by urgent of run person (exit code 143)"
    assert status.pods["scan-w0"].phase is PodPhase.RUNNING
    assert status.pods["scan-w0"].attempts == 1

    release.touch()
    wait_for(lambda: phase(backend, agent, "scan-w1") is PodPhase.SUCCEEDED)
    assert backend.status(agent).pods["scan-w1"].attempts == 2
    assert backend.status(urgent).phase is WorkflowPhase.SUCCEEDED


def test_a_pod_waits_for_free_cores_and_higher_priority_starts_first(
    make_backend: Callable[..., LocalBackend], tmp_path: Path
) -> None:
    """Pods queue for the machine; when it frees, the higher priority starts first."""
    backend = make_backend(cores=1)
    release_first, release_high = tmp_path / "first", tmp_path / "high"
    first = backend.submit(launch("first", command_task("hold", wait_file(release_first))))
    wait_for(lambda: phase(backend, first, "hold") is PodPhase.RUNNING)
    low = backend.submit(launch("low", command_task("t", "pass", tier="agent")))
    high = backend.submit(launch("high", command_task("t", wait_file(release_high), tier="owner")))
    assert phase(backend, low, "t") is PodPhase.QUEUED
    assert phase(backend, high, "t") is PodPhase.QUEUED

    release_first.touch()
    wait_for(lambda: phase(backend, high, "t") is PodPhase.RUNNING)
    assert phase(backend, low, "t") is PodPhase.QUEUED

    release_high.touch()
    wait_for(lambda: backend.status(low).phase is WorkflowPhase.SUCCEEDED)


def test_a_reservation_evicts_other_runs_and_keeps_them_off_until_released(
    backend: LocalBackend, tmp_path: Path
) -> None:
    """K4: the reserved node evicts the pods of other runs and starts only the run's own."""
    release = tmp_path / "release"
    other = backend.submit(launch("other", command_task("t", wait_file(release))))
    wait_for(lambda: phase(backend, other, "t") is PodPhase.RUNNING)

    backend.reserve(NODE, "mine")
    assert backend.nodes()[0].reserved_by == "mine"
    wait_for(lambda: phase(backend, other, "t") is PodPhase.PREEMPTED)
    reason = backend.status(other).failures["t"][0].message
    assert reason == "pod deleted: the node is reserved for run mine (exit code 143)"

    mine = backend.submit(launch("mine", command_task("t", "pass")))
    wait_for(lambda: backend.status(mine).phase is WorkflowPhase.SUCCEEDED)
    assert phase(backend, other, "t") is PodPhase.PREEMPTED

    backend.unreserve(NODE, "mine")
    assert backend.nodes()[0].reserved_by is None
    wait_for(lambda: backend.status(other).phase is WorkflowPhase.SUCCEEDED)


def test_unreserving_keeps_another_runs_reservation(backend: LocalBackend) -> None:
    backend.reserve(NODE, "a")
    backend.unreserve(NODE, "b")
    assert backend.nodes()[0].reserved_by == "a"


def test_an_unknown_node_cannot_be_reserved(backend: LocalBackend) -> None:
    with pytest.raises(KeyError):
        backend.reserve("elsewhere", "r1")
    with pytest.raises(KeyError):
        backend.unreserve("elsewhere", "r1")


def test_the_machine_is_one_node_and_running_pods_are_its_placements(
    backend: LocalBackend, tmp_path: Path
) -> None:
    """B12: placements are the live pods of runs, with their requests."""
    assert [(n.name, n.cores, n.memory_gb) for n in backend.nodes()] == [(NODE, 2.0, 4.0)]
    release = tmp_path / "release"
    task = command_task("t", wait_file(release), pod=shape(cores=1.5, memory_gb=0.75))
    name = backend.submit(launch("r1", task))
    wait_for(lambda: phase(backend, name, "t") is PodPhase.RUNNING)

    [placement] = backend.placements()
    assert (placement.run_id, placement.task_id, placement.pod, placement.node) == (
        "r1",
        "t",
        "t",
        NODE,
    )
    assert (placement.cores, placement.memory_gb) == (1.5, 0.75)
    release.touch()
    wait_for(lambda: backend.placements() == [])


def test_the_node_offers_the_free_disk_under_its_state_as_scratch(
    make_backend: Callable[..., LocalBackend], store: Path
) -> None:
    """The planner checks a task's scratch against it: the free disk less a margin, measured
    where the pods' scratch directories live (or as configured)."""
    [node] = make_backend().nodes()
    free = shutil.disk_usage(store).free / 1024**3
    margin = max(SCRATCH_MARGIN_GB, free * SCRATCH_MARGIN_SHARE)
    assert node.scratch_gb is not None
    assert abs(node.scratch_gb - math.floor(free - margin)) <= 1  # others write meanwhile
    assert make_backend(scratch_gb=7.0).nodes()[0].scratch_gb == 7.0


def test_a_pod_larger_than_the_machine_waits_and_says_why(backend: LocalBackend) -> None:
    name = backend.submit(launch("r1", command_task("huge", "pass", pod=shape(cores=8))))
    status = backend.status(name).pods["huge"]
    assert status.phase is PodPhase.QUEUED
    assert status.message == f"needs 8 cores and 0.5 GiB; node {NODE} has 2 cores and 4 GiB"
