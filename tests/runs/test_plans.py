"""The planner's values as stored and read back (a run's record keeps its plans; a restarted
controller reads them), and the plain rules on them: a pod's shape by its name, the processes
of a retry, whether a shape fits a node. Plain values, no database."""

from __future__ import annotations

from typing import Any

import pytest

from runs.plans import (
    Node,
    ObservationValue,
    PodShape,
    ResolvedResources,
    TaskPlan,
    merge_pod,
    task_pods,
    worker_index,
    worker_pod,
)

SMALL = PodShape(cores=1, memory_gb=2)
LARGE = PodShape(
    cores=4,
    memory_gb=8,
    processes=3,
    gpus=1,
    scratch_gb=10,
    per_worker_gb=2,
    retry_memory_gb=12,
    retry_per_worker_gb=3,
    memory_base_gb=0.5,
)
MERGE = PodShape(cores=0.5, memory_gb=1)


def shape_json(shape: PodShape) -> dict[str, Any]:
    return {
        "cores": shape.cores,
        "memory_gb": shape.memory_gb,
        "processes": shape.processes,
        "gpus": shape.gpus,
        "scratch_gb": shape.scratch_gb,
        "per_worker_gb": shape.per_worker_gb,
        "retry_memory_gb": shape.retry_memory_gb,
        "retry_per_worker_gb": shape.retry_per_worker_gb,
        "memory_base_gb": shape.memory_base_gb,
    }


def three_pods() -> TaskPlan:
    return TaskPlan(
        pods=3,
        shape=SMALL,
        base_priority="simrun-person",
        extra_priority="simrun-person-extra",
        nodes=("n1", "n2", "n3"),
        extra_shapes=(LARGE, SMALL),
        merge_shape=MERGE,
        merge_node="n2",
    )


def test_a_plan_is_stored_under_these_keys_each_shape_whole() -> None:
    """What a run's record holds: the later readers (a restarted controller, an older one)
    find every field under its name."""
    assert three_pods().to_json() == {
        "pods": 3,
        "shape": shape_json(SMALL),
        "base_priority": "simrun-person",
        "extra_priority": "simrun-person-extra",
        "coordinator_merges": False,
        "nodes": ["n1", "n2", "n3"],
        "extra_shapes": [shape_json(LARGE), shape_json(SMALL)],
        "merge_shape": shape_json(MERGE),
        "merge_node": "n2",
    }


def test_a_stored_plan_reads_back_as_it_was() -> None:
    plan = three_pods()
    assert TaskPlan.from_json(plan.to_json()) == plan
    merging = TaskPlan(2, LARGE, "a", "b", coordinator_merges=True, extra_shapes=(SMALL,))
    assert TaskPlan.from_json(merging.to_json()) == merging
    assert TaskPlan.from_json(merging.to_json()).merge_shape is None


def test_a_plan_stored_before_pods_had_shapes_of_their_own_reads_as_it_ran() -> None:
    """Every worker and the merge in the one shape; the fields added later at their
    defaults."""
    old = {"pods": 2, "shape": {"cores": 1, "memory_gb": 2}, "base_priority": "a"}
    plan = TaskPlan.from_json({**old, "extra_priority": "b"})  # type: ignore[typeddict-item]
    assert plan == TaskPlan(
        pods=2,
        shape=SMALL,
        base_priority="a",
        extra_priority="b",
        coordinator_merges=False,
        nodes=(),
        extra_shapes=(SMALL,),
        merge_shape=SMALL,
        merge_node=None,
    )
    assert plan.shape_of_pod(task_id="scan", pod="scan-merge") == SMALL


def test_a_stored_shape_without_its_later_fields_takes_their_defaults() -> None:
    shape = PodShape.from_json({"cores": 2, "memory_gb": 3})
    assert shape == PodShape(2, 3, 1, 0, 0.0, 0.5, 0.0, 0.0, 0.0)
    assert PodShape.from_json(LARGE.to_json()) == LARGE


def test_a_plan_built_without_extra_shapes_gives_every_worker_the_one_shape() -> None:
    plan = TaskPlan(3, LARGE, "a", "b")
    assert plan.extra_shapes == (LARGE, LARGE)
    assert plan.worker_shapes == (LARGE, LARGE, LARGE)
    assert plan.processes == 9
    assert TaskPlan(1, LARGE, "a", "b").extra_shapes == ()


def test_a_plan_whose_extras_do_not_match_its_pods_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^a plan of 2 pods has 2 extras$"):
        TaskPlan(2, SMALL, "a", "b", extra_shapes=(SMALL, SMALL))
    with pytest.raises(ValueError, match=r"^a plan of 1 pods has 1 extras$"):
        TaskPlan(1, SMALL, "a", "b", extra_shapes=(SMALL,))


@pytest.mark.parametrize(
    ("pod", "shape"),
    [
        ("scan-w0", SMALL),
        ("scan-w1", LARGE),
        ("scan-w2", SMALL),
        ("scan-merge", MERGE),
        ("scan", SMALL),  # an unsplit task's pod: the coordinator's shape
        ("scan-w9", SMALL),  # no such worker: the coordinator's
        ("scan-wx", SMALL),
        ("other-w1", SMALL),  # another task's name
    ],
)
def test_a_pods_shape_is_found_by_its_name(pod: str, shape: PodShape) -> None:
    assert three_pods().shape_of_pod(task_id="scan", pod=pod) == shape


def test_a_worker_index_outside_the_plan_has_the_coordinators_shape() -> None:
    plan = three_pods()
    assert [plan.shape_of(i) for i in (-1, 0, 1, 2, 3)] == [SMALL, SMALL, LARGE, SMALL, SMALL]
    assert plan.shape_of(None) == MERGE
    assert TaskPlan(2, LARGE, "a", "b", coordinator_merges=True).shape_of(None) == LARGE


@pytest.mark.parametrize(
    ("retry_memory_gb", "retry_per_worker_gb", "processes"),
    [
        (12, 3, 3),  # (12 - 0.5) / 3 = 3.8: all three
        (9.5, 3, 3),  # exactly 3 (9.5 - 0.5 = 9), not 2 for a rounding below
        (9.4, 3, 2),
        (2, 3, 1),  # room for none: one all the same
        (12, 0, 3),  # no retry memory per worker: as many as at first
    ],
)
def test_a_retry_at_a_capped_memory_runs_the_processes_that_fit(
    retry_memory_gb: float, retry_per_worker_gb: float, processes: int
) -> None:
    """M9: (retry memory - base) ÷ memory per worker, at most the first attempt's, at least 1."""
    shape = PodShape(
        cores=4,
        memory_gb=8,
        processes=3,
        retry_memory_gb=retry_memory_gb,
        retry_per_worker_gb=retry_per_worker_gb,
        memory_base_gb=0.5,
    )
    assert shape.retry_processes == processes


@pytest.mark.parametrize(
    ("node", "fits"),
    [
        (Node("n", cores=4, memory_gb=12, gpus=1, scratch_gb=10), True),
        (Node("n", cores=4, memory_gb=12, gpus=1), True),  # scratch not known: not checked
        (Node("n", cores=3.9, memory_gb=12, gpus=1, scratch_gb=10), False),
        (Node("n", cores=4, memory_gb=11, gpus=1, scratch_gb=10), False),  # not the retry
        (Node("n", cores=4, memory_gb=12, gpus=0, scratch_gb=10), False),
        (Node("n", cores=4, memory_gb=12, gpus=1, scratch_gb=9), False),
    ],
)
def test_a_shape_fits_a_node_at_its_first_and_retry_memory(node: Node, fits: bool) -> None:
    assert LARGE.fits(node) is fits
    assert PodShape(cores=4, memory_gb=12).fits(Node("n", 4, 12))


def test_nodes_resources_and_observations_read_back_as_stored() -> None:
    node = Node("n1", 8, 32, gpus=2, reserved_by="r1", scratch_gb=100)
    assert node.to_json() == {
        "name": "n1",
        "cores": 8,
        "memory_gb": 32,
        "gpus": 2,
        "reserved_by": "r1",
        "scratch_gb": 100,
    }
    assert Node.from_json(node.to_json()) == node
    resources = ResolvedResources(1, 0.5, 0.25, 2, 1, 4, 0.5, {"cores": "hint"}, 1.5, 3)
    assert ResolvedResources.from_json(resources.to_json()) == resources
    assert resources.to_json()["merge_retry_memory_gb"] == 3
    seen = ObservationValue("r1", "scan-w0", 1, 2, 5, 0.3, 0.2, 0.9, 1.0, 0.25, True, False)
    assert ObservationValue.from_json(seen.to_json()) == seen
    assert seen.to_json()["from_report"] is False


@pytest.mark.parametrize(
    ("pod", "index"),
    [("scan-w0", 0), ("scan-w12", 12), ("scan-merge", None), ("scan", None), ("scan-x-w1", None)],
)
def test_a_worker_pod_is_known_by_its_number_and_no_other_pod_is(
    pod: str, index: int | None
) -> None:
    """M1: `<task>-w<i>` is worker i of the task; its merge, its unsplit pod and the pods of
    another task (`scan-x`) are no worker of `scan`."""
    assert worker_index("scan", pod) == index
    assert worker_index("scan", worker_pod("scan", 7)) == 7
    assert merge_pod("scan") == "scan-merge"


@pytest.mark.parametrize(
    ("splittable", "pods", "coordinator_merges", "names"),
    [
        (False, 1, False, ["scan"]),
        (False, 3, False, ["scan"]),
        (True, 3, False, ["scan-w0", "scan-w1", "scan-w2", "scan-merge"]),
        (True, 2, True, ["scan-w0", "scan-w1"]),
    ],
)
def test_a_tasks_pods_are_its_workers_then_its_merge_or_the_task_alone(
    splittable: bool, pods: int, coordinator_merges: bool, names: list[str]
) -> None:
    """M1: an unsplit task's one pod is named as the task; a split task's are its workers in
    order, then its merge unless the coordinator merges."""
    found = task_pods(
        "scan", splittable=splittable, pods=pods, coordinator_merges=coordinator_merges
    )
    assert found == names
