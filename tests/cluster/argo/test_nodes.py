"""Node capacity for the planner, pods' requests as the scheduler counts them, placements."""

from __future__ import annotations

from typing import Any

import pytest

from cluster.argo.nodes import Requests, node_from, pod_requests
from runs.plans import Node
from runs.ports import Placement, PodPhase
from tests.cluster.argo.builders import command_task, launch, shape
from tests.cluster.argo.lab import Lab
from tests.sim import NodeSpec
from tests.sim.resources import PODS
from tests.waiting import wait_for

EXECUTOR = Requests(0.1, 0.25)


def container(name: str, cpu: str, memory: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "resources": {"requests": {"cpu": cpu, "memory": memory}}, **fields}


def node(name: str = "n1", cpu: str = "8", memory: str = "32Gi", **fields: Any) -> dict[str, Any]:
    labels = {"simrun/worker": "true", **fields.pop("labels", {})}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": fields.pop("spec", {}),
        "status": {"allocatable": {"cpu": cpu, "memory": memory, **fields}},
    }


def test_a_pod_requests_its_containers_together() -> None:
    """B11: K5: the main and the executor's wait container add up."""
    pod = {
        "spec": {"containers": [container("wait", "100m", "256Mi"), container("main", "2", "1Gi")]}
    }
    assert pod_requests(pod) == Requests(2.1, 1.25)


def test_an_init_container_alone_counts_when_it_asks_for_more() -> None:
    """B11: init containers run one at a time, before the containers."""
    pod = {
        "spec": {
            "initContainers": [container("init", "4", "256Mi"), container("copy", "1", "3Gi")],
            "containers": [container("main", "2", "1Gi")],
        }
    }
    assert pod_requests(pod) == Requests(4, 3)


def test_a_sidecar_counts_with_the_containers_and_the_init_containers_after_it() -> None:
    """B11: an init container with restartPolicy Always keeps running."""
    pod = {
        "spec": {
            "initContainers": [
                container("sidecar", "500m", "512Mi", restartPolicy="Always"),
                container("init", "1", "1Gi"),
            ],
            "containers": [container("main", "1", "1Gi")],
            "overhead": {"cpu": "250m", "memory": "128Mi"},
        }
    }
    # containers 1 + sidecar 0.5 = 1.5 ≥ init 1 + sidecar 0.5; overhead on top
    assert pod_requests(pod) == Requests(1.75, 1.625)


def test_a_limit_without_a_request_is_the_request() -> None:
    """B11: the API server copies limits into missing requests."""
    pod = {
        "spec": {
            "containers": [
                {"name": "m", "resources": {"limits": {"cpu": "3", "nvidia.com/gpu": "1"}}}
            ]
        }
    }
    assert pod_requests(pod) == Requests(3, 0, 1)


def test_node_capacity_is_allocatable_less_the_wait_container_and_other_pods_rounded_down() -> None:
    """B3: whole cores and GiB, so a pod sized for the node fits beside the others."""
    found = node_from(
        node(cpu="8", memory="32Gi", **{"nvidia.com/gpu": "2"}), Requests(0.5, 1.5, 1), EXECUTOR
    )
    assert found == Node("n1", 7.0, 30.0, 1, None, scratch_gb=0.0)


def test_node_scratch_is_allocatable_ephemeral_storage_less_other_pods_rounded_down() -> None:
    """The scratch the planner checks a pod's against; none reported is none to give."""
    used = Requests(0.5, 1.5, 0, scratch_gb=10.5)
    found = node_from(node(**{"ephemeral-storage": "100Gi"}), used, EXECUTOR)
    assert found is not None and found.scratch_gb == 89.0
    pod = {
        "spec": {
            "containers": [{"name": "m", "resources": {"limits": {"ephemeral-storage": "2Gi"}}}]
        }
    }
    assert pod_requests(pod) == Requests(scratch_gb=2.0)


@pytest.mark.parametrize(
    "fields",
    [
        {"labels": {"simrun/worker": "false"}},
        {"spec": {"unschedulable": True}},
        {"spec": {"taints": [{"key": "maintenance", "effect": "NoSchedule"}]}},
        {"spec": {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]}},
    ],
)
def test_nodes_pods_cannot_use_are_left_out(fields: dict[str, Any]) -> None:
    """B3: not a worker, cordoned, or a taint that keeps pods off."""
    assert node_from(node(**fields), Requests(), EXECUTOR) is None


def test_a_reservation_or_a_soft_taint_does_not_keep_a_node_out() -> None:
    """B3: a reservation of simrun aside; PreferNoSchedule keeps no pod off."""
    taints = [
        {"key": "simrun/reserved", "value": "r9", "effect": "NoExecute"},
        {"key": "busy", "effect": "PreferNoSchedule"},
    ]
    found = node_from(
        node(spec={"taints": taints}, labels={"simrun/reserved": "r9"}), Requests(), EXECUTOR
    )
    assert found is not None and found.reserved_by == "r9"


def test_the_backend_lists_worker_nodes_less_what_pods_of_no_run_request(sim_lab: Lab) -> None:
    """B3: K5: a DaemonSet's pod counts against its node; a node without the worker label and
    a lost node are not listed."""
    assert sim_lab.sim is not None
    sim_lab.sim.add_node(NodeSpec("infra", worker=False))
    sim_lab.sim.add_node(NodeSpec("node-4", cpu="2", memory="8Gi"))
    daemon = {
        "metadata": {"name": "nfs-driver", "labels": {"app": "nfs"}},
        "spec": {
            "nodeName": "node-1",
            "containers": [container("driver", "500m", "1536Mi", image="nfs")],
        },
    }
    sim_lab.sim.store.create(PODS, "kube-system", daemon)
    sim_lab.sim.lose_node("node-3")

    nodes = wait_for(lambda: sim_lab.backend.nodes() if len(sim_lab.backend.nodes()) == 3 else None)

    assert nodes == [
        Node("node-1", 3.0, 14.0, 0, None, scratch_gb=100.0),
        Node("node-2", 3.0, 15.0, 0, None, scratch_gb=100.0),
        Node("node-4", 1.0, 7.0, 0, None, scratch_gb=100.0),
    ]


def test_placements_are_the_live_pods_of_runs_with_node_and_requests(sim_lab: Lab) -> None:
    """B12: K5: a run's pod with its node, its requests counting the wait container; ended
    pods are not placements."""
    code = "import time; time.sleep(60)"
    run = launch("r1", command_task("nap", code, pod=shape(2, 1.5)), command_task("quick", "pass"))
    name = sim_lab.backend.submit(run)
    wait_for(lambda: sim_lab.backend.status(name).pods["nap"].phase is PodPhase.RUNNING)
    wait_for(lambda: sim_lab.backend.status(name).pods["quick"].phase is PodPhase.SUCCEEDED)

    [placement] = sim_lab.backend.placements()

    assert placement == Placement(
        run_id="r1",
        task_id="nap",
        pod="nap",
        node=sim_lab.backend.status(name).pods["nap"].node,
        phase="running",
        cores=2.1,
        memory_gb=1.75,
    )
