"""Typed builders of the domain's plain values, shared by every suite: pod shapes, task plans,
resolved resources, task launches and run launches.

`Builders` holds the defaults a suite wants (the tier of its launches, whether a shape has a
retry memory, the workflow names); the backends' suites take theirs as `LOCAL` and `ARGO`
(re-exported by `tests/cluster/*/builders.py`), the others use the module's functions.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from runs.planner import plan_task
from runs.plans import Node, PodShape, ResolvedResources, TaskPlan
from runs.ports import RunLaunch, TaskLaunch
from runs.workflow import SplitMode

PY = sys.executable


@dataclass(frozen=True)
class Builders:
    """Shapes, plans, tasks and launches with one suite's defaults."""

    tier: str = "person"
    retry_memory_gb: float = 0.0  # a shape's default retry memory (0: none)
    memory_base_gb: float = 0.0
    workflow_prefix: str = "simrun-"

    def shape(
        self,
        cores: float = 1,
        memory_gb: float = 0.5,
        *,
        processes: int = 1,
        retry_memory_gb: float | None = None,
        gpus: int = 0,
        scratch_gb: float = 0.0,
    ) -> PodShape:
        """A pod of 0.25 GiB per worker; with a retry memory, 0.5 GiB per worker then."""
        retry = self.retry_memory_gb if retry_memory_gb is None else retry_memory_gb
        return PodShape(
            cores=cores,
            memory_gb=memory_gb,
            processes=processes,
            gpus=gpus,
            scratch_gb=scratch_gb,
            per_worker_gb=0.25,
            retry_memory_gb=retry,
            retry_per_worker_gb=0.5 if retry else 0.0,
            memory_base_gb=self.memory_base_gb,
        )

    def plan(
        self,
        pods: int = 1,
        pod: PodShape | None = None,
        *,
        tier: str | None = None,
        coordinator_merges: bool = False,
        extra_shapes: Sequence[PodShape] = (),
        merge_shape: PodShape | None = None,
    ) -> TaskPlan:
        """`pods` pods of the shape `pod`, at the tier's base and extra priority classes."""
        return plan(
            pods,
            pod or self.shape(),
            tier=tier or self.tier,
            coordinator_merges=coordinator_merges,
            extra_shapes=extra_shapes,
            merge_shape=merge_shape,
        )

    def command_task(
        self,
        task_id: str,
        code: str,
        *,
        deps: Sequence[str] = (),
        pod: PodShape | None = None,
        tier: str | None = None,
        image: str | None = None,
    ) -> TaskLaunch:
        """A `command` task running `python -c code`."""
        command = (PY, "-c", textwrap.dedent(code))
        task_plan = self.plan(1, pod, tier=tier)
        return TaskLaunch(
            task_id, "command", False, tuple(deps), task_plan, command=command, image=image
        )

    def split_task(
        self,
        task_id: str,
        pods: int,
        *,
        deps: Sequence[str] = (),
        pod: PodShape | None = None,
        tier: str | None = None,
        coordinator_merges: bool = False,
        task_type: str = "sleep",
        extras: Sequence[PodShape] = (),
        merge: PodShape | None = None,
    ) -> TaskLaunch:
        """A split task; without `extras` every worker has the shape `pod`, without `merge`
        the merge too (a plan stored before pods had shapes of their own)."""
        task_plan = self.plan(
            pods,
            pod,
            tier=tier,
            coordinator_merges=coordinator_merges,
            extra_shapes=extras,
            merge_shape=merge,
        )
        return TaskLaunch(task_id, task_type, True, tuple(deps), task_plan)

    def launch(
        self,
        run_id: str,
        *tasks: TaskLaunch,
        environment: str = "service",
        grace_s: int = 1,
        group: str = "",
        reserve: str | None = None,
    ) -> RunLaunch:
        """The launch of a run of `tasks`, its workflow named `<prefix><run id>`."""
        return RunLaunch(
            run_id,
            f"{self.workflow_prefix}{run_id}",
            tuple(tasks),
            environment,
            group=group,
            reserve=reserve,
            grace_s=grace_s,
        )


LOCAL = Builders(tier="agent", workflow_prefix="wf-")
ARGO = Builders(tier="person", retry_memory_gb=1.0, memory_base_gb=0.25)


def plan(
    pods: int = 1,
    shape: PodShape | None = None,
    *,
    tier: str = "person",
    coordinator_merges: bool = False,
    extra_shapes: Sequence[PodShape] = (),
    merge_shape: PodShape | None = None,
) -> TaskPlan:
    """A task plan of `pods` pods (one core, 1 GiB by default) at the tier's classes."""
    return TaskPlan(
        pods,
        shape or PodShape(cores=1, memory_gb=1),
        f"simrun-{tier}",
        f"simrun-{tier}-extra",
        coordinator_merges,
        extra_shapes=tuple(extra_shapes),
        merge_shape=merge_shape,
    )


def resources(
    *,
    cores: float = 1.0,
    base: float = 0.5,
    per_worker: float = 1.0,
    gpus: int = 0,
    processes: int | None = None,
    retry: float | None = None,
    scratch: float = 0.0,
    merge: float | None = None,
    merge_retry: float | None = None,
) -> ResolvedResources:
    """Resolved resources of a task, as `runs.resources.resolve` gives them."""
    return ResolvedResources(
        cores_per_process=cores,
        memory_base_gb=base,
        memory_per_worker_gb=per_worker,
        scratch_gb=scratch,
        gpus=gpus,
        processes=processes,
        retry_memory_per_worker_gb=retry,
        merge_memory_gb=merge,
        merge_retry_memory_gb=merge_retry,
    )


SCAN_SHAPE = PodShape(
    cores=4,
    memory_gb=8.5,
    processes=4,
    per_worker_gb=2.0,
    retry_memory_gb=12.5,
    retry_per_worker_gb=3.0,
    memory_base_gb=0.5,
)
"""A scan's coordinator: 4 processes of 2 GiB over 0.5 GiB, retried at 3 GiB each."""


def plan_on(
    nodes: list[Node],
    *,
    units: int | None = 100,
    split: SplitMode = "auto",
    need: ResolvedResources | None = None,
    reserve: str | None = None,
    splittable: bool = True,
    tier: str = "person",
    coordinator_merges: bool | None = False,
) -> TaskPlan:
    """The planner's plan of one task on `nodes` (defaults: 100 units, split auto, a
    person's tier, the merge pod kept)."""
    return plan_task(
        units=units,
        resources=need or resources(),
        nodes=nodes,
        split=split,
        tier=tier,
        reserve=reserve,
        coordinator_merges=coordinator_merges,
        splittable=splittable,
    )
