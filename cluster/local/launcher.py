"""Starting one attempt of a pod: its command, its environment, its supervisor.

The pod's environment is built from scratch (a few variables of the service's such as HOME
and the locale, never its secrets), plus the SIMRUN_* variables the harness reads and the
task's own. PATH starts with the `bin` of the run's environment, so `simrun-worker` and the
model's tools are the environment's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cluster.local.atomic_files import write_json
from cluster.local.attempts import ATTEMPT_FILE, SUPERVISOR_FILE, SUPERVISOR_LOG, ProcessId
from cluster.local.launches import PodSpec
from runs.plans import PodShape
from runs.ports import RunLaunch, TaskLaunch
from simrun_harness.pod_env import pod_env as pod_env_of_harness

SERVICE_ENVIRONMENT = "service"  # run in the service's own Python environment
REPO_ROOT = Path(__file__).resolve().parents[2]
PASSED_THROUGH = ("HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")
HARNESS_KINDS = ("exec", "coordinator", "extra", "merge")  # pods that run a harness script
COMMANDS = {
    "exec": ["simrun-exec"],
    "coordinator": ["simrun-worker"],
    "extra": ["simrun-worker"],
    "merge": ["simrun-merge"],
}

_children: dict[int, subprocess.Popen[bytes]] = {}
# The loop's thread reaps while a caller's thread starts attempts: without it `reap` could
# iterate `_children` while `start_attempt` adds to it ("dict changed size during iteration").
_children_lock = threading.Lock()


@dataclass(frozen=True)
class PodPlace:
    """Where an attempt runs, as directories."""

    run_dir: Path
    task_dir: Path
    snapshots_dir: Path
    scratch: Path
    bin_dir: Path


def environment_bin(environments: Path, environment: str) -> Path:
    """The `bin` directory of a run's environment (the service's for `service`)."""
    if environment == SERVICE_ENVIRONMENT:
        return Path(sys.executable).parent
    return environments / environment / "bin"


def base_env(bin_dir: Path) -> dict[str, str]:
    """What every pod process of the environment `bin_dir` gets, before its attempt's
    SIMRUN_* variables and its task's own: a few of the service's, PATH, unbuffered output.
    A standby of the environment is started with exactly this (cluster/local/standby.py)."""
    env = {k: os.environ[k] for k in PASSED_THROUGH if k in os.environ}
    env.update(
        PATH=os.pathsep.join([str(bin_dir), os.environ.get("PATH", "/usr/bin:/bin")]),
        PYTHONUNBUFFERED="1",
    )
    return env


def supervisor_env() -> dict[str, str]:
    """The environment of a supervisor: the service's, with this repository importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    return env


def pod_args(spec: PodSpec, task: TaskLaunch) -> list[str]:
    """What the pod runs: a command task's args, else the harness's console script."""
    if spec.kind == "command":
        assert task.command is not None
        return list(task.command)
    return list(COMMANDS[spec.kind])


def pod_env(
    launch: RunLaunch,
    task: TaskLaunch,
    spec: PodSpec,
    *,
    attempt: int,
    memory_gb: float,
    per_worker_gb: float,
    node: str,
    place: PodPlace,
    shape: PodShape,
    processes: int,
) -> dict[str, str]:
    """The environment of one attempt of a pod of `shape` (the plan's shape of this pod) at
    `memory_gb`, `per_worker_gb` and `processes` (the retry values after a kill for memory)."""
    return base_env(place.bin_dir) | pod_env_of_harness(
        run_id=launch.run_id,
        task_id=task.task_id,
        worker=spec.worker,
        attempt=attempt,
        run_dir=str(place.run_dir),
        task_dir=str(place.task_dir),
        scratch=str(place.scratch),
        snapshots_dir=str(place.snapshots_dir) if place.snapshots_dir.is_dir() else None,
        grace_s=launch.grace_s,
        cores=shape.cores,
        role=spec.role if spec.kind in ("coordinator", "extra") else None,
        coordinator_merges=task.plan.coordinator_merges,
        node=node,
        memory_limit_gb=memory_gb,
        memory_per_worker_gb=per_worker_gb,
        processes=processes,
        task_env=task.env,
    )


def start_attempt(
    directory: Path,
    *,
    attempt: int,
    args: list[str],
    env: dict[str, str],
    cwd: Path,
    cores: float,
    memory_gb: float,
    kill_after_s: float,
    poll_s: float,
    doorbell: Path | None = None,
    standby: Callable[[Path, Mapping[str, str]], ProcessId | None] | None = None,
) -> ProcessId:
    """Write the attempt's file and start its supervisor, detached; the supervisor's id.
    The supervisor rings `doorbell` (`cluster.local.doorbell`) when the attempt has ended.
    `standby` (`Standbys.claim` of the environment) hands the attempt to a standby, whose
    supervisor becomes the attempt's; when it has none, a supervisor is started."""
    directory.mkdir(parents=True, exist_ok=True)  # a leftover of a failed start is reused
    cwd.mkdir(parents=True, exist_ok=True)
    spec = {
        "attempt": attempt,
        "args": args,
        "env": env,
        "cwd": str(cwd),
        "cores": cores,
        "memory_limit_gb": memory_gb,
        "kill_after_s": kill_after_s,
        "poll_s": poll_s,
        "doorbell": None if doorbell is None else str(doorbell),
        "created": time.time(),
    }
    write_json(directory / ATTEMPT_FILE, spec)
    claimed = None if standby is None else standby(directory, env)
    if claimed is not None:
        write_json(directory / SUPERVISOR_FILE, claimed.to_json())
        return claimed
    with open(directory / SUPERVISOR_LOG, "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "cluster.local.supervisor", str(directory)],
            env=supervisor_env(),
            cwd=directory,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    keep_reaped(process)
    identity = ProcessId.of(process.pid)
    write_json(directory / SUPERVISOR_FILE, identity.to_json())
    return identity


def keep_reaped(process: subprocess.Popen[bytes]) -> None:
    """Have `reap` collect the exit of a supervisor this process started."""
    with _children_lock:
        _children[process.pid] = process


def reap() -> None:
    """Collect the exit of supervisors this process started, so none stays a zombie."""
    with _children_lock:
        for pid, process in list(_children.items()):
            if process.poll() is not None:
                del _children[pid]
