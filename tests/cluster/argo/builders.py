"""Small launches of runs for the Argo backend's tests, and the files a service writes."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cluster.backend import RunLaunch, TaskLaunch
from runs.plans import PodShape, TaskPlan
from simrun_harness.layout import StorePaths

PY = sys.executable


def shape(
    cores: float = 1,
    memory_gb: float = 0.5,
    *,
    processes: int = 1,
    retry_memory_gb: float = 1.0,
    gpus: int = 0,
    scratch_gb: float = 0.0,
) -> PodShape:
    return PodShape(
        cores=cores,
        memory_gb=memory_gb,
        processes=processes,
        gpus=gpus,
        scratch_gb=scratch_gb,
        per_worker_gb=0.25,
        retry_memory_gb=retry_memory_gb,
        retry_per_worker_gb=0.5 if retry_memory_gb else 0.0,
        memory_base_gb=0.25,
    )


def plan(pods: int = 1, pod: PodShape | None = None, tier: str = "person", **more: Any) -> TaskPlan:
    return TaskPlan(pods, pod or shape(), f"simrun-{tier}", f"simrun-{tier}-extra", **more)


def split_task(
    task_id: str,
    pods: int,
    *,
    deps: Sequence[str] = (),
    pod: PodShape | None = None,
    tier: str = "person",
    coordinator_merges: bool = False,
    task_type: str = "sleep",
    extras: Sequence[PodShape] = (),
    merge: PodShape | None = None,
) -> TaskLaunch:
    """A split task; without `extras` every worker has the shape `pod`, without `merge` the
    merge too (a plan stored before pods had shapes of their own)."""
    more: dict[str, Any] = {"coordinator_merges": coordinator_merges}
    if extras:
        more["extra_shapes"] = tuple(extras)
    if merge is not None:
        more["merge_shape"] = merge
    return TaskLaunch(task_id, task_type, True, tuple(deps), plan(pods, pod, tier, **more))


def command_task(
    task_id: str,
    code: str,
    *,
    deps: Sequence[str] = (),
    pod: PodShape | None = None,
    tier: str = "person",
    image: str | None = None,
) -> TaskLaunch:
    """A `command` task running `python -c code`."""
    command = (PY, "-c", textwrap.dedent(code))
    return TaskLaunch(
        task_id, "command", False, tuple(deps), plan(1, pod, tier), command=command, image=image
    )


def launch(
    run_id: str,
    *tasks: TaskLaunch,
    environment: str = "service",
    grace_s: int = 1,
    group: str = "",
    reserve: str | None = None,
) -> RunLaunch:
    return RunLaunch(
        run_id,
        f"simrun-{run_id}",
        tuple(tasks),
        environment,
        group=group,
        reserve=reserve,
        grace_s=grace_s,
    )


def write_task(store: Path, run_id: str, task_id: str, type_name: str, **settings: Any) -> Path:
    """What the service writes before it submits: the task's `task.json`; its directory."""
    paths = StorePaths(store).run(run_id).task(task_id)
    paths.root.mkdir(parents=True, exist_ok=True)
    record = {"task": task_id, "type": type_name, "settings": settings, "inputs": {}}
    paths.task_file.write_text(json.dumps(record))
    return paths.root
