"""Kueue's Workload objects as the simulator serves them: one per queued pod, made as Kueue's
pod integration makes it, its status following admission, preemption and the pod's end
(tests/sim/workloads.py)."""

from __future__ import annotations

import hashlib
from typing import Any

from tests.sim import NodeSpec, SimCluster
from tests.sim.fixtures import KubeApis
from tests.sim.resources import PODS, WORKLOADS
from tests.sim.workloads import workload_name
from tests.sim_tests.manifests import WAITS, queued_pod

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"


def workloads(kube: KubeApis) -> list[dict[str, Any]]:
    found = kube.custom.list_namespaced_custom_object(GROUP, VERSION, kube.namespace, "workloads")
    return list(found["items"])


def conditions(workload: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {
        c["type"]: (c["status"], c["reason"])
        for c in (workload.get("status") or {}).get("conditions") or []
    }


def test_a_workloads_name_is_kueues_for_the_pod() -> None:
    digest = hashlib.sha1(b"Pod\n\nscan-w0\nuid-1").hexdigest()[:5]
    assert workload_name("scan-w0", "uid-1") == f"pod-scan-w0-{digest}"
    assert len(workload_name("x" * 300, "uid-1")) == 253


def test_a_queued_pod_has_a_workload_as_kueue_makes_it(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    with sim_cluster.paused("kueue"):
        kube.core.create_namespaced_pod(kube.namespace, queued_pod("q", WAITS))
    sim_cluster.wait_for(lambda: workloads(kube), what="the workload")
    [workload] = workloads(kube)
    pod = sim_cluster.pod("q")
    uid = pod["metadata"]["uid"]
    assert workload["metadata"]["name"] == workload_name("q", uid)
    assert workload["metadata"]["labels"] == {"kueue.x-k8s.io/job-uid": uid}
    assert workload["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    assert workload["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "q",
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    spec = workload["spec"]
    [pod_set] = spec["podSets"]
    assert (pod_set["name"], pod_set["count"]) == ("main", 1)
    assert pod_set["template"]["spec"]["containers"] == pod["spec"]["containers"]
    assert pod_set["topologyRequest"] == {
        "required": "kubernetes.io/hostname",
        "podIndexLabel": "kueue.x-k8s.io/pod-group-pod-index",
    }
    assert spec["queueName"] == "simrun"
    assert spec["priorityClassRef"] == {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": "simrun-person",
    }
    assert spec["priority"] == 500


def test_an_admitted_workload_names_its_queue_flavor_usage_and_node(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    kube.core.create_namespaced_pod(kube.namespace, queued_pod("q", WAITS))
    sim_cluster.wait_for(
        lambda: any(conditions(w).get("Admitted") == ("True", "Admitted") for w in workloads(kube)),
        what="the workload admitted",
    )
    [workload] = workloads(kube)
    assert conditions(workload)["QuotaReserved"] == ("True", "QuotaReserved")
    admission = workload["status"]["admission"]
    assert admission["clusterQueue"] == "simrun"
    [assigned] = admission["podSetAssignments"]
    node = sim_cluster.pod("q")["spec"]["nodeSelector"]["kubernetes.io/hostname"]
    assert assigned["flavors"] == {"cpu": "simrun", "memory": "simrun"}
    assert assigned["resourceUsage"]["cpu"] == "1"
    assert assigned["count"] == 1
    assert assigned["topologyAssignment"]["slices"][0]["valuesPerLevel"] == [
        {"universalValue": node}
    ]


def test_a_preempted_workload_is_evicted_and_goes_with_its_pod(tmp_path: Any) -> None:
    with SimCluster([NodeSpec("n", cpu="1")], workdir=tmp_path) as cluster:
        low = queued_pod("low", WAITS, priority="simrun-agent-extra")
        cluster.store.create(PODS, cluster.namespace, low)
        cluster.wait_for(
            lambda: (cluster.get_pod("low") or {}).get("status", {}).get("phase") == "Running"
        )
        name = workload_name("low", cluster.pod("low")["metadata"]["uid"])
        since = cluster.store.rv
        cluster.store.create(PODS, cluster.namespace, queued_pod("high", priority="simrun-owner"))

        def evicted() -> dict[str, Any] | None:
            for change in cluster.store.changes_since(since):
                obj = change.obj
                if obj["metadata"]["name"] == name and "Evicted" in conditions(obj):
                    return obj
            return None

        found = cluster.wait_for(evicted, what="the low workload evicted")
        assert conditions(found)["Evicted"] == ("True", "Preempted")
        assert conditions(found)["Preempted"] == ("True", "InClusterQueue")
        assert "admission" not in found["status"]
        cluster.wait_for(lambda: cluster.get_pod("low") is None, what="the victim gone")
        gone = cluster.wait_for(
            lambda: cluster.store.find(WORKLOADS, cluster.namespace, name) is None,
            what="its workload gone with it",
        )
        assert gone


def test_a_workload_finishes_when_its_pod_ends(kube: KubeApis, sim_cluster: SimCluster) -> None:
    kube.core.create_namespaced_pod(kube.namespace, queued_pod("q"))
    sim_cluster.wait_for(
        lambda: any("Finished" in conditions(w) for w in workloads(kube)),
        what="the workload finished",
    )
    [workload] = workloads(kube)
    assert conditions(workload)["Finished"] == ("True", "Succeeded")
    assert not workload["metadata"].get("finalizers")
