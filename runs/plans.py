"""The planner's plain values: nodes, pod shapes, task plans, resolved resources.

Each has a stable JSON form (`to_json` / `from_json`) because plans are stored in the run's
record and read back by the controller after a restart.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Node:
    """A server pods can run on, with what it can give to runs."""

    name: str
    cores: float
    memory_gb: float
    gpus: int = 0
    reserved_by: str | None = None

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

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ResolvedResources:
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

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PodShape:
        return cls(**data)


@dataclass(frozen=True)
class TaskPlan:
    """How a task runs: how many pods of which shape, at which priorities."""

    pods: int
    shape: PodShape
    base_priority: str
    extra_priority: str
    coordinator_merges: bool = False
    nodes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["nodes"] = list(self.nodes)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TaskPlan:
        values = dict(data)
        values["shape"] = PodShape.from_json(values["shape"])
        values["nodes"] = tuple(values.get("nodes", ()))
        values.setdefault("coordinator_merges", False)
        return cls(**values)
