"""Runs on the cluster through the backend: submission, states, retries, stops, logs.

Each finding of seed 003 (K1-K11) as a test against the simulator (and a real cluster with
SIMRUN_KUBECONFIG, for those that need no control only the simulator has).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from cluster.argo.logs import GONE
from runs.ports import LOG_LIMIT_BYTES, AttemptFailure, PodPhase, WorkflowPhase
from simrun_harness.layout import StorePaths
from tests.cluster.argo.builders import command_task, launch, shape, split_task, write_task
from tests.cluster.argo.lab import Lab
from tests.waiting import wait_for

NAP = "import time; time.sleep(120)"
OOM = "main: OOMKilled (exit code 137)"


def phase_of(lab: Lab, name: str, pod: str) -> PodPhase:
    return lab.backend.status(name).pods[pod].phase


def ended(lab: Lab, name: str) -> WorkflowPhase | None:
    phase = lab.backend.status(name).phase
    return phase if phase not in (WorkflowPhase.PENDING, WorkflowPhase.RUNNING) else None


def test_a_workflow_that_exists_is_taken_as_submitted(lab: Lab) -> None:
    """B9: the workflow name of a run is fixed; submitting again creates nothing new."""
    run = launch("r1", command_task("t", "pass"))
    assert lab.backend.submit(run) == "simrun-r1"
    assert lab.backend.submit(run) == "simrun-r1"
    assert wait_for(lambda: ended(lab, "simrun-r1"), timeout=60) is WorkflowPhase.SUCCEEDED
    assert lab.backend.status("simrun-r1").pods["t"].attempts == 1


def test_a_workflow_that_cannot_be_built_is_refused_and_not_created(sim_lab: Lab) -> None:
    """B9: a run with no image of its own and no default image is an error."""
    backend = sim_lab.new_backend()
    backend.config = replace(sim_lab.config, default_image="")
    with pytest.raises(ValueError, match="SIMRUN_DEFAULT_IMAGE"):
        backend.submit(launch("r1", split_task("scan", 2)))
    with pytest.raises(KeyError):
        backend.status("simrun-r1")


def test_an_unknown_workflow_is_a_key_error(sim_lab: Lab) -> None:
    for call in (sim_lab.backend.status, sim_lab.backend.stop, sim_lab.backend.cancel):
        with pytest.raises(KeyError):
            call("simrun-nothing")
    with pytest.raises(KeyError):
        sim_lab.backend.logs("simrun-nothing", "t")


def test_a_split_task_runs_over_three_nodes_and_its_reader_after_the_merge(lab: Lab) -> None:
    """M1: M11: K4: one pod per node; the merge after the coordinator; the reader last."""
    write_task(lab.store, "r1", "scan", "sleep", units=6, seconds=0.2)
    out = StorePaths(lab.store).run("r1").task("scan").out
    check = (
        f"import json,sys; sys.exit(json.load(open({str(out / 'units.json')!r})) != list(range(6)))"
    )
    scan = split_task("scan", 3, pod=shape(3, 1))
    run = launch("r1", scan, command_task("after", check, deps=["scan"]))
    name = lab.backend.submit(run)

    assert wait_for(lambda: ended(lab, name), timeout=90) is WorkflowPhase.SUCCEEDED

    pods = lab.backend.status(name).pods
    assert {p: s.phase for p, s in pods.items()} == dict.fromkeys(
        ["scan-w0", "scan-w1", "scan-w2", "scan-merge", "after"], PodPhase.SUCCEEDED
    )
    assert len({pods[f"scan-w{i}"].node for i in range(3)}) == 3
    reports = sorted(p.name for p in (out.parent / "reports").iterdir())
    assert {"scan-w0-0.json", "scan-w1-0.json", "scan-w2-0.json", "scan-merge-0.json"} <= set(
        reports
    )


def main_limits(lab: Lab, name: str, pod: str) -> dict[str, str]:
    found = lab.pod(name, pod)
    assert found is not None, pod
    [main] = [c for c in found["spec"]["containers"] if c["name"] == "main"]
    return dict(main["resources"]["limits"])


def test_each_pod_of_a_split_task_runs_at_its_own_shape(sim_lab: Lab) -> None:
    """A shape per pod through Argo and Kueue: the coordinator, two extras of different
    shapes and the merge each get their own requests, and the run succeeds."""
    write_task(sim_lab.store, "r1", "scan", "sleep", units=6, seconds=0.1)
    merge = shape(0.5, 0.75, retry_memory_gb=0)
    extras = (shape(2, 1.5, processes=2, retry_memory_gb=0), shape(3, 2, retry_memory_gb=0))
    scan = split_task("scan", 3, pod=shape(1, 1, retry_memory_gb=0), extras=extras, merge=merge)
    name = sim_lab.backend.submit(launch("r1", scan))

    assert wait_for(lambda: ended(sim_lab, name), timeout=90) is WorkflowPhase.SUCCEEDED

    limits = {p: main_limits(sim_lab, name, p) for p in ("scan-w0", "scan-w1", "scan-w2")}
    limits["scan-merge"] = main_limits(sim_lab, name, "scan-merge")
    assert {p: (v["cpu"], v["memory"]) for p, v in limits.items()} == {
        "scan-w0": ("1", "1Gi"),
        "scan-w1": ("2", "1536Mi"),
        "scan-w2": ("3", "2Gi"),
        "scan-merge": ("500m", "768Mi"),
    }


def test_a_gated_pod_is_queued(sim_lab: Lab) -> None:
    """K1: Kueue gates the pod; its node stays Pending; the backend says queued."""
    assert sim_lab.sim is not None
    with sim_lab.sim.paused("kueue"):
        name = sim_lab.backend.submit(launch("r1", command_task("t", "pass")))
        wait_for(lambda: sim_lab.pod(name, "t"), what="the pod")
        sim_lab.sim.settle()
        pod = sim_lab.backend.status(name).pods["t"]
        assert (pod.phase, pod.attempts) == (PodPhase.QUEUED, 1)
        assert sim_lab.pod(name, "t")["spec"]["schedulingGates"]  # type: ignore[index]
    assert wait_for(lambda: ended(sim_lab, name), timeout=60) is WorkflowPhase.SUCCEEDED


def test_a_preempted_worker_returns_its_claims_and_is_retried_after_waiting_as_preempted(
    sim_lab: Lab,
) -> None:
    """K2: the pod is deleted within its grace; the worker stops on SIGTERM, returns its
    claims and writes its report; the attempt errors `pod deleted` without exit code and is
    retried; the new pod is gated and the worker preempted until it runs. No unit is lost."""
    assert sim_lab.sim is not None
    task = write_task(sim_lab.store, "r1", "scan", "sleep", units=8, seconds=0.5)
    name = sim_lab.backend.submit(launch("r1", split_task("scan", 2, pod=shape(3, 1))))
    claims = task / "ledger" / "claimed"
    wait_for(lambda: list(claims.glob("*@scan-w1@0")), what="a claim of scan-w1", timeout=30)

    with sim_lab.sim.paused("kueue"):
        sim_lab.preempt(name, "scan-w1")
        wait_for(lambda: phase_of(sim_lab, name, "scan-w1") is PodPhase.PREEMPTED, timeout=30)
        status = sim_lab.backend.status(name)
        assert status.pods["scan-w1"].attempts == 2
        assert status.failures["scan-w1"] == [AttemptFailure(0, None, False, "pod deleted")]
        report = json.loads((task / "reports" / "scan-w1-0.json").read_text())
        assert report["exit_code"] == 143
        assert report["claims_returned"] >= 1  # given back on SIGTERM, not left to go stale
        assert not list(claims.glob("*@scan-w1@0"))

    assert wait_for(lambda: ended(sim_lab, name), timeout=90) is WorkflowPhase.SUCCEEDED
    assert json.loads((task / "out" / "units.json").read_text()) == list(range(8))


def test_a_pod_deleted_before_it_was_seen_running_is_made_again_as_the_same_attempt(
    sim_lab: Lab,
) -> None:
    """K3: Argo creates the pod again for the same attempt: queued, not preempted."""
    sim = sim_lab.sim
    assert sim is not None
    with sim.paused("kueue"):
        name = sim_lab.backend.submit(launch("r1", command_task("t", "pass")))
        first = wait_for(lambda: sim_lab.pod(name, "t"), what="the pod")
        with sim.paused("argo"):
            sim_lab.preempt(name, "t")
            wait_for(lambda: sim_lab.pod(name, "t") is None, what="the pod deleted")
        again = wait_for(lambda: sim_lab.pod(name, "t"), what="the pod made again")
        assert again["metadata"]["uid"] != first["metadata"]["uid"]
        status = sim_lab.backend.status(name)
        assert (status.pods["t"].phase, status.pods["t"].attempts) == (PodPhase.QUEUED, 1)
        assert status.failures == {}
    assert wait_for(lambda: ended(sim_lab, name), timeout=60) is WorkflowPhase.SUCCEEDED


def test_a_kill_for_memory_reads_oom_killed_and_the_retry_gets_the_retry_memory(lab: Lab) -> None:
    """K6: M9: the whole container is killed, `main: OOMKilled (exit code 137)`; the next
    attempt runs with the retry memory and memory per worker."""
    code = """
        import os
        env = os.environ
        print(env["SIMRUN_MEMORY_LIMIT_GB"], env["SIMRUN_MEMORY_PER_WORKER_GB"], flush=True)
        if os.environ["SIMRUN_ATTEMPT"] == "0":
            data = b"x" * (700 * 2**20)
            import time; time.sleep(30)
    """
    name = lab.backend.submit(launch("r1", command_task("big", code, pod=shape(1, 0.5))))

    assert wait_for(lambda: ended(lab, name), timeout=90) is WorkflowPhase.SUCCEEDED
    status = lab.backend.status(name)
    assert status.failures == {"big": [AttemptFailure(0, 137, True, OOM)]}
    first, second = lab.backend.logs(name, "big")
    assert (first.attempt, first.text) == (0, "0.5 0.25\n")
    assert (second.attempt, second.text) == (1, "1 0.5\n")


@pytest.mark.parametrize("code", [3, 4, 1])
def test_an_exit_other_than_a_stop_fails_the_pod_at_once(lab: Lab, code: int) -> None:
    """M8: K7: only a stopped pod is retried; exits 3, 4 (and any other) are not."""
    name = lab.backend.submit(launch("r1", command_task("t", f"import sys; sys.exit({code})")))
    assert wait_for(lambda: ended(lab, name), timeout=60) is WorkflowPhase.FAILED
    status = lab.backend.status(name)
    assert (status.pods["t"].phase, status.pods["t"].attempts) == (PodPhase.FAILED, 1)
    assert [f.exit_code for f in status.failures["t"]] == [code]


def test_a_sigterm_exit_is_retried(lab: Lab) -> None:
    """M8: K7: 143 is a stop: retried (the exit code compared as text)."""
    code = "import os, sys; sys.exit(143 if os.environ['SIMRUN_ATTEMPT'] == '0' else 0)"
    name = lab.backend.submit(launch("r1", command_task("t", code)))
    assert wait_for(lambda: ended(lab, name), timeout=60) is WorkflowPhase.SUCCEEDED
    assert [f.exit_code for f in lab.backend.status(name).failures["t"]] == [143]


def test_every_eviction_is_an_attempt_counted_against_the_retry_limit(lab: Lab) -> None:
    """M8: K8: two preemptions (errors, retried under the policy Always), two failed
    attempts, the third attempt runs."""
    name = lab.backend.submit(launch("r1", command_task("t", NAP)))
    for attempts in (1, 2):
        wait_for(lambda a=attempts: _running_attempts(lab, name) == a, timeout=60)
        lab.preempt(name, "t")
    wait_for(lambda: _running_attempts(lab, name) == 3, timeout=60)
    assert [f.message for f in lab.backend.status(name).failures["t"]] == ["pod deleted"] * 2
    lab.backend.cancel(name)


def _running_attempts(lab: Lab, name: str) -> int:
    pod = lab.backend.status(name).pods["t"]
    return pod.attempts if pod.phase is PodPhase.RUNNING else 0


def test_the_attempt_after_a_preemption_that_followed_a_kill_gets_the_first_memory(
    lab: Lab,
) -> None:
    """K9: K11: attempt 0 is killed for memory, 1 runs with the retry memory and is preempted,
    2 gets the first memory again (Argo knows only the last attempt) and is killed, 3 has the
    retry memory again. The preempted attempt's log went with its pod."""
    code = """
        import os, time
        attempt = os.environ["SIMRUN_ATTEMPT"]
        print(attempt, os.environ["SIMRUN_MEMORY_LIMIT_GB"], flush=True)
        if attempt in ("0", "2"):
            data = b"x" * (700 * 2**20)
            time.sleep(30)
        elif attempt == "1":
            time.sleep(120)
    """
    name = lab.backend.submit(launch("r1", command_task("big", code, pod=shape(1, 0.5))))
    wait_for(lambda: _running_attempts_of(lab, name, "big") == 2, timeout=60)
    lab.preempt(name, "big")

    assert wait_for(lambda: ended(lab, name), timeout=90) is WorkflowPhase.SUCCEEDED
    failures = lab.backend.status(name).failures["big"]
    assert [(f.attempt, f.exit_code, f.oom_killed) for f in failures] == [
        (0, 137, True),
        (1, None, False),
        (2, 137, True),
    ]
    logs = lab.backend.logs(name, "big")
    assert [(log.attempt, log.text, log.error) for log in logs] == [
        (0, "0 0.5\n", None),
        (1, "", GONE),
        (2, "2 0.5\n", None),
        (3, "3 1\n", None),
    ]


def _running_attempts_of(lab: Lab, name: str, pod: str) -> int:
    found = lab.backend.status(name).pods[pod]
    return found.attempts if found.phase is PodPhase.RUNNING else 0


def test_stopping_fails_the_pending_nodes_and_deletes_their_gated_pods(lab: Lab) -> None:
    """K10: extras Kueue cannot admit (the other nodes are reserved) stay gated; a stop fails
    their nodes (they never ran: skipped), deletes their gated pods and stops the coordinator;
    no pod of the workflow is left waiting."""
    others = lab.workers[1:]
    for node in others:
        lab.backend.reserve(node, "blocker")
    write_task(lab.store, "r1", "scan", "sleep", units=40, seconds=0.5)
    name = lab.backend.submit(launch("r1", split_task("scan", 3, pod=shape(3, 1))))
    wait_for(lambda: phase_of(lab, name, "scan-w0") is PodPhase.RUNNING, timeout=60)
    wait_for(lambda: lab.pod(name, "scan-w2"), what="the extras' pods", timeout=30)
    assert phase_of(lab, name, "scan-w1") is PodPhase.QUEUED

    lab.backend.stop(name)

    assert wait_for(lambda: ended(lab, name), timeout=60) is WorkflowPhase.STOPPED
    status = lab.backend.status(name)
    assert status.pods["scan-w0"].phase is PodPhase.FAILED
    assert status.pods["scan-w1"].phase is PodPhase.SKIPPED
    assert status.pods["scan-w2"].phase is PodPhase.SKIPPED
    assert status.pods["scan-merge"].phase is PodPhase.SKIPPED
    for extra in ("scan-w1", "scan-w2"):  # deleted, or admitted in between and stopped
        wait_for(lambda e=extra: _gone_or_failed(lab.pod(name, e)), what=f"{extra} deleted")
    for node in others:
        lab.backend.unreserve(node, "blocker")


def _gone_or_failed(pod: dict[str, Any] | None) -> bool:
    return pod is None or pod["status"]["phase"] == "Failed"


def test_cancelling_terminates_running_pods(lab: Lab) -> None:
    """Cancel: the running pod gets SIGTERM; the workflow ends stopped."""
    name = lab.backend.submit(launch("r1", command_task("t", NAP)))
    wait_for(lambda: phase_of(lab, name, "t") is PodPhase.RUNNING, timeout=60)
    lab.backend.cancel(name)
    assert wait_for(lambda: ended(lab, name), timeout=60) is WorkflowPhase.STOPPED
    assert phase_of(lab, name, "t") is PodPhase.FAILED


def test_logs_of_every_pod_of_a_task_oldest_first_and_why_one_cannot_be_read(lab: Lab) -> None:
    """B10: a log per attempt; one not started says so; tail lines; the byte limit."""
    noisy = f"import sys; sys.stdout.write('y' * {LOG_LIMIT_BYTES + 10} + '\\nlast\\n')"
    run = launch(
        "r1",
        command_task("noisy", noisy),
        command_task("later", "print('one'); print('two')", deps=["noisy"]),
    )
    name = lab.backend.submit(run)
    [waiting] = lab.backend.logs(name, "later")
    assert (waiting.pod, waiting.error) == ("later", "not started")
    assert wait_for(lambda: ended(lab, name), timeout=60) is WorkflowPhase.SUCCEEDED

    [noisy_log] = lab.backend.logs(name, "noisy")
    assert noisy_log.truncated and len(noisy_log.text) == LOG_LIMIT_BYTES and noisy_log.ended
    [tail] = lab.backend.logs(name, "later", tail_lines=1)
    assert (tail.text, tail.ended, tail.error) == ("two\n", True, None)
    with pytest.raises(KeyError):
        lab.backend.logs(name, "no-such-task")


def test_the_log_of_a_pod_waiting_for_admission_says_why_it_cannot_be_read(sim_lab: Lab) -> None:
    """B10: a pod without a node has no log yet."""
    assert sim_lab.sim is not None
    with sim_lab.sim.paused("kueue"):
        name = sim_lab.backend.submit(launch("r1", command_task("t", "pass")))
        wait_for(lambda: sim_lab.pod(name, "t"), what="the pod")
        # the pod is created before Argo writes its node: wait for the node too
        [log] = wait_for(
            lambda: [g for g in sim_lab.backend.logs(name, "t") if g.error != "not started"],
            what="the pod's node in the workflow",
        )
        assert log.error is not None and "host" in log.error
        assert not log.ended
