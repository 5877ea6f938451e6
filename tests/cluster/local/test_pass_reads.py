"""A pass of the local backend reads only the runs whose files changed: a run whose directories
kept their times (older than the racy window) is taken as the pass before read it, but the
supervisors of its running attempts are checked every pass (one killed with its pod writes
nothing), and a halted run is always read."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.local.backend import LocalBackend
from cluster.local.run_files import RunFiles
from runs.ports import PodPhase
from tests.cluster.local.builders import command_task, launch, pod_processes, shape
from tests.waiting import wait_for

OLD_NS = 1_000 * 10**9  # long before any read: past the racy window


def age(store: Path, run_id: str) -> None:
    """Every directory of the run's pods as if written long ago."""
    for root, directories, _ in os.walk(store / "runs" / run_id / "pods"):
        for name in [".", *directories]:
            os.utime(os.path.join(root, name), ns=(OLD_NS, OLD_NS))


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The runs whose pods' files a pass read, in order."""
    made: list[str] = []
    real = RunFiles.views

    def counted(self: RunFiles, launch_: object) -> object:
        made.append(self.run_id)
        return real(self, launch_)  # type: ignore[arg-type]

    monkeypatch.setattr(RunFiles, "views", counted)
    return made


@pytest.fixture
def backend(store: Path) -> Iterator[LocalBackend]:
    made = LocalBackend(store, cores=2, memory_gb=2, kill_margin_s=1.0)
    yield made
    made.close()


def test_a_run_whose_files_did_not_change_is_not_read_again(
    backend: LocalBackend, store: Path, reads: list[str]
) -> None:
    backend.submit(launch("r1", command_task("t", "pass", pod=shape(cores=64))))
    age(store, "r1")
    backend.tick()
    reads.clear()

    backend.tick()

    assert reads == []
    assert backend.status("wf-r1").pods["t"].phase is PodPhase.QUEUED


def test_a_run_whose_files_changed_is_read_at_the_next_pass(
    backend: LocalBackend, store: Path, reads: list[str]
) -> None:
    """A cancel marks its pods' directory: read, and read at every pass while halted."""
    backend.submit(launch("r1", command_task("t", "pass", pod=shape(cores=64))))
    age(store, "r1")
    backend.tick()
    backend.cancel("wf-r1")
    reads.clear()

    backend.tick()

    assert reads and set(reads) == {"r1"}


def test_a_supervisor_killed_with_its_pod_is_found_though_no_file_changed(
    backend: LocalBackend, store: Path, reads: list[str]
) -> None:
    backend.submit(launch("r1", command_task("t", "import time; time.sleep(120)")))
    wait_for(lambda: backend.status("wf-r1").pods["t"].phase is PodPhase.RUNNING, what="a pod")
    age(store, "r1")
    backend.tick()
    reads.clear()
    backend.tick()
    assert reads == []  # unchanged: its supervisor checked, its files not read
    for process in pod_processes(store, "r1", "t"):
        os.kill(process.pid, signal.SIGKILL)
    wait_for(lambda: not any(p.alive() for p in pod_processes(store, "r1", "t")), what="the kill")

    backend.tick()

    assert reads, "the run was read again once its attempt was lost"
    assert backend.status("wf-r1").pods["t"].attempts == 2  # recorded lost, then retried
