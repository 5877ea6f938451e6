"""What the standby tests share: a backend that keeps standbys, runs of the `probe` type, and
ways to find the standbys and what a pod saw."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil

from cluster.local.atomic_files import read_json
from cluster.local.backend import LocalBackend
from cluster.local.doorbell import BELL_FILE, ring
from cluster.local.standby_files import USED_FILE, StandbyFiles, files_of
from runs.ports import WorkflowPhase
from tests.cluster.local.builders import launch, shape, split_task
from tests.cluster.local.probe_environment import Probe
from tests.cluster.local.test_harness_pods import write_task
from tests.waiting import wait_for

POD = "p-w0"


def standby_dir(backend: LocalBackend, environment: str) -> Path:
    return backend.state / "standby" / environment


def want_standby(backend: LocalBackend, environment: str) -> None:
    """As if a pod of `environment` had just been launched (and the doorbell rung, as a
    launch's run rings it): the loop keeps a standby for it."""
    marker = standby_dir(backend, environment) / USED_FILE
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    ring(backend.state / BELL_FILE)


def imported_standby(backend: LocalBackend, environment: str) -> StandbyFiles:
    """A claimable standby of `environment` whose pod process has done its imports."""

    def found() -> StandbyFiles | None:
        for path in standby_dir(backend, environment).glob("*.imported"):
            files = files_of(path)
            if files is not None and files.ready.exists():
                return files
        return None

    standby = wait_for(found, timeout=60, what=f"a standby of {environment}")
    assert standby is not None
    return standby


def live_standbys(backend: LocalBackend, environment: str) -> list[int]:
    """The pids of the standby supervisors of `environment` that run, by their files."""
    pids = []
    for path in standby_dir(backend, environment).glob("*.json"):
        with contextlib.suppress(ValueError):
            data = read_json(path)
            if data is not None and psutil.pid_exists(int(data["pid"])):
                pids.append(int(data["pid"]))
    return pids


def standby_processes(root: Path) -> list[psutil.Process]:
    """Every live process started for a standby under `root` (supervisors and pods)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        line = " ".join(proc.info.get("cmdline") or [])
        ours = "standby_supervisor" in line or "simrun_harness.standby" in line
        if ours and str(root) in line and proc.info["status"] != "zombie":
            found.append(proc)
    return found


def run_probe(
    backend: LocalBackend, run_id: str, environment: str = "probe", **settings: Any
) -> str:
    """Submit a run of one `probe` task of one pod that merges itself; its workflow."""
    write_task(backend, run_id, "p", "probe", **settings)
    task = split_task("p", 1, task_type="probe", coordinator_merges=True, pod=shape(memory_gb=0.75))
    return backend.submit(launch(run_id, task, environment=environment))


def finish(backend: LocalBackend, name: str) -> WorkflowPhase:
    """Wait for the run to end; its phase."""
    ended = (WorkflowPhase.SUCCEEDED, WorkflowPhase.FAILED, WorkflowPhase.STOPPED)
    wait_for(lambda: backend.status(name).phase in ended, timeout=60, what=f"{name} to end")
    return backend.status(name).phase


def attempt_dir(backend: LocalBackend, run_id: str) -> Path:
    return backend.store.run(run_id).pods / POD / "0"


def adopted(backend: LocalBackend, run_id: str) -> bool:
    """Whether the run's pod was handed to a standby (rather than started fresh)."""
    child = read_json(attempt_dir(backend, run_id) / "child.json")
    return child is not None and "adopted" in child


def seen(backend: LocalBackend, run_id: str) -> list[dict[str, Any]]:
    """What each unit's process saw (the probe's merged output)."""
    out = backend.store.run(run_id).task("p").out / "seen.json"
    found: list[dict[str, Any]] = json.loads(out.read_text())
    return found


@contextlib.contextmanager
def held_at_the_gate(probe: Probe) -> Iterator[Callable[[], int]]:
    """While it lasts, an import of the probe plugin waits at its gate; it gives a function
    that waits until one does and returns that process's pid. Afterwards the gate is open
    (the process waiting there goes on) and gone (no later import waits)."""
    os.mkfifo(probe.gate)
    held = Path(f"{probe.gate}.held")

    def waiting() -> int:
        pid = wait_for(
            lambda: held.exists() and held.read_text().strip(), timeout=60, what="the gate"
        )
        return int(pid)

    try:
        yield waiting
    finally:
        try:
            gate = os.open(probe.gate, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # nobody waits there (any more)
            probe.gate.unlink()
        else:
            probe.gate.unlink()
            os.write(gate, b"go")
            os.close(gate)
        held.unlink(missing_ok=True)
