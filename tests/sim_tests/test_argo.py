"""The simulated Argo controller: DAGs, parameters, continueOn, gated attempts, Stop, TTL."""

from __future__ import annotations

from tests.sim import SimCluster, node_id, pod_name
from tests.sim.fixtures import KubeApis
from tests.sim_tests.manifests import (
    SPLIT_RETRIES,
    WAITS,
    logged,
    task,
    worker_template,
    workflow,
)
from tests.sim_tests.workflows import GROUP, main_env, pod_of, submit, wait_node


def test_a_dag_runs_after_dependencies_and_names_its_nodes_like_argo(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    body = workflow(
        "wf",
        [
            task("a"),
            task(
                "b",
                dependencies=["a"],
                withSequence={"start": "1", "count": "2"},
                arguments={
                    "parameters": [
                        {"name": "code", "value": "0"},
                        {"name": "priority", "value": "simrun-person-extra"},
                    ]
                },
            ),
        ],
        worker_template(retry=SPLIT_RETRIES),
    )
    submit(kube, body)
    done = sim_cluster.wait_for_workflow("wf")
    nodes = done["status"]["nodes"]
    assert done["status"]["phase"] == "Succeeded"
    shape = {n["name"]: (n["type"], n["displayName"], n["phase"]) for n in nodes.values()}
    assert shape == {
        "wf": ("DAG", "wf", "Succeeded"),
        "wf.a": ("Retry", "a", "Succeeded"),
        "wf.a(0)": ("Pod", "a(0)", "Succeeded"),
        "wf.b": ("TaskGroup", "b", "Succeeded"),
        "wf.b(0:1)": ("Retry", "b(0:1)", "Succeeded"),
        "wf.b(0:1)(0)": ("Pod", "b(0:1)(0)", "Succeeded"),
        "wf.b(1:2)": ("Retry", "b(1:2)", "Succeeded"),
        "wf.b(1:2)(0)": ("Pod", "b(1:2)(0)", "Succeeded"),
    }
    assert all(n["id"] == node_id("wf", n["name"]) for n in nodes.values())
    attempt = nodes[node_id("wf", "wf.a(0)")]
    assert attempt["boundaryID"] == "wf" and attempt["templateName"] == "work"
    worker = nodes[node_id("wf", "wf.b(1:2)")]["inputs"]["parameters"]
    assert {p["name"]: p["value"] for p in worker} == {
        "code": "0",
        "priority": "simrun-person-extra",
    }
    assert attempt["outputs"] == {"exitCode": "0"}
    assert attempt["hostNodeName"].startswith("node-")
    assert attempt["children"] == [node_id("wf", "wf.b")]
    assert nodes[node_id("wf", "wf.a")]["children"] == [attempt["id"]]
    pod = pod_of(sim_cluster, "wf", "b(1:2)(0)")
    assert pod["metadata"]["name"] == pod_name("wf", "wf.b(1:2)(0)", "work")
    assert pod["metadata"]["labels"]["workflows.argoproj.io/workflow"] == "wf"
    assert pod["metadata"]["annotations"]["workflows.argoproj.io/node-id"] == node_id(
        "wf", "wf.b(1:2)(0)"
    )
    assert [c["name"] for c in pod["spec"]["containers"]] == ["wait", "main"]
    assert [c["name"] for c in pod["spec"]["initContainers"]] == ["init"]


def test_input_parameters_reach_the_pods_labels_env_and_priority_class(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    submit(kube, workflow("wf", [task("a", priority="simrun-agent-extra")]))
    pod = pod_of(sim_cluster, "wf", "a")
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "simrun-agent-extra"
    assert pod["spec"]["priorityClassName"] == "simrun-agent-extra"
    assert pod["spec"]["priority"] == 100
    assert main_env(pod)["WORKER_PRIORITY"] == "simrun-agent-extra"


def test_continue_on_lets_a_failed_leaf_pass_and_a_failed_dependency_omits_its_dependents(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    """Extras continue on failure; the merge after a failed coordinator never runs.

    The cluster side of M2 (docs/behaviours.md), as the simulator reproduces it.
    """
    submit(
        kube,
        workflow(
            "ok",
            [
                task("w0"),
                task(
                    "extra",
                    "1",
                    continueOn={"failed": True, "error": True},
                    withSequence={"start": "1", "count": "2"},
                ),
            ],
        ),
    )
    assert sim_cluster.wait_for_workflow("ok")["status"]["phase"] == "Succeeded"
    assert wait_node(sim_cluster, "ok", "extra")["phase"] == "Failed"
    submit(kube, workflow("bad", [task("w0", "1"), task("merge", dependencies=["w0"])]))
    assert sim_cluster.wait_for_workflow("bad")["status"]["phase"] == "Failed"
    merge = wait_node(sim_cluster, "bad", "merge")
    assert (merge["type"], merge["phase"]) == ("Skipped", "Omitted")


def test_a_gated_attempt_and_its_retry_node_are_pending_until_it_runs(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    """The attempt waiting for admission is Pending, its Retry node too; both run once the
    pod is admitted and runs.

    The cluster side of K1, B1 (docs/behaviours.md), as the simulator reproduces it.
    """
    template = worker_template(code=WAITS, args=(), retry=SPLIT_RETRIES)
    with sim_cluster.paused("kueue"):
        submit(kube, workflow("wf", [task("w0")], template))
        wait_node(sim_cluster, "wf", "w0(0)", "Pending")
        sim_cluster.settle()
        assert wait_node(sim_cluster, "wf", "w0(0)")["phase"] == "Pending"
        assert wait_node(sim_cluster, "wf", "w0")["phase"] == "Pending"
    wait_node(sim_cluster, "wf", "w0(0)", "Running")
    assert wait_node(sim_cluster, "wf", "w0", "Running")["phase"] == "Running"


def test_stop_fails_pending_nodes_and_leaves_their_gated_pods(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    """After `shutdown: Stop` the pending nodes fail; their gated pods stay.

    The cluster side of K10 (docs/behaviours.md), as the simulator reproduces it.
    """
    sim_cluster.configure_queue({"cpu": "1500m", "memory": "8Gi"})
    template = worker_template(code=WAITS, args=(), retry=SPLIT_RETRIES)
    submit(
        kube, workflow("wf", [task("w0"), task("extra", priority="simrun-agent-extra")], template)
    )
    running = pod_of(sim_cluster, "wf", "w0(0)")
    sim_cluster.wait_for(lambda: logged(kube, running["metadata"]["name"]))
    gated = pod_of(sim_cluster, "wf", "extra(0)")
    # Kueue would admit the gated pod once the stopped one freed the quota: not Argo's doing
    with sim_cluster.paused("kueue"):
        kube.custom.patch_namespaced_custom_object(
            *GROUP, kube.namespace, "workflows", "wf", {"spec": {"shutdown": "Stop"}}
        )
        stopped = sim_cluster.wait_for_workflow("wf")
        assert (stopped["status"]["phase"], stopped["status"]["message"]) == (
            "Failed",
            "Stopped with strategy 'Stop'",
        )
        pending = wait_node(sim_cluster, "wf", "extra(0)")
        assert (pending["phase"], pending["message"]) == (
            "Failed",
            "workflow shutdown with strategy:  Stop",
        )
        assert wait_node(sim_cluster, "wf", "extra")["message"] == "Stopped with strategy 'Stop'"
        assert sim_cluster.pod(gated["metadata"]["name"])["spec"].get("schedulingGates")
    ended = sim_cluster.wait_for(
        lambda: (
            (p := sim_cluster.get_pod(running["metadata"]["name"]))
            and p["status"]["phase"] == "Failed"
            and p
        )
    )
    main = next(c for c in ended["status"]["containerStatuses"] if c["name"] == "main")
    assert main["state"]["terminated"]["exitCode"] == 143


def test_the_emissary_grace_comes_from_the_patched_pod_spec(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    ignores = (
        "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ready', flush=True); signal.pause()"
    )
    template = worker_template(code=ignores, args=(), patch={"terminationGracePeriodSeconds": 90})
    submit(kube, workflow("wf", [task("w0")], template))
    pod = pod_of(sim_cluster, "wf", "w0")
    sim_cluster.wait_for(lambda: logged(kube, pod["metadata"]["name"]))
    kube.custom.patch_namespaced_custom_object(
        *GROUP, kube.namespace, "workflows", "wf", {"spec": {"shutdown": "Stop"}}
    )
    sim_cluster.wait_for_workflow("wf")
    sim_cluster.settle()
    assert sim_cluster.pod(pod["metadata"]["name"])["status"]["phase"] == "Running"
    sim_cluster.advance(90)
    sim_cluster.wait_for(
        lambda: sim_cluster.pod(pod["metadata"]["name"])["status"]["phase"] == "Failed"
    )


def test_a_finished_workflow_is_deleted_with_its_pods_after_its_ttl(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    """The time to live deletes the workflow and, through owners, its pods.

    The cluster side of M12, C10 (docs/behaviours.md), as the simulator reproduces it.
    """
    submit(kube, workflow("wf", [task("w0")], ttlStrategy={"secondsAfterCompletion": 300}))
    sim_cluster.wait_for_workflow("wf")
    sim_cluster.settle()
    assert sim_cluster.workflow("wf") is not None and sim_cluster.workflow_pods("wf")
    sim_cluster.advance(300)
    sim_cluster.wait_for(lambda: sim_cluster.workflow("wf") is None, what="the workflow deleted")
    sim_cluster.wait_for(lambda: not sim_cluster.workflow_pods("wf"), what="its pods deleted")
