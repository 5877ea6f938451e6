"""Small runs for the local backend's tests: shapes, tasks, launches, fake environments."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from cluster.backend import RunLaunch, TaskLaunch
from cluster.local.attempts import ProcessId, read_attempts
from runs.plans import PodShape, TaskPlan

PY = sys.executable
NODE = "test-node"


def shape(
    cores: float = 1, memory_gb: float = 0.5, retry_memory_gb: float = 0.0, processes: int = 1
) -> PodShape:
    return PodShape(
        cores=cores,
        memory_gb=memory_gb,
        processes=processes,
        per_worker_gb=0.25,
        retry_memory_gb=retry_memory_gb,
        retry_per_worker_gb=0.5 if retry_memory_gb else 0.0,
    )


def command_task(
    task_id: str,
    code: str,
    *,
    deps: Sequence[str] = (),
    pod: PodShape | None = None,
    tier: str = "agent",
) -> TaskLaunch:
    """A `command` task running `python -c code`."""
    plan = TaskPlan(1, pod or shape(), f"simrun-{tier}", f"simrun-{tier}-extra")
    return TaskLaunch(
        task_id, "command", False, tuple(deps), plan, command=(PY, "-c", textwrap.dedent(code))
    )


def split_task(
    task_id: str,
    pods: int,
    *,
    deps: Sequence[str] = (),
    pod: PodShape | None = None,
    tier: str = "agent",
    coordinator_merges: bool = False,
    task_type: str = "sleep",
    extras: Sequence[PodShape] = (),
    merge: PodShape | None = None,
) -> TaskLaunch:
    """A split task; without `extras` every worker has the shape `pod`, without `merge` the
    merge too."""
    plan = TaskPlan(
        pods,
        pod or shape(),
        f"simrun-{tier}",
        f"simrun-{tier}-extra",
        coordinator_merges,
        extra_shapes=tuple(extras),
        merge_shape=merge,
    )
    return TaskLaunch(task_id, task_type, True, tuple(deps), plan)


def launch(
    run_id: str, *tasks: TaskLaunch, environment: str = "service", grace_s: int = 1
) -> RunLaunch:
    return RunLaunch(run_id, f"wf-{run_id}", tuple(tasks), environment, grace_s=grace_s)


def pod_processes(store: Path, run_id: str, pod: str) -> list[ProcessId]:
    """The supervisor and pod process ids of every attempt of a pod."""
    found = []
    for attempt in read_attempts(store / "runs" / run_id / "pods" / pod):
        found += [p for p in (attempt.supervisor, attempt.child) if p is not None]
    return found


def fake_environment(store: Path, name: str, scripts: dict[str, str]) -> str:
    """An environment whose console scripts are the given Python programs."""
    bin_dir = store / "environments" / name / "bin"
    bin_dir.mkdir(parents=True)
    for script, body in scripts.items():
        path = bin_dir / script
        path.write_text(f"#!{PY}\n" + textwrap.dedent(body))
        path.chmod(0o755)
    return name
