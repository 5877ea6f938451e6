"""The supervisor of a local pod sees its pod end at once, not at its next memory poll."""

from __future__ import annotations

from collections.abc import Callable

from cluster.local.backend import LocalBackend
from runs.ports import WorkflowPhase
from tests.cluster.local.builders import command_task, launch
from tests.waiting import wait_for

AN_HOUR = 3600.0


def test_a_pod_s_end_is_seen_at_once_by_a_supervisor_that_polls_once_an_hour(
    make_backend: Callable[..., LocalBackend],
) -> None:
    """The supervisor waits on the pod process's pidfd between its polls: with polls an hour
    apart (memory, signals) a pod that runs a while still ends its run, and the next starts."""
    backend = make_backend(poll_s=AN_HOUR, memory_poll_s=AN_HOUR)
    backend.subscribe(lambda: None)  # starts the loop the supervisors' doorbell wakes
    first = command_task("first", "import time; time.sleep(0.5)")
    second = command_task("second", "pass", deps=["first"])
    name = backend.submit(launch("r1", first, second))
    wait_for(lambda: (backend.store.run("r1").pods / ".ended").exists(), timeout=60)
    assert backend.status(name).phase is WorkflowPhase.SUCCEEDED
