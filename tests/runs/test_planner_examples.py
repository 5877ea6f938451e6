"""The planner on a fixed cluster: how each split sizes its pods, where they may go, and
what it refuses and why."""

from __future__ import annotations

import math

import pytest

from runs.planner import PlanRefused
from runs.plans import Node, PodShape, TaskPlan
from tests import builders
from tests.builders import plan_on, resources

RUN = "run-me"

# --- examples -------------------------------------------------------------------------

NODES = [Node("big", 16, 64), Node("mid", 8, 32), Node("small", 4, 16)]


def test_split_none_is_one_pod_as_large_as_the_largest_node_allows() -> None:
    found = plan_on(NODES, units=100, split="none", need=resources(base=0.5, per_worker=2.0))
    assert (found.pods, found.nodes, found.shape.processes) == (1, ("big",), 16)
    assert found.shape.memory_gb == 0.5 + 16 * 2.0
    assert found.shape.cores == 16


def test_auto_is_one_pod_per_node_each_sized_for_its_node_the_coordinator_smallest() -> None:
    found = plan_on(NODES, units=1000, need=resources(base=0.5, per_worker=1.5))
    assert found.nodes == ("small", "big", "mid")
    assert [s.processes for s in found.worker_shapes] == [4, 16, 8]
    assert [s.memory_gb for s in found.worker_shapes] == [6.5, 24.5, 12.5]
    assert [s.retry_memory_gb for s in found.worker_shapes] == [8.0, 30.5, 15.5]


def test_auto_levels_the_largest_pods_when_the_units_are_fewer_than_the_processes() -> None:
    found = plan_on(NODES, units=20, need=resources(base=0.5, per_worker=1.0))
    # big (16) and mid (8) hold 24 processes for 20 units: big is cut to 12; small is not needed
    assert found.nodes == ("mid", "big")
    assert [s.processes for s in found.worker_shapes] == [8, 12]


def test_auto_never_plans_more_pods_than_the_units_keep_busy() -> None:
    nodes = [Node(f"n{i}", 2, 8) for i in range(5)]
    found = plan_on(nodes, units=3, need=resources(base=0.25, per_worker=1.0))
    assert found.pods == 2
    assert found.pods * found.shape.processes >= 3


def test_a_fixed_split_sizes_its_pods_as_large_as_lets_them_run_side_by_side() -> None:
    found = plan_on(NODES, units=None, split=3, need=resources(base=0.5, per_worker=1.0))
    # 8 processes: two such pods fit "big", one "mid"; 9 would leave room for two only
    assert (found.pods, found.shape.processes) == (3, 8)
    assert sorted(found.nodes) == ["big", "big", "mid"]


def test_a_fixed_split_of_small_pods_spreads_them_over_the_nodes_first() -> None:
    found = plan_on(NODES, units=6, split=3, need=resources(base=0.5, per_worker=1.0))
    assert (found.pods, found.shape.processes) == (3, 2)
    assert set(found.nodes) == {"big", "mid", "small"}


def test_an_unsplit_task_is_one_pod_of_one_process_unless_the_workflow_says_more() -> None:
    found = plan_on(NODES, units=None, splittable=False, coordinator_merges=True)
    assert (found.pods, found.shape.processes, found.coordinator_merges) == (1, 1, False)
    more = plan_on(NODES, units=None, splittable=False, need=resources(processes=4))
    assert more.shape.processes == 4


def test_the_coordinator_merges_when_the_workflow_says_so() -> None:
    assert plan_on(NODES, coordinator_merges=True).coordinator_merges
    assert not plan_on(NODES).coordinator_merges


def test_unasked_a_plan_of_one_pod_merges_in_its_coordinator() -> None:
    """A merge pod after a lone coordinator would only add a pod's start-up to the run."""
    one = plan_on(NODES, split="none", coordinator_merges=None)
    assert (one.pods, one.coordinator_merges) == (1, True)
    kept = plan_on(NODES, split="none", coordinator_merges=False)
    assert (kept.pods, kept.coordinator_merges) == (1, False)


def test_unasked_a_plan_of_several_pods_keeps_its_merge_pod() -> None:
    """With extra workers the merge waits for the coordinator only, in a pod of its own."""
    several = plan_on(NODES, split="auto", coordinator_merges=None)
    assert several.pods > 1
    assert not several.coordinator_merges


def test_a_reserved_run_plans_on_its_node_only() -> None:
    nodes = [Node("big", 16, 64), Node("mid", 8, 32, reserved_by=RUN)]
    found = plan_on(nodes, units=1000, reserve="mid")
    assert set(found.nodes) == {"mid"}
    assert found.shape.cores <= 8


def test_nodes_reserved_by_other_runs_are_never_used() -> None:
    nodes = [Node("big", 16, 64, reserved_by="run-other"), Node("mid", 8, 32)]
    found = plan_on(nodes, units=1000)
    assert found.nodes == ("mid",)


def test_a_task_that_fits_no_node_is_refused_with_what_it_asks_and_the_largest_node() -> None:
    with pytest.raises(PlanRefused) as refused:
        plan_on(NODES, need=resources(cores=2, base=0.5, per_worker=80.0, gpus=1, scratch=10))
    assert str(refused.value) == (
        "one pod asks for 2 cores, 80.5 GiB memory, 1 GPU and 10 GiB scratch (1 process of"
        " 2 cores and 80 GiB each, base 0.5 GiB); the largest node big offers 16 cores,"
        " 64 GiB memory, 0 GPUs"
    )


DISKS = [Node("big", 16, 64, scratch_gb=20), Node("mid", 8, 32, scratch_gb=50)]


def test_a_task_whose_scratch_fits_no_node_is_refused_naming_the_node_with_most_scratch() -> None:
    with pytest.raises(PlanRefused) as refused:
        plan_on(DISKS, need=resources(scratch=60))
    assert str(refused.value) == (
        "one pod asks for 1 core, 1.5 GiB memory, 0 GPUs and 60 GiB scratch (1 process of"
        " 1 core and 1 GiB each, base 0.5 GiB); no node has room for its scratch: the largest,"
        " mid offers 8 cores, 32 GiB memory, 0 GPUs, 50 GiB scratch"
    )


def test_a_pods_shape_is_found_by_its_name() -> None:
    """What the controller and the backends look up: the merge's, each worker's, else the
    coordinator's (an unsplit task's pod is named as its task)."""
    found = plan_on(NODES, units=1000, need=resources(base=0.5, per_worker=1.5))
    assert found.merge_shape is not None
    by_name = {
        pod: found.shape_of_pod(task_id="scan-w1", pod=pod)
        for pod in ("scan-w1-w0", "scan-w1-w1", "scan-w1-w2", "scan-w1-merge", "scan-w1")
    }
    assert by_name == {
        "scan-w1-w0": found.shape,
        "scan-w1-w1": found.extra_shapes[0],
        "scan-w1-w2": found.extra_shapes[1],
        "scan-w1-merge": found.merge_shape,
        "scan-w1": found.shape,
    }
    assert len({by_name[p].processes for p in ("scan-w1-w0", "scan-w1-w1", "scan-w1-w2")}) == 3


def test_a_plan_stored_before_pods_had_shapes_runs_every_pod_in_its_one_shape() -> None:
    found = plan_on(NODES, units=1000)
    old = {k: v for k, v in found.to_json().items() if k not in ("extra_shapes", "merge_shape")}
    read = TaskPlan.from_json(old)
    assert read.worker_shapes == (found.shape,) * found.pods
    assert read.shape_of_pod(task_id="t", pod="t-merge") == found.shape


def test_a_shape_fits_a_node_only_with_room_for_its_scratch() -> None:
    pod = PodShape(cores=1, memory_gb=1, scratch_gb=10)
    assert pod.fits(Node("unknown", 4, 8)) and pod.fits(Node("room", 4, 8, scratch_gb=10))
    assert not pod.fits(Node("tight", 4, 8, scratch_gb=9.5))


def test_scratch_keeps_pods_off_nodes_without_room_for_it() -> None:
    found = plan_on(DISKS, units=1000, need=resources(scratch=30))
    assert found.nodes == ("mid",)
    assert found.merge_node == "mid"
    fixed = plan_on(DISKS, units=1000, split=4, need=resources(scratch=10))
    assert sorted(fixed.nodes) == ["big", "big", "mid", "mid"]  # 2 x 10 GiB fit big's 20


def test_the_workflows_processes_are_never_cut_to_the_units() -> None:
    found = plan_on(NODES, units=1, need=resources(processes=2))
    assert [s.processes for s in found.worker_shapes] == [2]


def test_the_merge_pod_asks_for_one_worker_without_history_and_what_merges_needed_with() -> None:
    unknown = plan_on(NODES, need=resources(base=0.5, per_worker=2.0, cores=2, gpus=0))
    assert unknown.merge_shape is not None
    assert (unknown.merge_shape.memory_gb, unknown.merge_shape.cores) == (2.5, 2)
    assert unknown.merge_shape.retry_memory_gb == 2.5 + 0.625
    assert unknown.merge_node == "big"
    learned = plan_on(NODES, need=resources(base=0.5, per_worker=2.0, merge=12.0, merge_retry=20))
    assert learned.merge_shape is not None
    assert (learned.merge_shape.memory_gb, learned.merge_shape.retry_memory_gb) == (12.0, 20.0)
    assert all(shape.memory_gb != 12.0 for shape in learned.worker_shapes)
    huge = plan_on(NODES, need=resources(merge=100.0))
    assert huge.merge_shape is not None
    assert (huge.merge_shape.memory_gb, huge.merge_shape.retry_memory_gb) == (64.0, 64.0)


def test_the_merge_pod_asks_for_no_gpu_even_when_the_workers_do() -> None:
    found = plan_on([Node("gpu", 8, 32, gpus=2), Node("cpu", 16, 64)], need=resources(gpus=1))
    assert found.nodes == ("gpu",)
    assert found.merge_shape is not None and found.merge_shape.gpus == 0
    assert found.merge_node == "cpu"


def test_a_refusal_names_nodes_that_would_fit_but_are_reserved_by_other_runs() -> None:
    nodes = [Node("big", 16, 64, reserved_by="run-other"), Node("small", 4, 16)]
    with pytest.raises(PlanRefused, match=r"reserved by other runs: big \(by run run-other\)"):
        plan_on(nodes, need=resources(per_worker=32.0))


def test_reserving_an_unknown_node_is_refused() -> None:
    with pytest.raises(PlanRefused, match="'gone', is no schedulable node"):
        plan_on(NODES, reserve="gone")


def test_a_cluster_without_nodes_refuses_every_task() -> None:
    with pytest.raises(PlanRefused, match="there is no schedulable node"):
        plan_on([])


def test_the_retry_memory_is_capped_by_the_node_and_then_runs_fewer_processes() -> None:
    """M9: a retry above what the node holds gets the node's memory and fewer processes."""
    node = Node("only", 8, 18)
    found = plan_on([node], units=100, need=resources(base=1.0, per_worker=2.0, retry=4.0))
    shape = found.shape
    assert (shape.processes, shape.memory_gb) == (8, 17.0)
    assert (shape.retry_memory_gb, shape.retry_per_worker_gb) == (18.0, 4.0)
    assert shape.retry_processes == 4


def test_without_a_retry_value_the_retry_is_the_first_plus_a_step() -> None:
    found = plan_on([Node("n", 4, 64)], units=4, need=resources(base=0.0, per_worker=4.0))
    assert found.shape.retry_per_worker_gb == 5.0


def test_requests_are_whole_millicores_and_32_mib_steps() -> None:
    found = plan_on([Node("n", 4, 16)], units=3, need=resources(cores=0.3, per_worker=1.01))
    assert found.shape.cores == pytest.approx(0.9)
    assert found.shape.per_worker_gb * 32 == math.ceil(1.01 * 32)


# --- gaps found by mutation testing (docs/testing.md) ---------------------------------------


def test_a_shape_fits_a_node_only_within_every_resource_bounds_included() -> None:
    """A pod fits a node when its cores, its memory, its retry memory and its GPUs each fit;
    a resource exactly equal to the node's fits."""
    node = Node("n", cores=4, memory_gb=8, gpus=1)
    exact = PodShape(cores=4, memory_gb=8, gpus=1, retry_memory_gb=8)
    assert exact.fits(node)
    assert not PodShape(cores=5, memory_gb=1).fits(node)
    assert not PodShape(cores=1, memory_gb=9).fits(node)
    assert not PodShape(cores=1, memory_gb=1, retry_memory_gb=9).fits(node)
    assert not PodShape(cores=1, memory_gb=1, gpus=2).fits(node)


def test_a_plan_recorded_before_nodes_and_self_merging_existed_reads_with_defaults() -> None:
    """A task's plan stored without `nodes` or `coordinator_merges` reads as none and False;
    a plan and its values read back as written."""
    plan = builders.plan(2)
    old = plan.to_json()
    del old["nodes"], old["coordinator_merges"]
    assert TaskPlan.from_json(old) == plan
    assert TaskPlan.from_json(plan.to_json()) == plan
    node = Node("n", cores=2, memory_gb=4, gpus=1, reserved_by="r1")
    assert Node.from_json(node.to_json()) == node
    shape = PodShape(cores=1, memory_gb=2, scratch_gb=3)
    assert PodShape.from_json(shape.to_json()) == shape
