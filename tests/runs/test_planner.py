"""The planner over random clusters and tasks: every plan fits its nodes, splits as asked,
and refuses what fits nowhere (examples on a fixed cluster: test_planner_examples.py)."""

from __future__ import annotations

import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runs import priorities
from runs.planner import PlanRefused
from runs.plans import Node, PodShape, ResolvedResources, TaskPlan
from tests.builders import plan_on, resources

RUN = "run-me"


# --- properties over random clusters and tasks ------------------------------------------

quarter = st.integers(1, 16).map(lambda n: n / 4)  # cores per process: 0.25 .. 4
granule = st.integers(1, 32 * 24).map(lambda n: n / 32)  # GiB in whole 1/32: exact


@st.composite
def clusters(draw: st.DrawFn) -> list[Node]:
    count = draw(st.integers(0, 6))
    return [
        Node(
            name=f"n{i}",
            cores=draw(st.integers(1, 64)),
            memory_gb=draw(st.integers(1, 256)),
            gpus=draw(st.sampled_from([0, 0, 0, 1, 2, 4])),
            reserved_by=draw(st.sampled_from([None, None, None, RUN, "run-other"])),
            scratch_gb=draw(st.sampled_from([None, 0.0, 5.0, 20.0, 100.0])),
        )
        for i in range(count)
    ]


@st.composite
def needs(draw: st.DrawFn) -> ResolvedResources:
    return resources(
        cores=draw(quarter),
        base=draw(st.sampled_from([0.0, 0.25, 0.5, 1.0, 3.0])),
        per_worker=draw(granule),
        gpus=draw(st.sampled_from([0, 0, 0, 1, 2])),
        processes=draw(st.one_of(st.none(), st.integers(1, 24))),
        retry=draw(st.one_of(st.none(), granule, st.floats(0.01, 400))),
        scratch=draw(st.sampled_from([0.0, 0.0, 10.0, 30.0])),
        merge=draw(st.one_of(st.none(), granule, st.floats(0.01, 400))),
    )


def fits(shape: PodShape, node: Node) -> bool:
    return (
        shape.cores <= node.cores
        and shape.memory_gb <= node.memory_gb
        and shape.retry_memory_gb <= node.memory_gb
        and shape.gpus <= node.gpus
        and (node.scratch_gb is None or shape.scratch_gb <= node.scratch_gb)
    )


def holds_one_pod(need: ResolvedResources, node: Node, processes: int) -> bool:
    return (
        processes * need.cores_per_process <= node.cores
        and need.memory_base_gb + processes * need.memory_per_worker_gb <= node.memory_gb
        and need.gpus <= node.gpus
        and (node.scratch_gb is None or need.scratch_gb <= node.scratch_gb)
    )


def pods_of(found: TaskPlan) -> list[tuple[PodShape, str]]:
    """Every pod of a plan with the node it was sized for, the merge last."""
    pods = list(zip(found.worker_shapes, found.nodes, strict=True))
    if found.merge_shape is not None:
        assert found.merge_node is not None
        pods.append((found.merge_shape, found.merge_node))
    return pods


tasks = st.fixed_dictionaries(
    {
        "nodes": clusters(),
        "need": needs(),
        "units": st.one_of(st.none(), st.integers(0, 3000)),
        "split": st.one_of(st.sampled_from(["auto", "none"]), st.integers(1, 12)),
        "splittable": st.booleans(),
        "tier": st.sampled_from(priorities.TIERS),
        "reserve": st.sampled_from([None, None, "n0", "n1"]),
    }
)
PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(tasks)
def test_every_plan_fits_every_node_it_was_sized_for_or_the_task_is_refused(task: dict) -> None:
    """M13: every pod, at its first and at its retry memory, fits the node it was sized for."""
    nodes, need = task["nodes"], task["need"]
    reserve = task["reserve"] if any(n.name == task["reserve"] for n in nodes) else None
    usable = (
        [n for n in nodes if n.name == reserve]
        if reserve
        else [n for n in nodes if n.reserved_by is None]
    )
    least = need.processes or 1
    try:
        found = plan_on(
            nodes,
            units=task["units"],
            split=task["split"],
            need=need,
            reserve=reserve,
            splittable=task["splittable"],
            tier=task["tier"],
        )
    except PlanRefused:
        assert not any(holds_one_pod(need, n, least) for n in usable)
        return
    by_name = {n.name: n for n in usable}
    assert found.pods == len(found.nodes) == len(found.worker_shapes) >= 1
    for shape, name in pods_of(found):
        assert fits(shape, by_name[name]) and shape.fits(by_name[name])
        assert shape.memory_gb == shape.memory_base_gb + shape.processes * shape.per_worker_gb
        assert shape.processes >= 1
    for shape in found.worker_shapes:
        assert shape.scratch_gb == need.scratch_gb
        if need.processes is not None:
            assert shape.processes == need.processes


@PROPERTY
@given(tasks)
def test_never_more_pods_than_units_and_split_modes_hold(task: dict) -> None:
    try:
        found = plan_on(
            task["nodes"],
            units=task["units"],
            split=task["split"],
            need=task["need"],
            splittable=task["splittable"],
            tier=task["tier"],
        )
    except PlanRefused:
        return
    units, split = task["units"], task["split"]
    if units is not None:
        assert found.pods <= max(units, 1)
    if units is not None and split == "auto" and task["splittable"]:
        smallest = min(shape.processes for shape in found.worker_shapes)
        assert found.pods <= math.ceil(max(units, 1) / smallest)
        assert found.pods == 1 or found.processes - smallest < max(units, 1)  # none idle
    if not task["splittable"] or split == "none":
        assert found.pods == 1
    elif isinstance(split, int):
        assert found.pods == (split if units is None else min(split, max(units, 1)))


@PROPERTY
@given(tasks)
def test_retry_memory_is_at_least_the_first_and_at_most_the_node(task: dict) -> None:
    """M9: the retry memory is ≥ the first memory and ≤ the smallest node sized for."""
    try:
        found = plan_on(
            task["nodes"],
            units=task["units"],
            split=task["split"],
            need=task["need"],
            splittable=task["splittable"],
        )
    except PlanRefused:
        return
    memory = {n.name: n.memory_gb for n in task["nodes"]}
    for shape, name in pods_of(found):
        assert shape.memory_gb <= shape.retry_memory_gb <= memory[name]
        assert shape.retry_per_worker_gb >= shape.per_worker_gb
        assert 1 <= shape.retry_processes <= shape.processes
        room = shape.retry_memory_gb - shape.memory_base_gb
        assert shape.retry_processes * shape.retry_per_worker_gb <= room


@PROPERTY
@given(tasks)
def test_priorities_follow_the_tier_and_base_ranks_above_extra(task: dict) -> None:
    try:
        found = plan_on(task["nodes"], need=task["need"], tier=task["tier"])
    except PlanRefused:
        return
    assert found.base_priority == priorities.base_class(task["tier"])
    assert found.extra_priority == priorities.extra_class(task["tier"])
    lowest_base = min(priorities.value_of(priorities.base_class(t)) for t in priorities.TIERS)
    assert priorities.value_of(found.extra_priority) < lowest_base


@PROPERTY
@given(tasks)
def test_a_plan_round_trips_through_its_json_form(task: dict) -> None:
    try:
        found = plan_on(task["nodes"], units=task["units"], split=task["split"], need=task["need"])
    except PlanRefused:
        return
    assert TaskPlan.from_json(json.loads(json.dumps(found.to_json()))) == found


@PROPERTY
@given(clusters(), needs(), st.integers(1, 3000))
def test_auto_keeps_at_least_as_many_processes_busy_as_one_pod_on_the_best_node(
    nodes: list[Node], need: ResolvedResources, units: int
) -> None:
    try:
        auto = plan_on(nodes, units=units, need=need)
        one = plan_on(nodes, units=units, split="none", need=need)
    except PlanRefused:
        return
    assert auto.processes >= min(units, one.shape.processes)


def most_processes(need: ResolvedResources, node: Node) -> int:
    """What one pod on `node` can run (the strategies draw exact binary fractions)."""
    if need.gpus > node.gpus or not holds_one_pod(need, node, 1):
        return 0
    by_memory = (node.memory_gb - need.memory_base_gb) // need.memory_per_worker_gb
    return int(min(node.cores // need.cores_per_process, by_memory))


@PROPERTY
@given(clusters(), needs())
def test_auto_sizes_each_pod_for_its_node_and_the_coordinator_is_the_smallest(
    nodes: list[Node], need: ResolvedResources
) -> None:
    """Without a unit count every node that holds a pod gets one as large as it allows (or of
    the workflow's processes); the coordinator has the fewest, the extras follow largest first."""
    try:
        found = plan_on(nodes, units=None, need=need)
    except PlanRefused:
        return
    by_name = {n.name: n for n in nodes}
    least = need.processes or 1
    holding = {n.name for n in nodes if n.reserved_by is None and most_processes(need, n) >= least}
    assert sorted(found.nodes) == sorted(holding)
    for shape, name in zip(found.worker_shapes, found.nodes, strict=True):
        assert shape.processes == (need.processes or most_processes(need, by_name[name]))
    counts = [shape.processes for shape in found.worker_shapes]
    assert counts[0] == min(counts)
    assert counts[1:] == sorted(counts[1:], reverse=True)
    first = found.shape  # the coordinator starts on any node of the plan
    assert all(
        first.cores <= by_name[n].cores and first.memory_gb <= by_name[n].memory_gb
        for n in found.nodes
    )


@PROPERTY
@given(tasks)
def test_the_merge_pod_has_a_shape_of_its_own_that_fits_its_node(task: dict) -> None:
    """A split task's merge pod runs one process of the task's cores, no GPU, the task's
    scratch, and the merge memory asked (capped by the largest node that holds it)."""
    need = task["need"]
    try:
        found = plan_on(task["nodes"], units=task["units"], split=task["split"], need=need)
    except PlanRefused:
        return
    assert found.merge_shape is not None and found.merge_node is not None
    merge = found.merge_shape
    node = {n.name: n for n in task["nodes"]}[found.merge_node]
    assert fits(merge, node)
    assert (merge.processes, merge.gpus, merge.cores) == (1, 0, need.cores_per_process)
    assert merge.scratch_gb == need.scratch_gb
    wanted = need.merge_memory_gb or need.memory_base_gb + need.memory_per_worker_gb
    assert merge.memory_gb == min(math.ceil(wanted * 32 - 1e-9) / 32, node.memory_gb)
    usable = [n for n in task["nodes"] if n.reserved_by is None]
    holding = [
        n
        for n in usable
        if n.cores >= need.cores_per_process
        and (n.scratch_gb is None or need.scratch_gb <= n.scratch_gb)
    ]
    assert node.memory_gb == max(n.memory_gb for n in holding)


@PROPERTY
@given(tasks)
def test_an_unsplit_task_or_a_merging_coordinator_has_no_merge_pod(task: dict) -> None:
    try:
        unsplit = plan_on(task["nodes"], need=task["need"], splittable=False)
        merging = plan_on(task["nodes"], need=task["need"], coordinator_merges=True)
    except PlanRefused:
        return
    assert (unsplit.merge_shape, unsplit.merge_node) == (None, None)
    assert (merging.merge_shape, merging.merge_node) == (None, None)
