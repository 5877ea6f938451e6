"""The servers of the backend with the pods of runs on them and their reservations (S8)."""

from __future__ import annotations

from dataclasses import dataclass, field

from runs.backends import backend
from runs.plans import Node


@dataclass(frozen=True)
class PodUsage:
    """A live pod of a run: what it requests counts against its server."""

    run_id: str | None
    task_id: str
    pod: str
    phase: str
    cores: float
    memory_gb: float


@dataclass(frozen=True)
class ServerUsage:
    """A server: what the scheduler gives runs, its GPUs, who reserved it, the pods on it."""

    name: str
    cores: float
    memory_gb: float
    gpus: int
    reserved_by: str | None
    pods: list[PodUsage] = field(default_factory=list)

    @property
    def cores_used(self) -> float:
        return sum(p.cores for p in self.pods)

    @property
    def memory_used_gb(self) -> float:
        return sum(p.memory_gb for p in self.pods)


@dataclass(frozen=True)
class Servers:
    servers: list[ServerUsage]
    unplaced: list[PodUsage]
    """Live pods not bound to a server yet (waiting for admission or a node)."""


def schedulable_nodes() -> list[Node]:
    """The nodes a submission plans on: the backend's, with their capacity for runs."""
    return backend().nodes()


def servers() -> Servers:
    """Every server with the pods of runs on it; pods without a node listed apart."""
    active = backend()
    by_node: dict[str, list[PodUsage]] = {}
    unplaced: list[PodUsage] = []
    for placement in active.placements():
        usage = PodUsage(
            run_id=placement.run_id,
            task_id=placement.task_id,
            pod=placement.pod,
            phase=placement.phase,
            cores=placement.cores,
            memory_gb=placement.memory_gb,
        )
        if placement.node is None:
            unplaced.append(usage)
        else:
            by_node.setdefault(placement.node, []).append(usage)
    return Servers(
        servers=[
            ServerUsage(
                name=node.name,
                cores=node.cores,
                memory_gb=node.memory_gb,
                gpus=node.gpus,
                reserved_by=node.reserved_by,
                pods=sorted(by_node.get(node.name, []), key=lambda p: (p.run_id or "", p.pod)),
            )
            for node in sorted(active.nodes(), key=lambda n: n.name)
        ],
        unplaced=unplaced,
    )
