"""A task's needs and a node's capacity in whole units: millicores and 1/32 GiB, so that the
planner's comparisons are exact (node capacities are rounded down, needs up)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from runs.plans import Node, ResolvedResources
from runs.resources import GRANULES_PER_GB, round_up_gb

MILLI = 1000


@dataclass(frozen=True)
class Capacity:
    """A node in whole millicores and 1/32 GiB, rounded down."""

    node: Node
    milli: int
    granules: int

    @classmethod
    def of(cls, node: Node) -> Capacity:
        milli = math.floor(node.cores * MILLI)
        if milli / MILLI > node.cores:  # float noise rounded the product up
            milli -= 1
        granules = math.floor(node.memory_gb * GRANULES_PER_GB)
        if granules / GRANULES_PER_GB > node.memory_gb:
            granules -= 1
        return cls(node, max(0, milli), max(0, granules))


@dataclass(frozen=True)
class Need:
    """What a task's pods need, in whole millicores and 1/32 GiB (scratch in GiB)."""

    cpp_milli: int
    base: int
    per_worker: int
    gpus: int
    scratch: float

    @classmethod
    def of(cls, resources: ResolvedResources) -> Need:
        return cls(
            cpp_milli=max(1, math.ceil(resources.cores_per_process * MILLI - 1e-9)),
            base=to_granules(resources.memory_base_gb) if resources.memory_base_gb > 0 else 0,
            per_worker=to_granules(resources.memory_per_worker_gb),
            gpus=resources.gpus,
            scratch=resources.scratch_gb,
        )

    def scratch_fits(self, node: Node) -> bool:
        """Whether one pod's scratch fits the node (a node of unknown scratch is not checked)."""
        return node.scratch_gb is None or self.scratch <= node.scratch_gb

    def max_processes(self, capacity: Capacity) -> int:
        """How many processes one pod on this node can run (0: not even one)."""
        if self.gpus > capacity.node.gpus or not self.scratch_fits(capacity.node):
            return 0
        by_cores = capacity.milli // self.cpp_milli
        by_memory = (capacity.granules - self.base) // self.per_worker
        return max(0, min(by_cores, by_memory))

    def pods_on(self, capacity: Capacity, processes: int) -> int:
        """How many pods of `processes` processes fit this node side by side."""
        if self.max_processes(capacity) < processes:
            return 0
        counts = [
            capacity.milli // (processes * self.cpp_milli),
            capacity.granules // (self.base + processes * self.per_worker),
        ]
        if self.gpus:
            counts.append(capacity.node.gpus // self.gpus)
        if self.scratch > 0 and capacity.node.scratch_gb is not None:
            counts.append(math.floor(capacity.node.scratch_gb / self.scratch + 1e-9))
        return min(counts)


def to_granules(value_gb: float) -> int:
    return round(round_up_gb(value_gb) * GRANULES_PER_GB)
