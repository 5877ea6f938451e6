"""The simulated Argo controller: DAGs, retries, substitutions, deletions, Stop, TTL."""

from __future__ import annotations

from typing import Any

from tests.sim import SimCluster, node_id, pod_name
from tests.sim.argo.operation import RECENTLY_STARTED_S
from tests.sim.fixtures import KubeApis
from tests.sim_tests.manifests import (
    FAILS_FIRST,
    WAITS,
    logged,
    task,
    worker_template,
    workflow,
)

GROUP = ("argoproj.io", "v1alpha1")
SPLIT_RETRIES = {
    "limit": 100,
    "retryPolicy": "Always",
    "expression": "lastRetry.exitCode != '3' && lastRetry.exitCode != '4'",
}


def submit(kube: KubeApis, body: dict[str, Any]) -> None:
    kube.custom.create_namespaced_custom_object(*GROUP, kube.namespace, "workflows", body)


def wait_node(cluster: SimCluster, wf: str, name: str, *phases: str) -> dict[str, Any]:
    """The status node `<wf>.<name>` once in one of `phases` (any phase when none given)."""

    def reached() -> dict[str, Any] | None:
        found = cluster.node_status(wf, name)
        return found if found and (not phases or found["phase"] in phases) else None

    return cluster.wait_for(reached, what=f"node {name} in {phases}")


def pod_of(cluster: SimCluster, wf: str, name: str) -> dict[str, Any]:
    """The pod of the node `<wf>.<name>`."""
    return cluster.wait_for_pod(
        lambda p: (
            p["metadata"]["annotations"].get("workflows.argoproj.io/node-name") == f"{wf}.{name}"
        ),
        what=f"the pod of {name}",
    )


def main_env(pod: dict[str, Any]) -> dict[str, str]:
    (main,) = [c for c in pod["spec"]["containers"] if c["name"] == "main"]
    return {e["name"]: e.get("value", "") for e in main.get("env") or []}


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


def test_retries_follow_an_expression_comparing_exit_codes_as_strings(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    """A crash (1) is retried; an analysis failure (3) is not.

    The cluster side of M8 (docs/behaviours.md), as the simulator reproduces it.
    """
    submit(
        kube,
        workflow(
            "wf",
            [
                task("crash", "1", continueOn={"failed": True}),
                task("analysis", "3", continueOn={"failed": True}),
            ],
            worker_template(code=FAILS_FIRST, retry=SPLIT_RETRIES),
        ),
    )
    sim_cluster.wait_for_workflow("wf")
    assert wait_node(sim_cluster, "wf", "crash")["phase"] == "Succeeded"
    assert wait_node(sim_cluster, "wf", "crash(0)")["message"] == "main: Error (exit code 1)"
    assert wait_node(sim_cluster, "wf", "crash(1)")["phase"] == "Succeeded"
    analysis = wait_node(sim_cluster, "wf", "analysis")
    assert (analysis["phase"], analysis["message"]) == (
        "Failed",
        "retryStrategy.expression evaluated to false",
    )
    assert len(analysis["children"]) == 1


def test_each_attempt_gets_its_retries_and_last_exit_code_in_the_pod_spec_patch(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    """The patch of an attempt after an exit 137 sets the retry memory; the grace too.

    The cluster side of M9 (docs/behaviours.md), as the simulator reproduces it.
    """
    memory = "{{=lastRetry.exitCode == '137' ? '2Gi' : '1Gi'}}"
    patch = {
        "terminationGracePeriodSeconds": 45,
        "containers": [
            {
                "name": "main",
                "resources": {"requests": {"memory": memory}, "limits": {"memory": memory}},
                "env": [{"name": "ATTEMPT", "value": "{{retries}}"}],
            }
        ],
    }
    template = worker_template(code=FAILS_FIRST, retry=SPLIT_RETRIES, patch=patch)
    submit(kube, workflow("wf", [task("w0", "137")], template))
    sim_cluster.wait_for_workflow("wf")
    first, second = pod_of(sim_cluster, "wf", "w0(0)"), pod_of(sim_cluster, "wf", "w0(1)")
    limits = [
        next(c for c in p["spec"]["containers"] if c["name"] == "main")["resources"]["limits"]
        for p in (first, second)
    ]
    assert [lim["memory"] for lim in limits] == ["1Gi", "2Gi"]
    assert [main_env(p)["ATTEMPT"] for p in (first, second)] == ["0", "1"]
    assert second["spec"]["terminationGracePeriodSeconds"] == 45
    assert main_env(second)["ARGO_TERMINATION_GRACE_PERIOD_SECONDS"] == "45"


def test_a_kill_for_memory_reads_main_oomkilled_and_the_retry_gets_more_memory(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    """`main: OOMKilled (exit code 137)`, then the retry memory.

    The cluster side of K6, C7 (docs/behaviours.md), as the simulator reproduces it.
    """
    memory = "{{=lastRetry.exitCode == '137' ? '1Gi' : '64Mi'}}"
    patch = {
        "containers": [
            {
                "name": "main",
                "resources": {"requests": {"memory": memory}, "limits": {"memory": memory}},
            }
        ]
    }
    # the first attempt holds 200 MB until killed; the retry, with 1Gi, ends at once
    hog = "import sys, time; hog = bytearray(200 * 2**20); time.sleep(60 * (sys.argv[2] == '0'))"
    submit(
        kube,
        workflow("wf", [task("w0")], worker_template(code=hog, retry=SPLIT_RETRIES, patch=patch)),
    )
    assert sim_cluster.wait_for_workflow("wf")["status"]["phase"] == "Succeeded"
    killed = wait_node(sim_cluster, "wf", "w0(0)")
    assert (killed["phase"], killed["message"]) == ("Failed", "main: OOMKilled (exit code 137)")
    assert killed["outputs"]["exitCode"] == "137"


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


def test_an_attempt_after_a_preemption_that_followed_a_kill_gets_the_first_memory(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    """Argo's expressions know only the last attempt.

    The cluster side of K9 (docs/behaviours.md), as the simulator reproduces it.
    """
    memory = "{{=lastRetry.exitCode == '137' ? '2Gi' : '1Gi'}}"
    patch = {
        "containers": [
            {
                "name": "main",
                "resources": {"requests": {"memory": memory}, "limits": {"memory": memory}},
            }
        ]
    }
    code = (
        f"import sys\nif sys.argv[2] == '0': sys.exit(137)\nif sys.argv[2] == '1': exec({WAITS!r})"
    )
    submit(
        kube,
        workflow("wf", [task("w0")], worker_template(code=code, retry=SPLIT_RETRIES, patch=patch)),
    )
    second = pod_of(sim_cluster, "wf", "w0(1)")
    sim_cluster.wait_for(lambda: logged(kube, second["metadata"]["name"]))
    sim_cluster.advance(RECENTLY_STARTED_S)
    sim_cluster.preempt(second["metadata"]["name"])
    third = pod_of(sim_cluster, "wf", "w0(2)")
    memories = [
        next(c for c in p["spec"]["containers"] if c["name"] == "main")["resources"]["limits"][
            "memory"
        ]
        for p in (second, third)
    ]
    assert memories == ["2Gi", "1Gi"]


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


def test_the_retry_limit_ends_retries(kube: KubeApis, sim_cluster: SimCluster) -> None:
    """Every attempt, whatever ended it, counts against the limit.

    The cluster side of K8 (docs/behaviours.md), as the simulator reproduces it.
    """
    retry = {"limit": 1, "retryPolicy": "Always"}
    submit(kube, workflow("wf", [task("w0", "1")], worker_template(retry=retry)))
    sim_cluster.wait_for_workflow("wf")
    node = wait_node(sim_cluster, "wf", "w0")
    assert (node["phase"], node["message"]) == ("Failed", "No more retries left")
    assert len(node["children"]) == 2


def test_a_backoff_waits_on_the_simulated_clock(kube: KubeApis, sim_cluster: SimCluster) -> None:
    retry = {"limit": 3, "retryPolicy": "Always", "backoff": {"duration": "60s", "factor": 2}}
    submit(kube, workflow("wf", [task("w0", "1")], worker_template(code=FAILS_FIRST, retry=retry)))
    waiting = sim_cluster.wait_for(
        lambda: (n := sim_cluster.node_status("wf", "w0")) and n.get("message") and n
    )
    assert waiting["message"] == "Backoff for 60 seconds"
    sim_cluster.settle()
    assert sim_cluster.node_status("wf", "w0(1)") is None
    sim_cluster.advance(61)
    assert wait_node(sim_cluster, "wf", "w0(1)", "Succeeded")


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
