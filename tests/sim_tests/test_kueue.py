"""Simulated Kueue and scheduler: gates, quota, priority, preemption, topology, taints."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from tests.sim import NodeSpec, SimCluster
from tests.sim.fixtures import KubeApis
from tests.sim.kueue import ADMISSION_GATE, FINALIZER, TOPOLOGY_GATE
from tests.sim.quantities import pod_requests
from tests.sim.resources import PODS
from tests.sim_tests.manifests import WAITS, logged, pod, queued_pod


def stored(cluster: SimCluster, name: str) -> dict[str, Any]:
    found = cluster.get(PODS, name)
    assert found is not None, f"pod {name} does not exist"
    return found


def gated(cluster: SimCluster, name: str) -> bool:
    return bool(stored(cluster, name)["spec"].get("schedulingGates"))


def running(cluster: SimCluster, name: str) -> bool:
    return (cluster.get(PODS, name) or {}).get("status", {}).get("phase") == "Running"


def marked_for_deletion(cluster: SimCluster, name: str, since: int) -> dict[str, Any] | None:
    """The pod as it was when its deletion was asked for, if that happened after `since`."""
    for change in cluster.store.changes_since(since):
        obj = change.obj
        ours = change.info == PODS and obj["metadata"]["name"] == name
        if ours and obj["metadata"].get("deletionTimestamp"):
            return obj
    return None


def test_a_queued_pod_is_gated_and_pending_until_admitted(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    """A pod gated by Kueue stays Pending with its scheduling gates.

    The cluster side of K1 (docs/behaviours.md), as the simulator reproduces it.
    """
    with sim_cluster.paused("kueue"):
        kube.core.create_namespaced_pod(kube.namespace, queued_pod("q", WAITS))
        sim_cluster.settle()
        found = kube.core.read_namespaced_pod("q", kube.namespace)
        assert [g.name for g in found.spec.scheduling_gates] == [ADMISSION_GATE, TOPOLOGY_GATE]
        assert found.status.phase == "Pending"
        assert found.metadata.labels["kueue.x-k8s.io/managed"] == "true"
        scheduled = found.status.conditions[0]
        assert (scheduled.type, scheduled.reason) == ("PodScheduled", "SchedulingGated")
    sim_cluster.wait_for(lambda: running(sim_cluster, "q"), what="the pod admitted and running")


def test_admission_adds_the_host_and_the_flavor_to_the_node_selector(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    """On admission Kueue adds the host and the flavor's labels to the node selector.

    The cluster side of K4 (docs/behaviours.md), as the simulator reproduces it.
    """
    kube.core.create_namespaced_pod(kube.namespace, queued_pod("q"))
    sim_cluster.wait_for(lambda: not gated(sim_cluster, "q"))
    found = stored(sim_cluster, "q")
    selector = found["spec"]["nodeSelector"]
    assert selector["simrun/worker"] == "true"
    assert selector["kubernetes.io/hostname"] in ("node-1", "node-2", "node-3")
    sim_cluster.wait_for(lambda: stored(sim_cluster, "q")["spec"].get("nodeName"))
    assert stored(sim_cluster, "q")["spec"]["nodeName"] == selector["kubernetes.io/hostname"]


def test_admission_takes_priority_first_then_the_oldest(tmp_path: Any) -> None:
    with SimCluster([NodeSpec("n", cpu="2")], workdir=tmp_path) as cluster:
        with cluster.paused("kueue"):
            for name, priority in (
                ("old", "simrun-agent"),
                ("young", "simrun-agent"),
                ("high", "simrun-owner"),
            ):
                cluster.store.create(
                    PODS, cluster.namespace, queued_pod(name, WAITS, priority=priority)
                )
        cluster.wait_for(lambda: not gated(cluster, "high") and not gated(cluster, "old"))
        cluster.settle()
        assert gated(cluster, "young")


def test_the_quota_caps_what_is_admitted(tmp_path: Any) -> None:
    with SimCluster(2, workdir=tmp_path) as cluster:
        cluster.configure_queue({"cpu": "1", "memory": "8Gi"})
        for name in ("a", "b"):
            cluster.store.create(PODS, cluster.namespace, queued_pod(name, WAITS))
        cluster.wait_for(lambda: not gated(cluster, "a"))
        cluster.settle()
        assert gated(cluster, "b")


def test_a_higher_priority_pod_preempts_a_lower_one_by_deleting_it(tmp_path: Any) -> None:
    """Kueue preempts for a node's capacity by deleting the lower pod within its grace.

    The cluster side of K2, K4 (docs/behaviours.md), as the simulator reproduces it.
    """
    with SimCluster([NodeSpec("n", cpu="1")], workdir=tmp_path) as cluster:
        low = queued_pod("low", WAITS, priority="simrun-agent-extra")
        cluster.store.create(PODS, cluster.namespace, low)
        cluster.wait_for(lambda: running(cluster, "low"))
        since = cluster.store.rv
        cluster.store.create(PODS, cluster.namespace, queued_pod("high", priority="simrun-owner"))
        # The victim exits at once on SIGTERM, so its terminating state may be gone before a
        # poll sees it: look for it in the store's history, as a watch would.
        evicted = cluster.wait_for(lambda: marked_for_deletion(cluster, "low", since))
        reasons = [
            c.get("reason")
            for c in evicted["status"]["conditions"]
            if c["type"] == "TerminationTarget"
        ]
        assert reasons == ["WorkloadEvictedDueToPreempted"]
        cluster.wait_for(lambda: cluster.get_pod("low") is None, what="the victim gone")
        cluster.wait_for(lambda: not gated(cluster, "high"), what="the preemptor admitted")


def test_a_pod_of_equal_priority_does_not_preempt(tmp_path: Any) -> None:
    with SimCluster([NodeSpec("n", cpu="1")], workdir=tmp_path) as cluster:
        cluster.store.create(PODS, cluster.namespace, queued_pod("first", WAITS))
        cluster.wait_for(lambda: running(cluster, "first"))
        cluster.store.create(PODS, cluster.namespace, queued_pod("second"))
        cluster.settle()
        assert gated(cluster, "second")
        assert not stored(cluster, "first")["metadata"].get("deletionTimestamp")


def test_a_reservation_taint_evicts_other_pods_and_keeps_the_tolerating_ones(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    """The NoExecute taint of a reservation keeps the pods of other runs off the node.

    The cluster side of K4 (docs/behaviours.md), as the simulator reproduces it.
    """
    toleration = [{"key": "simrun/reserved", "operator": "Equal", "value": "r1"}]
    kube.core.create_namespaced_pod(kube.namespace, pod("other", WAITS, nodeName="node-1"))
    kube.core.create_namespaced_pod(
        kube.namespace, pod("mine", WAITS, nodeName="node-1", tolerations=toleration)
    )
    sim_cluster.wait_for(lambda: logged(kube, "other") and logged(kube, "mine"))
    kube.core.patch_node(
        "node-1",
        {
            "metadata": {"labels": {"simrun/reserved": "r1"}},
            "spec": {"taints": [{"key": "simrun/reserved", "value": "r1", "effect": "NoExecute"}]},
        },
    )
    sim_cluster.wait_for(lambda: sim_cluster.get(PODS, "other") is None, what="other evicted")
    sim_cluster.settle()
    assert running(sim_cluster, "mine")


def test_a_reserved_run_is_admitted_onto_its_node_only(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    """Admission honours a reservation's node selector and toleration.

    The cluster side of K4 (docs/behaviours.md), as the simulator reproduces it.
    """
    kube.core.patch_node(
        "node-3",
        {
            "metadata": {"labels": {"simrun/reserved": "r1"}},
            "spec": {"taints": [{"key": "simrun/reserved", "value": "r1", "effect": "NoExecute"}]},
        },
    )
    body = queued_pod(
        "mine",
        nodeSelector={"simrun/reserved": "r1"},
        tolerations=[{"key": "simrun/reserved", "operator": "Equal", "value": "r1"}],
    )
    kube.core.create_namespaced_pod(kube.namespace, body)
    kube.core.create_namespaced_pod(kube.namespace, queued_pod("theirs"))
    sim_cluster.wait_for(
        lambda: not gated(sim_cluster, "mine") and not gated(sim_cluster, "theirs")
    )
    assert stored(sim_cluster, "mine")["spec"]["nodeSelector"]["kubernetes.io/hostname"] == "node-3"
    assert (
        stored(sim_cluster, "theirs")["spec"]["nodeSelector"]["kubernetes.io/hostname"] != "node-3"
    )


def test_a_pod_that_fits_no_node_is_unschedulable_with_the_reasons(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    kube.core.create_namespaced_pod(kube.namespace, pod("big", cpu="5"))
    condition = sim_cluster.wait_for(
        lambda: next(
            (
                c
                for c in stored(sim_cluster, "big")["status"].get("conditions") or []
                if c.get("reason") == "Unschedulable"
            ),
            None,
        )
    )
    assert condition["message"] == "0/3 nodes are available: 3 Insufficient cpu."


def test_init_and_wait_containers_count_in_a_pods_request() -> None:
    """Containers together, or an init container alone when larger; sidecars add.

    The cluster side of B11, K5 (docs/behaviours.md), as the simulator reproduces it.
    """

    def container(name: str, cpu: str, memory: str, **extra: Any) -> dict[str, Any]:
        return {"name": name, "resources": {"requests": {"cpu": cpu, "memory": memory}}, **extra}

    argo_pod = {
        "spec": {
            "initContainers": [container("init", "100m", "256Mi")],
            "containers": [container("wait", "100m", "256Mi"), container("main", "2", "3Gi")],
        }
    }
    assert pod_requests(argo_pod) == {"cpu": Decimal("2.1"), "memory": Decimal(3328 * 2**20)}
    big_init = {
        "spec": {
            "initContainers": [container("i", "4", "1Gi")],
            "containers": [container("c", "1", "2Gi")],
            "overhead": {"cpu": "250m"},
        }
    }
    assert pod_requests(big_init) == {"cpu": Decimal("4.25"), "memory": Decimal(2 * 2**30)}
    sidecar = {
        "spec": {
            "initContainers": [
                container("s", "1", "1Gi", restartPolicy="Always"),
                container("i", "1", "1Gi"),
            ],
            "containers": [container("c", "1", "1Gi")],
        }
    }
    assert pod_requests(sidecar)["cpu"] == Decimal(2)


def test_the_executor_containers_make_a_full_node_refuse_a_pod(tmp_path: Any) -> None:
    """A main container of the node's whole CPU does not fit beside init and wait.

    The cluster side of K5 (docs/behaviours.md), as the simulator reproduces it.
    """
    executor = {"cpu": "100m", "memory": "256Mi"}
    body = pod("argo-like", cpu="2")
    body["spec"]["initContainers"] = [
        {"name": "init", "image": "x", "resources": {"requests": executor, "limits": executor}}
    ]
    body["spec"]["containers"].insert(
        0, {"name": "wait", "image": "x", "resources": {"requests": executor, "limits": executor}}
    )
    with SimCluster([NodeSpec("n", cpu="2")], workdir=tmp_path) as cluster:
        cluster.store.create(PODS, cluster.namespace, body)
        cluster.wait_for(
            lambda: any(
                c.get("reason") == "Unschedulable"
                for c in stored(cluster, "argo-like")["status"].get("conditions") or []
            )
        )


def test_a_deleted_pod_lingers_with_its_final_status_until_kueue_removes_its_finalizer(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    """Kueue's webhook adds the finalizer `kueue.x-k8s.io/managed`; a deleted pod stays,
    Failed with its container's exit, until Kueue's pod controller removes it."""
    kube.core.create_namespaced_pod(kube.namespace, queued_pod("q", WAITS))
    sim_cluster.wait_for(lambda: logged(kube, "q"), what="the pod running")
    assert stored(sim_cluster, "q")["metadata"]["finalizers"] == [FINALIZER]
    with sim_cluster.paused("kueue-pods"):
        kube.core.delete_namespaced_pod("q", kube.namespace)
        lingering = sim_cluster.wait_for(
            lambda: (
                stored(sim_cluster, "q")["status"]["phase"] == "Failed" and stored(sim_cluster, "q")
            ),
            what="the pod's final status",
        )
        sim_cluster.settle()
        assert stored(sim_cluster, "q")["metadata"]["deletionTimestamp"]
        main = lingering["status"]["containerStatuses"][0]["state"]["terminated"]
        assert main["exitCode"] == 143
    sim_cluster.wait_for(lambda: sim_cluster.get(PODS, "q") is None, what="the pod gone")
