"""The planner's plain values: nodes, pod shapes, task plans, resolved resources, and the
names of a task's pods, which the planner, both backends, the controller and the pages share.

Each has a stable JSON form (`to_json` / `from_json`) because plans are stored in the run's
record and read back by the controller after a restart.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, NotRequired, TypedDict, cast


def worker_pod(task_id: str, index: int | str) -> str:
    """M1: worker `index` of a split task, `<task>-w<index>` (0: the coordinator, from 1 the
    extra workers); `index` may be an engine's placeholder for it."""
    return f"{task_id}-w{index}"


def merge_pod(task_id: str) -> str:
    """M1: the merge of a split task, `<task>-merge` (none when the coordinator merges)."""
    return f"{task_id}-merge"


def worker_index(task_id: str, pod: str) -> int | None:
    """The index of `pod` among the workers of task `task_id`; None for its merge, for an
    unsplit task's pod (named as the task) and for another task's pod."""
    index = pod.removeprefix(f"{task_id}-w")
    return int(index) if index != pod and index.isdigit() else None


def task_pods(task_id: str, *, splittable: bool, pods: int, coordinator_merges: bool) -> list[str]:
    """Every pod of a task, by name: an unsplit task's one pod is named as the task; a split
    task has `pods` workers, then its merge unless the coordinator merges."""
    if not splittable:
        return [task_id]
    names = [worker_pod(task_id, i) for i in range(pods)]
    return names if coordinator_merges else [*names, merge_pod(task_id)]


class PodShapeJson(TypedDict):
    """A `PodShape` as stored; a field added later is absent from older records."""

    cores: float
    memory_gb: float
    processes: NotRequired[int]
    gpus: NotRequired[int]
    scratch_gb: NotRequired[float]
    per_worker_gb: NotRequired[float]
    retry_memory_gb: NotRequired[float]
    retry_per_worker_gb: NotRequired[float]
    memory_base_gb: NotRequired[float]


class TaskPlanJson(TypedDict):
    """A `TaskPlan` as stored in `Task.plan`; older records lack the later fields."""

    pods: int
    shape: PodShapeJson
    base_priority: str
    extra_priority: str
    coordinator_merges: NotRequired[bool]
    nodes: NotRequired[list[str]]
    extra_shapes: NotRequired[list[PodShapeJson]]
    merge_shape: NotRequired[PodShapeJson | None]
    merge_node: NotRequired[str | None]


class ResourcesJson(TypedDict):
    """`ResolvedResources` as stored in `Task.resources`."""

    cores_per_process: float
    memory_base_gb: float
    memory_per_worker_gb: float
    scratch_gb: NotRequired[float]
    gpus: NotRequired[int]
    processes: NotRequired[int | None]
    retry_memory_per_worker_gb: NotRequired[float | None]
    source: NotRequired[dict[str, str]]  # field → where its value came from
    merge_memory_gb: NotRequired[float | None]
    merge_retry_memory_gb: NotRequired[float | None]


@dataclass(frozen=True)
class Node:
    """A server pods can run on, with what it can give to runs."""

    name: str
    cores: float
    memory_gb: float
    gpus: int = 0
    reserved_by: str | None = None
    scratch_gb: float | None = None
    """The local disk pods may ask for as scratch (ephemeral storage); None: not known, so
    not checked (a node value built before scratch was measured)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Node:
        return cls(**data)


@dataclass(frozen=True)
class ResolvedResources:
    """A task's resources after hint ← history ← workflow overrides."""

    cores_per_process: float
    memory_base_gb: float
    memory_per_worker_gb: float
    scratch_gb: float = 0.0
    gpus: int = 0
    processes: int | None = None
    retry_memory_per_worker_gb: float | None = None
    source: dict[str, str] = field(default_factory=dict)
    merge_memory_gb: float | None = None
    """What the merge pod needs (learned from merge reports); None: base + one worker."""
    merge_retry_memory_gb: float | None = None
    """The merge pod's memory after a kill for memory; None: the first plus a step."""

    def to_json(self) -> ResourcesJson:
        return cast(ResourcesJson, asdict(self))

    @classmethod
    def from_json(cls, data: ResourcesJson) -> ResolvedResources:
        return cls(**data)


@dataclass(frozen=True)
class PodShape:
    """What one pod asks for; requests equal limits."""

    cores: float
    memory_gb: float
    processes: int = 1
    gpus: int = 0
    scratch_gb: float = 0.0
    per_worker_gb: float = 0.5
    retry_memory_gb: float = 0.0
    retry_per_worker_gb: float = 0.0
    memory_base_gb: float = 0.0

    def to_json(self) -> PodShapeJson:
        return cast(PodShapeJson, asdict(self))

    @classmethod
    def from_json(cls, data: PodShapeJson) -> PodShape:
        return cls(**data)

    @property
    def retry_processes(self) -> int:
        """M9: the processes an attempt at the retry memory runs (the harness sizes its pool by
        (limit - base) ÷ memory per worker, so a retry capped by the node runs fewer)."""
        if self.retry_per_worker_gb <= 0:
            return self.processes
        room = (self.retry_memory_gb - self.memory_base_gb) / self.retry_per_worker_gb
        return max(1, min(self.processes, math.floor(room + 1e-9)))

    def fits(self, node: Node) -> bool:
        """Whether one pod of this shape, at its first and at its retry memory, fits `node`."""
        return (
            self.cores <= node.cores
            and self.memory_gb <= node.memory_gb
            and self.retry_memory_gb <= node.memory_gb
            and self.gpus <= node.gpus
            and (node.scratch_gb is None or self.scratch_gb <= node.scratch_gb)
        )


@dataclass(frozen=True)
class TaskPlan:
    """How a task runs: how many pods of which shape, at which priorities.

    `shape` is the coordinator's (or the unsplit pod's), `extra_shapes` those of the extra
    workers `<task>-w1`… in order, `merge_shape` the merge pod's (None when the coordinator
    merges or the task is unsplit). `nodes` names the node each worker pod was sized for,
    `merge_node` the merge's.
    """

    pods: int
    shape: PodShape
    base_priority: str
    extra_priority: str
    coordinator_merges: bool = False
    nodes: tuple[str, ...] = ()
    extra_shapes: tuple[PodShape, ...] = ()
    merge_shape: PodShape | None = None
    merge_node: str | None = None

    def __post_init__(self) -> None:
        if not self.extra_shapes and self.pods > 1:  # built without: every worker in `shape`
            object.__setattr__(self, "extra_shapes", (self.shape,) * (self.pods - 1))
        if len(self.extra_shapes) != max(0, self.pods - 1):
            raise ValueError(f"a plan of {self.pods} pods has {len(self.extra_shapes)} extras")

    @property
    def worker_shapes(self) -> tuple[PodShape, ...]:
        """The shape of every worker pod: the coordinator's first, then each extra's."""
        return (self.shape, *self.extra_shapes)

    @property
    def processes(self) -> int:
        """The unit processes of all worker pods together."""
        return sum(shape.processes for shape in self.worker_shapes)

    def shape_of(self, index: int | None) -> PodShape:
        """The shape of worker pod `index` (0: the coordinator), of the merge for None."""
        if index is None:
            return self.merge_shape or self.shape
        return self.worker_shapes[index] if 0 <= index < self.pods else self.shape

    def shape_of_pod(self, *, task_id: str, pod: str) -> PodShape:
        """The shape of a pod of task `task_id` by its name: the merge's, worker i's, anything
        else (the unsplit task's pod) the coordinator's."""
        if pod == merge_pod(task_id):
            return self.shape_of(None)
        index = worker_index(task_id, pod)
        return self.shape if index is None else self.shape_of(index)

    def to_json(self) -> TaskPlanJson:
        data = asdict(self)
        data["nodes"] = list(self.nodes)
        data["extra_shapes"] = [shape.to_json() for shape in self.extra_shapes]
        return cast(TaskPlanJson, data)

    @classmethod
    def from_json(cls, data: TaskPlanJson) -> TaskPlan:
        """A plan of its JSON form; a plan stored before pods had shapes of their own reads
        as every worker (and the merge) in the one shape, as it ran."""
        shape = PodShape.from_json(data["shape"])
        merge = data.get("merge_shape", data["shape"])
        return cls(
            pods=data["pods"],
            shape=shape,
            base_priority=data["base_priority"],
            extra_priority=data["extra_priority"],
            coordinator_merges=data.get("coordinator_merges", False),
            nodes=tuple(data.get("nodes", ())),
            extra_shapes=tuple(PodShape.from_json(e) for e in data.get("extra_shapes") or ()),
            merge_shape=None if merge is None else PodShape.from_json(merge),
            merge_node=data.get("merge_node"),
        )


@dataclass(frozen=True)
class ObservationValue:
    """One recorded attempt, as the resolution and the estimate read it (no database needed).

    `peak_memory_gb` is the pod's peak (anonymous memory of its cgroup); for a kill for memory
    without a report it is the pod's limit (C11). `memory_per_worker_gb` is what the attempt
    was given per process.
    """

    run_id: str | None = None
    worker: str = ""
    attempt: int = 0
    processes: int = 1
    units_done: int = 0
    unit_seconds_median: float | None = None
    peak_memory_per_process_gb: float | None = None
    peak_memory_gb: float | None = None
    memory_limit_gb: float | None = None
    memory_per_worker_gb: float | None = None
    oom_killed: bool = False
    from_report: bool = True

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ObservationValue:
        return cls(**data)
