"""The simulated kubelet: containers as local processes, memory kills, stops, logs, node loss."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from simrun_harness.cgroup import Cgroup
from tests.sim import NodeSpec, SimCluster
from tests.sim.admission import DEFAULT_TOLERATION_SECONDS
from tests.sim.fixtures import KubeApis
from tests.sim.resources import PODS
from tests.sim_tests.manifests import WAITS, logged, pod

ENDED = ("Succeeded", "Failed")


def phase_of(cluster: SimCluster, name: str) -> str | None:
    found = cluster.get(PODS, name)
    return (found or {}).get("status", {}).get("phase")


def ended(cluster: SimCluster, name: str) -> dict[str, Any]:
    return cluster.wait_for(
        lambda: phase_of(cluster, name) in ENDED and cluster.get(PODS, name),
        what=f"pod {name} to end",
    )


def main_state(found: dict[str, Any]) -> dict[str, Any]:
    (main,) = [c for c in found["status"]["containerStatuses"] if c["name"] == "main"]
    return main["state"]


def test_a_pod_runs_its_command_and_reports_the_exit(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    kube.core.create_namespaced_pod(kube.namespace, pod("p", "import sys; sys.exit(3)"))
    found = ended(sim_cluster, "p")
    terminated = main_state(found)["terminated"]
    assert found["status"]["phase"] == "Failed"
    assert (terminated["exitCode"], terminated["reason"]) == (3, "Error")
    assert found["spec"]["nodeName"].startswith("node-")


def test_a_container_sees_its_node_and_pod_names(kube: KubeApis, sim_cluster: SimCluster) -> None:
    body = pod("p", "import os; print(os.environ['NODE'], os.environ['POD'], os.environ['X'])")
    body["spec"]["containers"][0]["env"] = [
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "X", "value": "$(POD)-x"},
    ]
    kube.core.create_namespaced_pod(kube.namespace, body)
    found = ended(sim_cluster, "p")
    log = kube.core.read_namespaced_pod_log("p", kube.namespace, _preload_content=False).data
    assert log.decode().split() == [found["spec"]["nodeName"], "p", "p-x"]


def test_a_container_over_its_memory_limit_is_killed_whole_as_oomkilled(
    kube: KubeApis, sim_cluster: SimCluster, tmp_path: Path
) -> None:
    """A kill for memory kills the whole container: exit 137, reason OOMKilled.

    The cluster side of K6 (docs/behaviours.md), as the simulator reproduces it.
    """
    child_pid = tmp_path / "child.pid"
    code = (
        "import subprocess, sys, time; "
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        f"open({str(child_pid)!r}, 'w').write(str(child.pid)); "
        "hog = bytearray(200 * 2**20); time.sleep(60)"
    )
    kube.core.create_namespaced_pod(kube.namespace, pod("hog", code, memory="64Mi"))
    found = ended(sim_cluster, "hog")
    assert main_state(found)["terminated"]["exitCode"] == 137
    assert main_state(found)["terminated"]["reason"] == "OOMKilled"
    child = int(child_pid.read_text())
    sim_cluster.wait_for(lambda: not _alive(child), what="the container's other process gone")
    cgroup = sim_cluster.kubelet.runs[found["metadata"]["uid"]].containers["main"].cgroup
    assert cgroup is not None
    events = Cgroup(cgroup.root)
    assert (events.oom_kills(), events.memory_max_bytes()) == (2, 64 * 2**20)
    assert "oom_group_kill 1" in (cgroup.root / "memory.events").read_text()


def test_a_single_process_kill_is_counted_where_the_harness_reads_it(tmp_path: Path) -> None:
    """C8: with the kubelet's singleProcessOOMKill the kernel kills the largest process
    only; the container goes on and reads the kill in its cgroup's memory.events (through
    SIMRUN_CGROUP_ROOT), as simrun's harness does to tell a kill for memory."""
    code = (
        "import os, subprocess, sys; from pathlib import Path; "
        "from simrun_harness.cgroup import Cgroup; "
        "cgroup = Cgroup(Path(os.environ['SIMRUN_CGROUP_ROOT'])); "
        "before = cgroup.oom_kills(); "
        "hog = 'import time; data = bytearray(200 * 2**20); time.sleep(60)'; "
        "code = subprocess.run([sys.executable, '-c', hog]).returncode; "
        "print(before, code, cgroup.oom_kills(), flush=True)"
    )
    with SimCluster([NodeSpec("n")], workdir=tmp_path, single_process_oom_kill=True) as cluster:
        cluster.store.create(PODS, cluster.namespace, pod("hog", code, memory="128Mi"))
        found = ended(cluster, "hog")
        assert main_state(found)["terminated"]["exitCode"] == 0
        uid = found["metadata"]["uid"]
        log = (cluster.kubelet.runs[uid].containers["main"].log_path).read_text()
    assert log.split() == ["0", "-9", "1"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_deleting_a_running_pod_stops_it_with_sigterm_then_it_is_gone(
    kube: KubeApis, sim_cluster: SimCluster, tmp_path: Path
) -> None:
    """Deleted within its grace, the process sees SIGTERM; no final status is reported.

    The cluster side of K2 (docs/behaviours.md), as the simulator reproduces it.
    """
    mark = tmp_path / "stopped"
    code = (
        f"import signal, sys; signal.signal(signal.SIGTERM, lambda *a: "
        f"(open({str(mark)!r}, 'w').write('term'), sys.exit(143))); "
        "print('ready', flush=True); signal.pause()"
    )
    kube.core.create_namespaced_pod(kube.namespace, pod("p", code, grace=30))
    sim_cluster.wait_for(lambda: logged(kube, "p"), what="the process to handle SIGTERM")
    _, status, _ = kube.core.delete_namespaced_pod_with_http_info("p", kube.namespace)
    assert status == 202
    sim_cluster.wait_for(lambda: sim_cluster.get(PODS, "p") is None, what="the pod gone")
    assert mark.read_text() == "term"


def test_a_process_ignoring_sigterm_is_killed_when_the_grace_ends(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    code = (
        "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ready', flush=True); signal.pause()"
    )
    kube.core.create_namespaced_pod(kube.namespace, pod("p", code, grace=600))
    sim_cluster.wait_for(lambda: logged(kube, "p"), what="the process to ignore SIGTERM")
    kube.core.delete_namespaced_pod("p", kube.namespace)
    sim_cluster.settle()
    assert sim_cluster.get(PODS, "p") is not None
    sim_cluster.advance(600)
    sim_cluster.wait_for(lambda: sim_cluster.get(PODS, "p") is None, what="the pod killed")


def test_logs_are_read_while_the_pod_exists_and_gone_with_it(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    """The logs of a deleted pod are gone with it.

    The cluster side of K11 (docs/behaviours.md), as the simulator reproduces it.
    """
    kube.core.create_namespaced_pod(kube.namespace, pod("p", "print('one'); print('two')"))
    ended(sim_cluster, "p")
    tail = kube.core.read_namespaced_pod_log(
        "p", kube.namespace, tail_lines=1, _preload_content=False
    ).data
    assert tail == b"two\n"
    kube.core.delete_namespaced_pod("p", kube.namespace)
    with pytest.raises(ApiException) as raised:
        kube.core.read_namespaced_pod_log("p", kube.namespace)
    assert raised.value.status == 404


def test_the_log_of_a_pod_without_a_node_is_a_400(kube: KubeApis, sim_cluster: SimCluster) -> None:
    kube.core.create_namespaced_pod(kube.namespace, pod("p", cpu="64"))
    sim_cluster.settle()
    with pytest.raises(ApiException) as raised:
        kube.core.read_namespaced_pod_log("p", kube.namespace)
    assert raised.value.status == 400
    assert "does not have a host assigned" in raised.value.body


def test_a_lost_nodes_pods_stay_for_their_toleration_then_linger_terminating(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    """Node loss: the processes die, the node turns unreachable; its pods stay, not ready,
    for the 300 s of their default toleration, are then evicted and stay terminating (no
    kubelet confirms) until the node is removed."""
    kube.core.create_namespaced_pod(kube.namespace, pod("p", WAITS, nodeName="node-2"))
    sim_cluster.wait_for(lambda: logged(kube, "p"), what="the process to run")
    process = sim_cluster.kubelet.runs[sim_cluster.pod("p")["metadata"]["uid"]]
    pid = process.containers["main"].popen.pid  # type: ignore[union-attr]
    sim_cluster.lose_node("node-2")
    assert not _alive(pid)
    node = kube.core.read_node("node-2")
    assert node.status.conditions[0].status == "Unknown"
    assert {t.effect for t in node.spec.taints} == {"NoSchedule", "NoExecute"}
    found = sim_cluster.pod("p")
    assert {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
    } in found["spec"]["tolerations"]
    assert {c["type"]: c["status"] for c in found["status"]["conditions"]}["Ready"] == "False"
    sim_cluster.advance(DEFAULT_TOLERATION_SECONDS - 10)
    sim_cluster.settle()
    assert "deletionTimestamp" not in sim_cluster.pod("p")["metadata"]
    sim_cluster.advance(10)
    sim_cluster.wait_for(
        lambda: "deletionTimestamp" in sim_cluster.pod("p")["metadata"], what="the eviction"
    )
    sim_cluster.settle()
    assert sim_cluster.pod("p")["status"]["phase"] == "Running"  # as last reported
    sim_cluster.remove_node("node-2")
    sim_cluster.wait_for(lambda: sim_cluster.get_pod("p") is None, what="the pod collected")


def test_a_pod_tolerating_unreachable_for_ever_stays_on_a_lost_node(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    """A toleration without tolerationSeconds tolerates for ever; once the node is back its
    kubelet reports the container it lost: 137 ContainerStatusUnknown, the pod Failed."""
    forever = {"key": "node.kubernetes.io/unreachable", "operator": "Exists"}
    body = pod("p", WAITS, nodeName="node-2", tolerations=[forever])
    kube.core.create_namespaced_pod(kube.namespace, body)
    sim_cluster.wait_for(lambda: logged(kube, "p"), what="the process to run")
    sim_cluster.lose_node("node-2")
    sim_cluster.advance(10 * DEFAULT_TOLERATION_SECONDS)
    sim_cluster.settle()
    assert "deletionTimestamp" not in sim_cluster.pod("p")["metadata"]
    sim_cluster.restore_node("node-2")
    failed = sim_cluster.wait_for(
        lambda: (p := sim_cluster.pod("p"))["status"]["phase"] == "Failed" and p,
        what="the pod failed",
    )
    assert main_state(failed)["terminated"]["reason"] == "ContainerStatusUnknown"
    assert main_state(failed)["terminated"]["exitCode"] == 137


def test_mapped_volumes_become_local_directories(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with SimCluster(
        [NodeSpec("n")], workdir=tmp_path / "sim", volume_dirs={"store-claim": store}
    ) as cluster:
        body = pod("p", "import os, sys; open(os.path.join(sys.argv[1], 'out'), 'w').write('x')")
        body["spec"]["containers"][0]["args"] = ["/mnt/store/runs/r1"]
        body["spec"]["containers"][0]["volumeMounts"] = [
            {"name": "store", "mountPath": "/mnt/store/runs/r1", "subPath": "runs/r1"}
        ]
        body["spec"]["volumes"] = [
            {"name": "store", "persistentVolumeClaim": {"claimName": "store-claim"}}
        ]
        cluster.store.create(PODS, cluster.namespace, body)
        assert ended(cluster, "p")["status"]["phase"] == "Succeeded"
    assert (store / "runs" / "r1" / "out").read_text() == "x"


def test_a_pod_whose_configmap_is_missing_waits_in_container_creating(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    body = pod("p")
    body["spec"]["volumes"] = [{"name": "ctx", "configMap": {"name": "absent"}}]
    kube.core.create_namespaced_pod(kube.namespace, body)
    found = sim_cluster.wait_for(
        lambda: (
            (sim_cluster.get(PODS, "p") or {}).get("status", {}).get("containerStatuses")
            and sim_cluster.get(PODS, "p")
        )
    )
    assert main_state(found) == {"waiting": {"reason": "ContainerCreating"}}
    assert found["status"]["phase"] == "Pending"
