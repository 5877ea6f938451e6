"""The planner: how many pods a task gets, of which shape, at which priorities.

Rules (plain values in, a `TaskPlan` out; the submission calls `plan_task`):

- A worker pod runs `processes` unit processes: cores = processes * cores per process,
  memory = base + processes * memory per worker (M13), GPUs and scratch per pod. Requests
  equal limits.
- Every pod has a shape of its own and fits, at its first and at its retry memory, the node it
  was sized for (`TaskPlan.nodes`, one entry per worker pod; `TaskPlan.merge_node`). Node
  capacities are already "what runs may use", rounded down (B3); requests are whole
  millicores and 1/32 GiB, so the comparison is exact. A node whose scratch is known holds
  a pod only when the pod's scratch fits it too.
- Split modes: `"none"` is one pod on the node that runs the most processes; an integer is
  that many pods of one shape (several may share a node, so no pod has a node of its own);
  `"auto"` is one pod per node that holds at least one process, each as large as its node
  allows, never more pods than the units keep busy (the largest first), and when the pods
  hold more processes than there are units, the largest are cut down to a common level so
  the units spread evenly. The coordinator is the pod of the fewest processes: it is the
  one pod the task cannot do without, and the smaller it is the sooner it finds room; the
  extra workers follow, largest first. An unsplit task is one pod of one process (or the
  workflow's `processes`).
- The merge pod (a split task whose coordinator does not merge) runs one process: the cores
  of one process, no GPU, the task's scratch, and the merge memory the resolution learned
  from earlier merges (else base + one memory per worker), sized for the largest node that
  holds one process; a merge that learned more than that node has gets the node's memory.
- A reserved run plans on its reserved node only; nodes reserved by other runs are never used.
- A task that fits no usable node is refused (`PlanRefused`) with what one pod asks for and
  what the largest node offers (the node with the most scratch when scratch is what fits
  nowhere).
- The retry memory (M9) is the pod total at the retry memory per worker, capped by the node
  the pod was sized for (by the smallest of them for a fixed split); at the cap the harness
  runs fewer processes (`PodShape.retry_processes`).
"""

from __future__ import annotations

import math

from runs.plan_units import MILLI, Capacity, Need, to_granules
from runs.plans import Node, PodShape, ResolvedResources, TaskPlan
from runs.priorities import base_class, extra_class
from runs.resources import GRANULES_PER_GB, retry_step_gb
from runs.workflow import SplitMode


class PlanRefused(ValueError):
    """A task that cannot run on any usable node; the message says why, for the submitter."""


Pods = list[tuple[int, Capacity]]
"""The worker pods of a plan: processes and the node sized for, the coordinator first."""


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
    need = Need.of(resources)
    capacities = [Capacity.of(node) for node in usable]
    fixed = resources.processes
    if not splittable:
        fixed = fixed or 1
    least = fixed or 1
    if not any(need.max_processes(c) >= least for c in capacities):
        raise PlanRefused(_refusal(need, resources, least, usable, nodes, reserve))
    busy = None if units is None else max(1, units)  # units a pod's processes can work on
    mode: SplitMode = split if splittable else "none"
    pods = _worker_pods(need, capacities, fixed, busy, mode)
    shapes = _shapes(need, resources, pods, uniform=mode not in ("none", "auto"))
    merges = splittable and (len(pods) == 1 if coordinator_merges is None else coordinator_merges)
    merge = None if merges or not splittable else _merge_pod(need, resources, capacities)
    return TaskPlan(
        pods=len(pods),
        shape=shapes[0],
        base_priority=base_priority,
        extra_priority=extra_priority,
        coordinator_merges=merges,
        nodes=tuple(c.node.name for _, c in pods),
        extra_shapes=tuple(shapes[1:]),
        merge_shape=None if merge is None else merge[0],
        merge_node=None if merge is None else merge[1],
    )


def _worker_pods(
    need: Need, capacities: list[Capacity], fixed: int | None, busy: int | None, split: SplitMode
) -> Pods:
    """The worker pods of a split mode: one, one per node ("auto"), or a fixed number."""
    if split == "none":
        return _one_pod(need, capacities, fixed, busy)
    if split == "auto":
        return _pod_per_node(need, capacities, fixed, busy)
    return _fixed_pods(need, capacities, fixed, busy, int(split))


def _usable(nodes: list[Node], reserve: str | None) -> list[Node]:
    """The nodes a run may plan on: its reserved node, else every node nobody reserved."""
    if reserve is not None:
        found = [node for node in nodes if node.name == reserve]
        if not found:
            names = ", ".join(sorted(node.name for node in nodes)) or "none"
            raise PlanRefused(f"the node to reserve, {reserve!r}, is no schedulable node ({names})")
        return found
    return [node for node in nodes if node.reserved_by is None]


def _largest_first(capacities: list[Capacity]) -> list[Capacity]:
    return sorted(capacities, key=lambda c: (-c.granules, -c.milli, -c.node.gpus, c.node.name))


def _one_pod(need: Need, capacities: list[Capacity], fixed: int | None, busy: int | None) -> Pods:
    """One pod, on the node that runs the most processes (the largest on a tie)."""
    best = max(_largest_first(capacities), key=need.max_processes)
    most = need.max_processes(best)
    return [(fixed or (most if busy is None else min(most, busy)), best)]


def _pod_per_node(
    need: Need, capacities: list[Capacity], fixed: int | None, busy: int | None
) -> Pods:
    """One pod per node that holds one, each as large as its node allows, the largest first
    while the units keep them busy, cut to a common level when they hold more processes than
    there are units; the smallest pod is the coordinator."""
    least = fixed or 1
    fitting = sorted(
        (
            (fixed or need.max_processes(c), c)
            for c in _largest_first(capacities)
            if need.max_processes(c) >= least
        ),
        key=lambda pod: -pod[0],
    )
    if busy is not None:
        taken: Pods = []
        for pod in fitting:
            if sum(p for p, _ in taken) >= busy:
                break
            taken.append(pod)
        level = fixed or _level([p for p, _ in taken], busy)  # the workflow's processes stay
        fitting = [(min(p, level), c) for p, c in taken]
    return [fitting[-1], *fitting[:-1]]


def _level(processes: list[int], busy: int) -> int:
    """The lowest common cap of the pods' processes that still keeps `busy` processes busy."""
    most = max(processes)
    for level in range(1, most + 1):
        if sum(min(p, level) for p in processes) >= busy:
            return level
    return most


def _fixed_pods(
    need: Need, capacities: list[Capacity], fixed: int | None, busy: int | None, count: int
) -> Pods:
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
    return [(processes, slots[i % len(slots)]) for i in range(pods)]


def _shapes(
    need: Need, resources: ResolvedResources, pods: Pods, *, uniform: bool
) -> list[PodShape]:
    """Each worker pod's shape, sized for its node; `uniform`: the pods of a fixed split share
    nodes and one shape (capped by the smallest node), so each may start on any of them."""
    if uniform:
        smallest = min(c.granules for _, c in pods)
        return [_shape(need, resources, processes, smallest) for processes, _ in pods]
    return [_shape(need, resources, processes, c.granules) for processes, c in pods]


def _shape(need: Need, resources: ResolvedResources, processes: int, granules: int) -> PodShape:
    """A worker pod's shape, its retry memory capped by the memory (in 1/32 GiB) of the node
    it was sized for."""
    memory = need.base + processes * need.per_worker
    wanted_retry = resources.retry_memory_per_worker_gb
    if wanted_retry is None:
        first = need.per_worker / GRANULES_PER_GB
        wanted_retry = first + retry_step_gb(first)
    retry_per_worker = min(max(to_granules(wanted_retry), need.per_worker), granules - need.base)
    retry_memory = min(need.base + processes * retry_per_worker, granules)
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


def _merge_pod(
    need: Need, resources: ResolvedResources, capacities: list[Capacity]
) -> tuple[PodShape, str]:
    """The merge pod's shape (one process, no GPU) and the node it was sized for: the largest
    that holds one process's cores and the scratch (a worker's node always does)."""
    holding = [c for c in capacities if c.milli >= need.cpp_milli and need.scratch_fits(c.node)]
    node = _largest_first(holding)[0]
    wanted = resources.merge_memory_gb
    first = to_granules(wanted) if wanted is not None else need.base + need.per_worker
    memory = max(1, min(first, node.granules))
    wanted_retry = resources.merge_retry_memory_gb
    if wanted_retry is None:
        step = retry_step_gb(memory / GRANULES_PER_GB)
        wanted_retry = memory / GRANULES_PER_GB + step
    retry = min(max(to_granules(wanted_retry), memory), node.granules)
    base = min(need.base, memory - 1)
    shape = PodShape(
        cores=need.cpp_milli / MILLI,
        memory_gb=memory / GRANULES_PER_GB,
        processes=1,
        gpus=0,
        scratch_gb=resources.scratch_gb,
        per_worker_gb=(memory - base) / GRANULES_PER_GB,
        retry_memory_gb=retry / GRANULES_PER_GB,
        retry_per_worker_gb=(retry - base) / GRANULES_PER_GB,
        memory_base_gb=base / GRANULES_PER_GB,
    )
    return shape, node.node.name


def _refusal(
    need: Need,
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
    if not any(need.scratch_fits(n) for n in usable):  # the scratch fits nowhere
        largest = max(usable, key=lambda n: (n.scratch_gb or 0.0, n.memory_gb))
        text = f"{asked}; no node has room for its scratch: the largest, {_offer(largest)}"
    else:
        largest = _largest_first([Capacity.of(n) for n in usable])[0].node
        text = f"{asked}; the largest node {_offer(largest)}"
    elsewhere = [
        n
        for n in nodes
        if n.reserved_by is not None and need.max_processes(Capacity.of(n)) >= processes
    ]
    if elsewhere:
        held = ", ".join(f"{n.name} (by run {n.reserved_by})" for n in elsewhere)
        text += f"; nodes that would hold it are reserved by other runs: {held}"
    return text


def _offer(node: Node) -> str:
    memory = f"{node.memory_gb:g} GiB memory"
    text = f"{node.name} offers {_count(node.cores, 'core')}, {memory}, {_count(node.gpus, 'GPU')}"
    return text if node.scratch_gb is None else f"{text}, {node.scratch_gb:g} GiB scratch"


def _count(amount: float, one: str, many: str | None = None) -> str:
    return f"{amount:g} {one if amount == 1 else (many or one + 's')}"
