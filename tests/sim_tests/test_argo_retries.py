"""The simulated Argo controller's retries: the expression, the pod spec patch of each
attempt, kills for memory, the limit and the backoff."""

from __future__ import annotations

from tests.sim import SimCluster
from tests.sim.argo.operation import RECENTLY_STARTED_S
from tests.sim.fixtures import KubeApis
from tests.sim_tests.manifests import (
    FAILS_FIRST,
    SPLIT_RETRIES,
    WAITS,
    logged,
    task,
    worker_template,
    workflow,
)
from tests.sim_tests.workflows import main_env, pod_of, submit, wait_node


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
