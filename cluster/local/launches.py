"""A run's launch as the local backend keeps it, and the pods it is made of.

The launch is stored as JSON in the run's pods directory at submission, so any process (a
restarted service, a Celery worker) can advance the run from the store alone. The pods of a
task follow the same names and roles as on the cluster:

- a `command` task or an unsplit plugin task: one pod `<task>`;
- a split task: the coordinator `<task>-w0` (base priority), extra workers `<task>-w1`…
  (extra priority, their failures ignored) and the merge `<task>-merge`, which waits for the
  coordinator only and is absent when the coordinator merges itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from runs.plans import PodShape, TaskPlan, merge_pod, worker_pod
from runs.ports import RunLaunch, TaskLaunch

PodKind = Literal["command", "exec", "coordinator", "extra", "merge"]


@dataclass(frozen=True)
class PodSpec:
    """One pod of a run: what it runs, at which priority, after what."""

    name: str
    task_id: str
    kind: PodKind
    priority_class: str
    index: int  # its place in the run, for first-come order among equal priorities
    worker: str  # SIMRUN_WORKER: the pod name

    @property
    def extra(self) -> bool:
        """Whether this is an extra worker: preemptible, its failure never fails the task."""
        return self.kind == "extra"

    @property
    def role(self) -> str:
        """SIMRUN_ROLE of a worker."""
        return "extra" if self.extra else "base"


def pod_shape(task: TaskLaunch, spec: PodSpec) -> PodShape:
    """The shape the plan gives this pod: the merge's, an extra worker's own, else the
    coordinator's (or the unsplit pod's)."""
    return task.plan.shape_of_pod(task_id=task.task_id, pod=spec.name)


def task_pods(task: TaskLaunch, start: int = 0) -> list[PodSpec]:
    """The pods of one task, numbered from `start`."""
    plan = task.plan
    base, extra = plan.base_priority, plan.extra_priority
    tid = task.task_id
    if task.command is not None or not task.splittable:
        kind: PodKind = "command" if task.command is not None else "exec"
        return [PodSpec(tid, tid, kind, base, start, tid)]
    coordinator = worker_pod(tid, 0)
    pods = [PodSpec(coordinator, tid, "coordinator", base, start, coordinator)]
    for i in range(1, max(plan.pods, 1)):
        name = worker_pod(tid, i)
        pods.append(PodSpec(name, tid, "extra", extra, start + i, name))
    if not plan.coordinator_merges:
        name = merge_pod(tid)
        pods.append(PodSpec(name, tid, "merge", base, start + len(pods), name))
    return pods


def run_pods(launch: RunLaunch) -> list[PodSpec]:
    """Every pod of a run, in the order of its tasks."""
    found: list[PodSpec] = []
    for task in launch.tasks:
        found.extend(task_pods(task, len(found)))
    return found


def launch_to_json(launch: RunLaunch) -> dict[str, Any]:
    """The stable JSON form of a launch."""
    return {
        "run_id": launch.run_id,
        "workflow_name": launch.workflow_name,
        "environment": launch.environment,
        "group": launch.group,
        "reserve": launch.reserve,
        "grace_s": launch.grace_s,
        "tasks": [
            {
                "task_id": t.task_id,
                "type": t.type,
                "splittable": t.splittable,
                "dependencies": list(t.dependencies),
                "plan": t.plan.to_json(),
                "command": None if t.command is None else list(t.command),
                "image": t.image,
                "env": dict(t.env),
            }
            for t in launch.tasks
        ],
    }


def launch_from_json(data: dict[str, Any]) -> RunLaunch:
    """The launch of its JSON form (`launch_to_json`)."""
    tasks = tuple(
        TaskLaunch(
            task_id=t["task_id"],
            type=t["type"],
            splittable=bool(t["splittable"]),
            dependencies=tuple(t["dependencies"]),
            plan=TaskPlan.from_json(t["plan"]),
            command=None if t.get("command") is None else tuple(t["command"]),
            image=t.get("image"),
            env=dict(t.get("env") or {}),
        )
        for t in data["tasks"]
    )
    return RunLaunch(
        run_id=data["run_id"],
        workflow_name=data["workflow_name"],
        tasks=tasks,
        environment=data["environment"],
        group=data.get("group", ""),
        reserve=data.get("reserve"),
        grace_s=int(data.get("grace_s", 30)),
    )
