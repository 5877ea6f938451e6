"""Retries on the local backend: kills for memory, lost supervisors, the memory of a retry."""

from __future__ import annotations

import os
import signal

from cluster.local.backend import LocalBackend
from cluster.local.dag import OOM_MESSAGE
from runs.ports import AttemptFailure, PodPhase, WorkflowPhase
from tests.cluster.local.builders import command_task, launch, pod_processes, shape
from tests.waiting import wait_for

ALLOCATE_400_MB = """
import os, time
print("limit", os.environ["SIMRUN_MEMORY_LIMIT_GB"], "per worker",
      os.environ["SIMRUN_MEMORY_PER_WORKER_GB"], "processes", os.environ["SIMRUN_PROCESSES"],
      flush=True)
data = b"x" * (400 * 2**20)
if os.environ["SIMRUN_ATTEMPT"] == "0":
    time.sleep(120)
"""


def test_a_pod_over_its_memory_limit_is_killed_and_retried_with_the_retry_memory(
    backend: LocalBackend,
) -> None:
    """K6: a kill for memory reads `main: OOMKilled (exit code 137)`; M9: the next attempt
    gets the retry memory and memory per worker, and the fewer processes that fit it (the
    retry of 1 GiB at 0.5 GiB per worker holds 2 of the 4)."""
    pod = shape(memory_gb=0.2, retry_memory_gb=1.0, processes=4)
    task = command_task("big", ALLOCATE_400_MB, pod=pod)
    name = backend.submit(launch("r1", task))

    wait_for(lambda: backend.status(name).phase is WorkflowPhase.SUCCEEDED, timeout=60)

    status = backend.status(name)
    assert status.pods["big"].attempts == 2
    assert status.failures["big"] == [AttemptFailure(0, 137, True, OOM_MESSAGE)]
    first, second = backend.logs(name, "big")
    assert first.text == "limit 0.2 per worker 0.25 processes 4\n"
    assert second.text == "limit 1 per worker 0.5 processes 2\n"
    processes = pod_processes(backend.store.root, "r1", "big")
    assert len(processes) == 4  # a supervisor and a pod process per attempt
    wait_for(lambda: not any(p.alive() for p in processes), what="every process ended")


def test_a_pod_whose_supervisor_is_killed_is_retried_without_an_exit_code(
    backend: LocalBackend,
) -> None:
    """K7: an attempt without an exit code (its supervisor lost) is retried, as preempted;
    what was left of it is killed first."""
    code = "import os, time; os.environ['SIMRUN_ATTEMPT'] == '0' and time.sleep(120)"
    name = backend.submit(launch("r1", command_task("t", code)))
    wait_for(lambda: backend.status(name).pods["t"].phase is PodPhase.RUNNING)
    wait_for(lambda: len(pod_processes(backend.store.root, "r1", "t")) == 2)
    supervisor, child = pod_processes(backend.store.root, "r1", "t")

    os.kill(supervisor.pid, signal.SIGKILL)

    wait_for(lambda: backend.status(name).phase is WorkflowPhase.SUCCEEDED, timeout=30)
    status = backend.status(name)
    assert status.pods["t"].attempts == 2
    [failure] = status.failures["t"]
    assert (failure.attempt, failure.exit_code, failure.oom_killed) == (0, None, False)
    assert failure.message == "pod deleted: its supervisor is gone (no exit code)"
    assert not child.alive()


def test_exit_143_is_retried_as_a_preemption(backend: LocalBackend) -> None:
    """B1: the attempt after a SIGTERM exit is reported preempted while it waits."""
    code = "import os, sys; sys.exit(143 if os.environ['SIMRUN_ATTEMPT'] == '0' else 0)"
    name = backend.submit(launch("r1", command_task("t", code)))

    wait_for(lambda: backend.status(name).phase is WorkflowPhase.SUCCEEDED)
    status = backend.status(name)
    assert status.pods["t"].attempts == 2
    assert [f.exit_code for f in status.failures["t"]] == [143]
