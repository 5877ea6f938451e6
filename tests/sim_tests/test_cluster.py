"""The controls of the simulated cluster."""

from __future__ import annotations

from pathlib import Path

from tests.sim import NodeSpec, SimCluster
from tests.sim.fixtures import KubeApis
from tests.sim.resources import CLUSTER_QUEUES, PODS
from tests.sim_tests.manifests import WAITS, logged, pod, queued_pod


def test_added_nodes_join_and_raise_the_automatic_quota(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    sim_cluster.add_node("gpu-1", cpu="8", memory="64Gi", gpus=2)
    node = kube.core.read_node("gpu-1")
    assert node.status.allocatable["nvidia.com/gpu"] == "2"
    assert node.metadata.labels["simrun/worker"] == "true"
    queue = sim_cluster.get(CLUSTER_QUEUES, "simrun", "")
    assert queue is not None
    quota = {
        r["name"]: r["nominalQuota"]
        for r in queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    }
    assert (quota["cpu"], quota["nvidia.com/gpu"]) == ("20", "2")


def test_a_non_worker_node_is_outside_the_queue(tmp_path: Path) -> None:
    nodes = [NodeSpec("infra", worker=False), NodeSpec("w1", cpu="2")]
    with SimCluster(nodes, workdir=tmp_path) as cluster:
        cluster.store.create(PODS, cluster.namespace, queued_pod("q"))
        found = cluster.wait_for(
            lambda: (p := cluster.get_pod("q")) and p["spec"].get("nodeName") and p
        )
        assert found["spec"]["nodeName"] == "w1"


def test_a_restored_node_takes_pods_again(kube: KubeApis, sim_cluster: SimCluster) -> None:
    sim_cluster.lose_node("node-1")
    kube.core.create_namespaced_pod(
        kube.namespace, pod("pinned", WAITS, nodeSelector={"kubernetes.io/hostname": "node-1"})
    )
    sim_cluster.settle()
    assert not sim_cluster.pod("pinned")["spec"].get("nodeName")
    sim_cluster.restore_node("node-1")
    sim_cluster.wait_for(lambda: logged(kube, "pinned"), what="the pod running on node-1")


def test_a_removed_node_is_gone_with_its_pods(kube: KubeApis, sim_cluster: SimCluster) -> None:
    kube.core.create_namespaced_pod(kube.namespace, pod("p", WAITS, nodeName="node-3"))
    sim_cluster.wait_for(lambda: logged(kube, "p"))
    sim_cluster.remove_node("node-3")
    assert [n.metadata.name for n in kube.core.list_node().items] == ["node-1", "node-2"]
    assert sim_cluster.get_pod("p") is None


def test_a_paused_scheduler_binds_nothing_until_resumed(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    with sim_cluster.paused("scheduler"):
        kube.core.create_namespaced_pod(kube.namespace, pod("p"))
        sim_cluster.settle()
        assert "nodeName" not in sim_cluster.pod("p")["spec"]
    sim_cluster.wait_for(lambda: sim_cluster.pod("p")["status"]["phase"] == "Succeeded")


def test_preempting_a_pod_marks_it_and_deletes_it_within_its_grace(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    """The control deletes a pod as Kueue's preemption does.

    The cluster side of K2 (docs/behaviours.md), as the simulator reproduces it.
    """
    kube.core.create_namespaced_pod(kube.namespace, pod("p", WAITS))
    sim_cluster.wait_for(lambda: logged(kube, "p"))
    sim_cluster.preempt("p")
    events = kube.core.list_namespaced_event(
        kube.namespace, field_selector="involvedObject.name=p,reason=Preempted"
    )
    assert len(events.items) == 1
    sim_cluster.wait_for(lambda: sim_cluster.get_pod("p") is None)
