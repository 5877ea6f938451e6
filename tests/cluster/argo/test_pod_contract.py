"""What a run's pods receive and do, as the backend's manifests make them run on the cluster
(the simulator): the stale time the workers are given and what it decides (M3), the account
the pods run as (M6), where a reserved run's pods go (M7), the attempt and node the harness
is told and reports (M10), the group a label may not hold (M5), how long the cluster keeps
a finished workflow (M12). The manifest's text is checked by test_manifest.py; these check
the behaviour it is for."""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from pathlib import Path

import psutil

from cluster.argo.backend import ArgoBackend
from runs.ports import PodPhase, WorkflowPhase
from simrun_harness.config import worker_config
from tests.cluster.argo.builders import command_task, launch, shape, split_task, write_task
from tests.cluster.argo.lab import Lab
from tests.sim.resources import SERVICE_ACCOUNTS
from tests.waiting import wait_for

NAP = "import time; time.sleep(120)"


def ended(lab: Lab, name: str) -> WorkflowPhase | None:
    phase = lab.backend.status(name).phase
    return phase if phase not in (WorkflowPhase.PENDING, WorkflowPhase.RUNNING) else None


def environment_of(lab: Lab, workflow: str, pod: str) -> dict[str, str]:
    """The environment of the running main container of a run's pod (its process's)."""
    assert lab.sim is not None
    found = lab.pod(workflow, pod)
    assert found is not None, f"{pod} has no pod"
    run = lab.sim.kubelet.runs[found["metadata"]["uid"]]
    process = run.containers["main"].popen
    assert process is not None
    return dict(psutil.Process(process.pid).environ())


def report(task: Path, worker: str, attempt: int) -> dict[str, object]:
    return dict(json.loads((task / "reports" / f"{worker}-{attempt}.json").read_text()))


def test_a_claim_is_taken_back_once_its_holder_is_silent_for_the_grace_plus_60_s(
    sim_lab: Lab,
) -> None:
    """M3: the workers are started with a stale time of the run's grace plus 60 s, as the
    harness reads its environment; a worker whose node is lost stops heartbeating, and once its
    heartbeat is older than that the coordinator takes its claims back and computes them."""
    assert sim_lab.sim is not None
    task = write_task(sim_lab.store, "r1", "scan", "sleep", units=6, seconds=0.3)
    run = launch("r1", split_task("scan", 2, pod=shape(3, 1)))
    name = sim_lab.backend.submit(run)
    claims = task / "ledger" / "claimed"
    wait_for(lambda: list(claims.glob("*@scan-w1@0")), what="a claim of scan-w1")

    config = worker_config(environment_of(sim_lab, name, "scan-w0"))
    assert config.stale_s == run.grace_s + 60

    w1 = sim_lab.pod(name, "scan-w1")
    assert w1 is not None
    sim_lab.sim.lose_node(w1["spec"]["nodeName"])  # its worker dies holding its claims
    assert list(claims.glob("*@scan-w1@0"))
    silent = time.time() - config.stale_s - 1  # its last heartbeat, that long ago
    os.utime(task / "ledger" / "heartbeats" / "scan-w1@0", (silent, silent))

    wait_for(
        lambda: sim_lab.backend.status(name).pods["scan-merge"].phase is PodPhase.SUCCEEDED,
        what="the merge after the coordinator computed the lost claims",
        timeout=60,
    )
    assert json.loads((task / "out" / "units.json").read_text()) == list(range(6))
    assert not list(claims.glob("*@scan-w1@0"))


def test_the_harness_is_told_its_attempt_and_node_and_reports_them(sim_lab: Lab) -> None:
    """M10: each attempt of a worker runs with its attempt number and the node it was bound
    to: the preempted attempt 0 and the attempt 1 after it each report their own, so neither
    report overwrites the other."""
    task = write_task(sim_lab.store, "r1", "scan", "sleep", units=8, seconds=0.3)
    name = sim_lab.backend.submit(launch("r1", split_task("scan", 2, pod=shape(3, 1))))
    claims = task / "ledger" / "claimed"
    wait_for(lambda: list(claims.glob("*@scan-w1@0")), what="a claim of scan-w1")
    first = sim_lab.pod(name, "scan-w1")
    assert first is not None

    sim_lab.preempt(name, "scan-w1")

    assert wait_for(lambda: ended(sim_lab, name), timeout=90) is WorkflowPhase.SUCCEEDED
    again = sim_lab.pod(name, "scan-w1")
    assert again is not None and again["metadata"]["uid"] != first["metadata"]["uid"]
    before, after = report(task, "scan-w1", 0), report(task, "scan-w1", 1)
    assert (before["attempt"], before["node"]) == (0, first["spec"]["nodeName"])
    assert (after["attempt"], after["node"]) == (1, again["spec"]["nodeName"])
    assert before["exit_code"] == 143


def backend_as(lab: Lab, account: str) -> ArgoBackend:
    assert lab.sim is not None
    backend = ArgoBackend(replace(lab.config, service_account=account), lab.sim.api_client())
    lab.made.append(backend)
    return backend


def test_the_pods_run_as_the_configured_account(sim_lab: Lab) -> None:
    """M6: the account the deploy makes for the pods of runs (here another one, configured)
    is the account each pod runs as."""
    assert sim_lab.sim is not None
    sim_lab.sim.store.create(SERVICE_ACCOUNTS, sim_lab.namespace, {"metadata": {"name": "runs"}})
    backend = backend_as(sim_lab, "runs")
    name = backend.submit(launch("r1", command_task("t", "pass")))

    wait_for(lambda: backend.status(name).phase is WorkflowPhase.SUCCEEDED, timeout=60)

    pod = sim_lab.pod(name, "t")
    assert pod is not None and pod["spec"]["serviceAccountName"] == "runs"


def test_pods_of_an_account_the_namespace_lacks_are_refused_and_the_run_fails(
    sim_lab: Lab,
) -> None:
    """M6: as on a real cluster, the API server refuses a pod of an account that does not
    exist: the pod is never made, each attempt errors saying why (Argo retries an error up
    to the retry limit), and the run's workflow fails."""
    backend = backend_as(sim_lab, "nobody")
    name = backend.submit(launch("r1", command_task("t", "pass")))

    wait_for(lambda: backend.status(name).phase is WorkflowPhase.FAILED, timeout=60)

    status = backend.status(name)
    assert status.pods["t"].phase is PodPhase.FAILED
    first = status.failures["t"][0]
    assert first.exit_code is None
    assert first.message.endswith(
        "is forbidden: error looking up service account simrun/nobody: "
        'serviceaccount "nobody" not found'
    )
    assert sim_lab.pod(name, "t") is None


def test_a_reserved_runs_pods_go_to_its_node_even_where_another_would_fit_better(
    sim_lab: Lab,
) -> None:
    """M7: K4: the reserved node is idle and another node is fuller (Kueue places a pod on
    the fullest node that fits): the reserved run's pod selects its node and tolerates its
    taint, so it runs there."""
    filler = sim_lab.backend.submit(launch("r0", command_task("nap", NAP, pod=shape(1, 0.5))))
    wait_for(lambda: sim_lab.backend.status(filler).pods["nap"].node, what="the filler placed")
    placed = sim_lab.backend.status(filler).pods["nap"].node
    reserved = next(n for n in sim_lab.workers if n != placed)
    sim_lab.backend.reserve(reserved, "r2")
    mine = sim_lab.backend.submit(
        launch("r2", command_task("own", NAP, pod=shape(1, 0.5)), reserve=reserved)
    )

    wait_for(lambda: sim_lab.backend.status(mine).pods["own"].phase is PodPhase.RUNNING)

    assert sim_lab.backend.status(mine).pods["own"].node == reserved
    assert sim_lab.backend.status(filler).pods["nap"].node == placed
    sim_lab.backend.cancel(mine)
    sim_lab.backend.cancel(filler)


def test_a_group_no_label_value_may_hold_is_made_valid_and_the_run_goes_ahead(
    sim_lab: Lab,
) -> None:
    """M5: a group longer than a label value may be, with spaces and a slash: the cluster,
    which refuses such a label value (422), takes the workflow; its pod runs labelled with the
    group made valid and annotated with it as given."""
    group = "Computational Biology / Modelling of cardiac electrophysiology 2026"
    name = sim_lab.backend.submit(launch("r1", command_task("t", "pass"), group=group))

    wait_for(lambda: sim_lab.backend.status(name).phase is WorkflowPhase.SUCCEEDED, timeout=60)

    pod = sim_lab.pod(name, "t")
    assert pod is not None
    label = pod["metadata"]["labels"]["simrun/group"]
    assert len(label) <= 63 and label.startswith("Computational-Biology-Modelling-of-")
    assert pod["metadata"]["annotations"]["simrun/group"] == group


def test_a_finished_workflow_is_kept_for_its_time_to_live_then_deleted(sim_lab: Lab) -> None:
    """M12: the workflow is named after the run and labelled with its id; once it completed
    the cluster keeps it, its status readable, until the configured time to live has passed,
    then deletes it."""
    assert sim_lab.sim is not None
    name = sim_lab.backend.submit(launch("r1", command_task("t", "pass")))
    assert name == "simrun-r1"
    wait_for(lambda: sim_lab.backend.status(name).phase is WorkflowPhase.SUCCEEDED, timeout=60)
    workflow = sim_lab.workflow(name)
    assert workflow is not None and workflow["metadata"]["labels"]["simrun/run"] == "r1"

    sim_lab.sim.advance(sim_lab.config.workflow_ttl_s - 5)
    sim_lab.sim.settle()
    assert sim_lab.backend.status(name).phase is WorkflowPhase.SUCCEEDED

    sim_lab.expire(name)  # past the time to live: deleted
