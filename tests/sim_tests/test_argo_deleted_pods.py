"""The simulated Argo controller when an attempt's pod is deleted: `pod deleted` and a
retry, or the same attempt made again when Argo had not seen it run."""

from __future__ import annotations

from tests.sim import SimCluster
from tests.sim.argo.operation import RECENTLY_STARTED_S
from tests.sim.fixtures import KubeApis
from tests.sim_tests.manifests import (
    SPLIT_RETRIES,
    WAITS,
    logged,
    task,
    worker_template,
    workflow,
)
from tests.sim_tests.workflows import pod_of, submit, wait_node


def test_a_preempted_attempt_errors_pod_deleted_without_exit_code_and_is_retried(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    """Argo marks the deleted attempt Error `pod deleted`, no exit code, and retries.

    The cluster side of K2 (docs/behaviours.md), as the simulator reproduces it.
    """
    template = worker_template(
        code=f"import sys\nif sys.argv[2] == '0': exec({WAITS!r})", retry=SPLIT_RETRIES
    )
    submit(kube, workflow("wf", [task("w0")], template))
    wait_node(sim_cluster, "wf", "w0(0)", "Running")
    first = pod_of(sim_cluster, "wf", "w0(0)")
    sim_cluster.wait_for(lambda: logged(kube, first["metadata"]["name"]))
    sim_cluster.advance(RECENTLY_STARTED_S)
    sim_cluster.preempt(first["metadata"]["name"])
    deleted = wait_node(sim_cluster, "wf", "w0(0)", "Error")
    assert deleted["message"] == "pod deleted"
    assert "outputs" not in deleted
    assert sim_cluster.wait_for_workflow("wf")["status"]["phase"] == "Succeeded"
    assert wait_node(sim_cluster, "wf", "w0(1)")["phase"] == "Succeeded"


def test_a_pod_missing_soon_after_its_node_started_is_made_again_not_taken_as_deleted(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    """Argo takes a missing pod as deleted only RECENTLY_STARTED_POD_DURATION (10 s) after its
    node started (its informer may lag); until then the node runs on and its pod is made
    again (`executeContainer` creates a pod it does not find). Later: `pod deleted` (K2)."""
    submit(kube, workflow("wf", [task("w0")], worker_template(code=WAITS, args=())))
    wait_node(sim_cluster, "wf", "w0", "Running")
    first = pod_of(sim_cluster, "wf", "w0")
    sim_cluster.wait_for(lambda: logged(kube, first["metadata"]["name"]))
    sim_cluster.preempt(first["metadata"]["name"])
    again = sim_cluster.wait_for_pod(
        lambda p: p["metadata"]["uid"] != first["metadata"]["uid"], what="the pod made again"
    )
    assert again["metadata"]["name"] == first["metadata"]["name"]
    assert wait_node(sim_cluster, "wf", "w0")["phase"] in ("Pending", "Running")
    sim_cluster.wait_for(lambda: logged(kube, again["metadata"]["name"]))
    sim_cluster.advance(RECENTLY_STARTED_S)
    sim_cluster.preempt(again["metadata"]["name"])
    assert wait_node(sim_cluster, "wf", "w0", "Error")["message"] == "pod deleted"


def test_a_pod_deleted_before_argo_saw_it_run_is_created_again_as_the_same_attempt(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    """No retry: the attempt stays, a new pod of the same name is made.

    The cluster side of K3 (docs/behaviours.md), as the simulator reproduces it.
    """
    template = worker_template(code=WAITS, args=(), retry=SPLIT_RETRIES)
    with sim_cluster.paused("kueue"):
        submit(kube, workflow("wf", [task("w0")], template))
        first = pod_of(sim_cluster, "wf", "w0(0)")
        sim_cluster.pause("argo")  # Argo saw the pod only gated
    sim_cluster.wait_for(lambda: logged(kube, first["metadata"]["name"]))
    sim_cluster.preempt(first["metadata"]["name"])
    sim_cluster.wait_for(lambda: not sim_cluster.workflow_pods("wf"), what="the pod gone")
    sim_cluster.resume("argo")
    again = sim_cluster.wait_for_pod(
        lambda p: (
            p["metadata"]["name"] == first["metadata"]["name"]
            and p["metadata"]["uid"] != first["metadata"]["uid"]
        ),
        what="the pod made again",
    )
    assert again["metadata"]["annotations"]["workflows.argoproj.io/node-name"] == "wf.w0(0)"
    retry = wait_node(sim_cluster, "wf", "w0")
    assert len(retry["children"]) == 1
    assert wait_node(sim_cluster, "wf", "w0(0)")["phase"] in ("Pending", "Running")
