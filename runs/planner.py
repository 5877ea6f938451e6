"""The planner: how many pods a task gets, of which shape, at which priorities.

Rules (plain values in, a `TaskPlan` out; the submission calls `plan_task`):

- A pod runs `processes` unit processes: cores = processes * cores per process, memory =
  base + processes * memory per worker (M13), GPUs and scratch per pod. Requests equal limits.
- Every pod of a plan has the same shape and fits, at its first and at its retry memory, every
  node it was sized for (`TaskPlan.nodes`, one entry per pod). Node capacities are already
  "what runs may use", rounded down (B3); requests are whole millicores and 1/32 GiB, so the
  comparison is exact.
- Split modes: `"none"` is one pod; an integer is that many pods (several may share a node);
  `"auto"` is one pod per node that holds at least one process, choosing the processes per pod
  that keep the most processes busy (on a tie, more and smaller pods, which find room sooner
  on a busy cluster), and never more pods than the units keep busy
  (`pods ≤ ceil(units / processes)`). An unsplit task is one pod of one process (or the
  workflow's `processes`).
- A reserved run plans on its reserved node only; nodes reserved by other runs are never used.
- A task that fits no usable node is refused (`PlanRefused`) with what one pod asks for and
  what the largest node offers.
- The retry memory (M9) is the pod total at the retry memory per worker, capped by the
  smallest node the pods were sized for; at the cap the harness runs fewer processes
  (`PodShape.retry_processes`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from runs.plans import Node, PodShape, ResolvedResources, TaskPlan
from runs.priorities import base_class, extra_class
from runs.resources import GRANULES_PER_GB, retry_step_gb, round_up_gb
from runs.workflow import SplitMode

MILLI = 1000


class PlanRefused(ValueError):
    """A task that cannot run on any usable node; the message says why, for the submitter."""


@dataclass(frozen=True)
class _Capacity:
    """A node in whole millicores and 1/32 GiB, rounded down."""

    node: Node
    milli: int
    granules: int

    @classmethod
    def of(cls, node: Node) -> _Capacity:
        milli = math.floor(node.cores * MILLI)
        if milli / MILLI > node.cores:  # float noise rounded the product up
            milli -= 1
        granules = math.floor(node.memory_gb * GRANULES_PER_GB)
        if granules / GRANULES_PER_GB > node.memory_gb:
            granules -= 1
        return cls(node, max(0, milli), max(0, granules))


@dataclass(frozen=True)
class _Need:
    """What a task's pods need, in whole millicores and 1/32 GiB."""

    cpp_milli: int
    base: int
    per_worker: int
    gpus: int

    @classmethod
    def of(cls, resources: ResolvedResources) -> _Need:
        return cls(
            cpp_milli=max(1, math.ceil(resources.cores_per_process * MILLI - 1e-9)),
            base=_granules(resources.memory_base_gb) if resources.memory_base_gb > 0 else 0,
            per_worker=_granules(resources.memory_per_worker_gb),
            gpus=resources.gpus,
        )

    def max_processes(self, capacity: _Capacity) -> int:
        """How many processes one pod on this node can run (0: not even one)."""
        if self.gpus > capacity.node.gpus:
            return 0
        by_cores = capacity.milli // self.cpp_milli
        by_memory = (capacity.granules - self.base) // self.per_worker
        return max(0, min(by_cores, by_memory))

    def pods_on(self, capacity: _Capacity, processes: int) -> int:
        """How many pods of `processes` processes fit this node side by side."""
        if self.max_processes(capacity) < processes:
            return 0
        counts = [
            capacity.milli // (processes * self.cpp_milli),
            capacity.granules // (self.base + processes * self.per_worker),
        ]
        if self.gpus:
            counts.append(capacity.node.gpus // self.gpus)
        return min(counts)


def _granules(value_gb: float) -> int:
    return round(round_up_gb(value_gb) * GRANULES_PER_GB)


def plan_task(
    *,
    units: int | None,
    resources: ResolvedResources,
    nodes: list[Node],
    split: SplitMode,
    tier: str,
    reserve: str | None = None,
    coordinator_merges: bool | None = None,
    splittable: bool = True,
) -> TaskPlan:
    """The plan of one task.

    Args:
        units: The units of a split task; None when unknown (then "auto" uses every node that
            fits, and a fixed split its number of pods).
        resources: The resolved resources (`runs.resources.resolve`).
        nodes: The schedulable nodes with their capacity for runs and reservations.
        split: "none", "auto" or a number of pods; ignored for an unsplit task.
        tier: The tier of the run's identity (`runs.priorities.tier_of`).
        reserve: The node the run reserves, None for none.
        coordinator_merges: Whether the coordinator merges the unit outputs itself instead of
            a merge pod (the workflow's choice); None lets the planner choose: a plan of one
            pod merges in its coordinator, where a merge pod would only add a pod's start
            after the last unit. Always False for an unsplit task.
        splittable: False for an unsplit task: one pod.

    Raises:
        PlanRefused: No usable node holds one pod; the message names what a pod asks for and
            the largest node.
        ValueError: An unknown tier.
    """
    base_priority, extra_priority = base_class(tier), extra_class(tier)
    usable = _usable(nodes, reserve)
    need = _Need.of(resources)
    capacities = [_Capacity.of(node) for node in usable]
    fixed = resources.processes
    if not splittable:
        fixed = fixed or 1
    least = fixed or 1
    if not any(need.max_processes(c) >= least for c in capacities):
        raise PlanRefused(_refusal(need, resources, least, usable, nodes, reserve))
    busy = None if units is None else max(1, units)  # units a pod's processes can work on
    if not splittable or split == "none":
        processes, chosen = _one_pod(need, capacities, fixed, busy)
    elif split == "auto":
        processes, chosen = _pod_per_node(need, capacities, fixed, busy)
    else:
        processes, chosen = _fixed_pods(need, capacities, fixed, busy, int(split))
    shape = _shape(need, resources, processes, chosen)
    return TaskPlan(
        pods=len(chosen),
        shape=shape,
        base_priority=base_priority,
        extra_priority=extra_priority,
        coordinator_merges=splittable
        and (len(chosen) == 1 if coordinator_merges is None else coordinator_merges),
        nodes=tuple(c.node.name for c in chosen),
    )


def _usable(nodes: list[Node], reserve: str | None) -> list[Node]:
    """The nodes a run may plan on: its reserved node, else every node nobody reserved."""
    if reserve is not None:
        found = [node for node in nodes if node.name == reserve]
        if not found:
            names = ", ".join(sorted(node.name for node in nodes)) or "none"
            raise PlanRefused(f"the node to reserve, {reserve!r}, is no schedulable node ({names})")
        return found
    return [node for node in nodes if node.reserved_by is None]


def _largest_first(capacities: list[_Capacity]) -> list[_Capacity]:
    return sorted(capacities, key=lambda c: (-c.granules, -c.milli, -c.node.gpus, c.node.name))


def _one_pod(
    need: _Need, capacities: list[_Capacity], fixed: int | None, busy: int | None
) -> tuple[int, list[_Capacity]]:
    """One pod, on the node that runs the most processes (the largest on a tie)."""
    best = max(_largest_first(capacities), key=need.max_processes)
    most = need.max_processes(best)
    return fixed or (most if busy is None else min(most, busy)), [best]


def _pod_per_node(
    need: _Need, capacities: list[_Capacity], fixed: int | None, busy: int | None
) -> tuple[int, list[_Capacity]]:
    """One pod per node that holds it, with the processes per pod that keep the most busy."""
    options = [fixed] if fixed else sorted({need.max_processes(c) for c in capacities} - {0})

    def working(processes: int) -> tuple[int, int]:
        holding = sum(1 for c in capacities if need.max_processes(c) >= processes)
        total = processes * holding
        return (total if busy is None else min(total, busy)), -processes  # tie: more pods

    processes = max(options, key=working)
    fitting = [c for c in _largest_first(capacities) if need.max_processes(c) >= processes]
    pods = len(fitting) if busy is None else min(len(fitting), math.ceil(busy / processes))
    if busy is not None and not fixed:
        processes = min(processes, math.ceil(busy / pods))  # spread the units evenly
    return processes, fitting[:pods]


def _fixed_pods(
    need: _Need, capacities: list[_Capacity], fixed: int | None, busy: int | None, count: int
) -> tuple[int, list[_Capacity]]:
    """`count` pods (at most one per unit), as large as lets them run side by side."""
    pods = count if busy is None else min(count, busy)
    at_once = sum(need.pods_on(c, fixed or 1) for c in capacities)
    target = min(pods, at_once)
    if fixed:
        processes = fixed
    else:
        ceiling = max(need.max_processes(c) for c in capacities)
        if busy is not None:
            ceiling = min(ceiling, math.ceil(busy / pods))
        processes = max(
            p
            for p in range(1, ceiling + 1)
            if sum(need.pods_on(c, p) for c in capacities) >= target
        )
    room = {c.node.name: need.pods_on(c, processes) for c in capacities}
    slots = [  # spread over the nodes first: the largest of each, then second pods, ...
        c
        for i in range(max(room.values()))
        for c in _largest_first(capacities)
        if i < room[c.node.name]
    ]
    chosen = [slots[i % len(slots)] for i in range(pods)]
    return processes, chosen


def _shape(
    need: _Need, resources: ResolvedResources, processes: int, chosen: list[_Capacity]
) -> PodShape:
    """The pod shape, with the retry memory capped by the smallest node it was sized for."""
    memory = need.base + processes * need.per_worker
    smallest = min(c.granules for c in chosen)
    wanted_retry = resources.retry_memory_per_worker_gb
    if wanted_retry is None:
        first = need.per_worker / GRANULES_PER_GB
        wanted_retry = first + retry_step_gb(first)
    retry_per_worker = min(max(_granules(wanted_retry), need.per_worker), smallest - need.base)
    retry_memory = min(need.base + processes * retry_per_worker, smallest)
    return PodShape(
        cores=processes * need.cpp_milli / MILLI,
        memory_gb=memory / GRANULES_PER_GB,
        processes=processes,
        gpus=need.gpus,
        scratch_gb=resources.scratch_gb,
        per_worker_gb=need.per_worker / GRANULES_PER_GB,
        retry_memory_gb=retry_memory / GRANULES_PER_GB,
        retry_per_worker_gb=retry_per_worker / GRANULES_PER_GB,
        memory_base_gb=need.base / GRANULES_PER_GB,
    )


def _refusal(
    need: _Need,
    resources: ResolvedResources,
    processes: int,
    usable: list[Node],
    nodes: list[Node],
    reserve: str | None,
) -> str:
    """Why no node holds one pod: what it asks for and what the largest node offers."""
    memory = (need.base + processes * need.per_worker) / GRANULES_PER_GB
    asked = (
        f"one pod asks for {_count(processes * need.cpp_milli / MILLI, 'core')},"
        f" {memory:g} GiB memory, {_count(need.gpus, 'GPU')} and {resources.scratch_gb:g} GiB"
        f" scratch ({_count(processes, 'process', 'processes')} of"
        f" {_count(need.cpp_milli / MILLI, 'core')} and {need.per_worker / GRANULES_PER_GB:g} GiB"
        f" each, base {need.base / GRANULES_PER_GB:g} GiB)"
    )
    if not nodes:
        return f"{asked}, but there is no schedulable node"
    if reserve is not None:
        return f"{asked}; the reserved node {_offer(usable[0])}"
    if not usable:
        taken = ", ".join(f"{n.name} (by run {n.reserved_by})" for n in nodes)
        return f"{asked}, but every node is reserved by another run: {taken}"
    largest = _largest_first([_Capacity.of(n) for n in usable])[0].node
    text = f"{asked}; the largest node {_offer(largest)}"
    elsewhere = [
        n
        for n in nodes
        if n.reserved_by is not None and need.max_processes(_Capacity.of(n)) >= processes
    ]
    if elsewhere:
        held = ", ".join(f"{n.name} (by run {n.reserved_by})" for n in elsewhere)
        text += f"; nodes that would hold it are reserved by other runs: {held}"
    return text


def _offer(node: Node) -> str:
    memory = f"{node.memory_gb:g} GiB memory"
    return f"{node.name} offers {_count(node.cores, 'core')}, {memory}, {_count(node.gpus, 'GPU')}"


def _count(amount: float, one: str, many: str | None = None) -> str:
    return f"{amount:g} {one if amount == 1 else (many or one + 's')}"
