"""A workflow's status from its nodes, on plain dicts shaped as Argo writes them (B1, B2)."""

from __future__ import annotations

from typing import Any

import pytest

from cluster.argo.config import ClusterConfig
from cluster.argo.manifest import workflow_manifest
from cluster.argo.status import (
    attempt_number,
    attempts_of,
    exit_code,
    task_of_pods,
    workflow_status,
)
from runs.ports import AttemptFailure, PodPhase, WorkflowPhase
from tests.cluster.argo.builders import command_task, launch, split_task
from tests.sim.argo.templates import node_id

NAME = "simrun-r1"


class Nodes:
    """`status.nodes` of the workflow `simrun-r1`, built node by node."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}

    def add(self, name: str, kind: str, phase: str, **fields: Any) -> dict[str, Any]:
        full = f"{NAME}.{name}"
        node = {"id": node_id(NAME, full), "name": full, "type": kind, "phase": phase, **fields}
        self.nodes[node["id"]] = node
        return node

    def pod(self, name: str, attempts: list[dict[str, Any]], phase: str = "Running") -> None:
        """A Retry node `name` and its attempts `name(0)`, `name(1)`… (fields of each)."""
        children = []
        for number, fields in enumerate(attempts):
            fields = dict(fields)
            if "exit" in fields:
                fields["outputs"] = {"exitCode": str(fields.pop("exit"))}
            child = self.add(f"{name}({number})", "Pod", **{"phase": "Pending", **fields})
            children.append(child["id"])
        self.add(name, "Retry", phase, children=children)


def workflow(nodes: Nodes, phase: str = "Running", shutdown: str | None = None) -> dict[str, Any]:
    scan = split_task("scan", 3)
    after = command_task("after", "pass", deps=["scan"])
    manifest = workflow_manifest(launch("r1", scan, after), ClusterConfig(default_image="i"))
    if shutdown:
        manifest["spec"]["shutdown"] = shutdown
    manifest["status"] = {"phase": phase, "nodes": nodes.nodes}
    return manifest


RUNNING = {"phase": "Running", "hostNodeName": "node-2"}
DELETED = {"phase": "Error", "message": "pod deleted", "hostNodeName": "node-2"}


def test_pods_without_nodes_are_waiting_and_named_as_the_controller_names_them() -> None:
    """B1: every pod of the spec, extras numbered by their item, waits before Argo runs it."""
    status = workflow_status(workflow(Nodes(), phase=""))
    assert status.phase is WorkflowPhase.PENDING
    assert {name: pod.phase for name, pod in status.pods.items()} == {
        "scan-w0": PodPhase.WAITING,
        "scan-w1": PodPhase.WAITING,
        "scan-w2": PodPhase.WAITING,
        "scan-merge": PodPhase.WAITING,
        "after": PodPhase.WAITING,
    }
    assert status.failures == {}


def test_a_gated_attempt_leaves_its_pod_queued() -> None:
    """K1: B1: a retried node is pending while its attempt waits for admission."""
    nodes = Nodes()
    nodes.pod("scan-w0", [{"message": "SchedulingGated"}])
    pod = workflow_status(workflow(nodes)).pods["scan-w0"]
    assert (pod.phase, pod.attempts, pod.node) == (PodPhase.QUEUED, 1, None)


def test_a_running_attempt_makes_its_pod_running_on_its_node() -> None:
    """B1."""
    nodes = Nodes()
    nodes.pod("scan-w0", [RUNNING])
    pod = workflow_status(workflow(nodes)).pods["scan-w0"]
    assert (pod.phase, pod.node) == (PodPhase.RUNNING, "node-2")


def test_the_attempt_after_a_deleted_pod_waits_as_preempted() -> None:
    """K2: B1: a preemption errors the attempt `pod deleted` without exit code; the pod is
    preempted until its next attempt runs."""
    nodes = Nodes()
    nodes.pod("scan-w0", [DELETED, {"message": "SchedulingGated"}])
    status = workflow_status(workflow(nodes))
    assert status.pods["scan-w0"].phase is PodPhase.PREEMPTED
    assert status.pods["scan-w0"].attempts == 2
    assert status.failures["scan-w0"] == [AttemptFailure(0, None, False, "pod deleted")]


def test_a_sigterm_exit_is_an_eviction_too() -> None:
    """B1: a worker stopped on SIGTERM (143) waits as preempted, also before Argo retries."""
    nodes = Nodes()
    nodes.pod(
        "scan-w0", [{"phase": "Failed", "exit": 143, "message": "main: Error (exit code 143)"}]
    )
    assert workflow_status(workflow(nodes)).pods["scan-w0"].phase is PodPhase.PREEMPTED


def test_the_attempt_after_another_failure_waits_as_retrying() -> None:
    """B1: a pod killed after its grace (137 without OOMKilled) waits as retrying."""
    nodes = Nodes()
    message = "main: Error (exit code 137)"
    nodes.pod("scan-w0", [{"phase": "Failed", "exit": 137, "message": message}, {}])
    status = workflow_status(workflow(nodes))
    assert status.pods["scan-w0"].phase is PodPhase.RETRYING
    assert status.failures["scan-w0"] == [AttemptFailure(0, 137, False, message)]


def test_a_kill_for_memory_is_listed_with_its_exit_code_and_oom_killed() -> None:
    """B2: K6: Argo's message `main: OOMKilled (exit code 137)` is the kernel's evidence."""
    nodes = Nodes()
    oom = "main: OOMKilled (exit code 137)"
    nodes.pod("scan-w0", [{"phase": "Failed", "exit": 137, "message": oom}, RUNNING])
    status = workflow_status(workflow(nodes))
    assert status.pods["scan-w0"].phase is PodPhase.RUNNING
    assert status.failures == {"scan-w0": [AttemptFailure(0, 137, True, oom)]}


def test_a_pod_created_again_for_the_same_attempt_is_queued_not_preempted() -> None:
    """K3: a pod deleted before Argo saw it running is created again as the same attempt."""
    nodes = Nodes()
    nodes.pod("scan-w0", [{"message": "SchedulingGated"}])
    pod = workflow_status(workflow(nodes)).pods["scan-w0"]
    assert (pod.phase, pod.attempts) == (PodPhase.QUEUED, 1)


def test_failures_are_listed_per_worker_of_the_expanded_extras() -> None:
    """B2: the extras' nodes `scan-extra(i:item)` are the workers `scan-w<item>`."""
    nodes = Nodes()
    nodes.pod("scan-w0", [RUNNING])
    nodes.pod("scan-extra(0:1)", [DELETED, RUNNING])
    nodes.pod(
        "scan-extra(1:2)", [{"phase": "Failed", "exit": 1, "message": "main: Error"}], "Failed"
    )
    nodes.add("scan-extra", "TaskGroup", "Running")
    status = workflow_status(workflow(nodes))
    assert status.pods["scan-w1"].phase is PodPhase.RUNNING
    assert status.pods["scan-w1"].attempts == 2
    assert status.pods["scan-w2"].phase is PodPhase.FAILED
    assert [f.exit_code for f in status.failures["scan-w1"]] == [None]
    assert [f.exit_code for f in status.failures["scan-w2"]] == [1]


def test_a_pod_that_failed_after_its_retries_failed_and_an_omitted_one_is_skipped() -> None:
    """B1: the Retry node's own end decides; a task after a failed one is skipped."""
    nodes = Nodes()
    nodes.pod("scan-w0", [{"phase": "Failed", "exit": 3, "message": "main: Error"}], "Failed")
    nodes.add("scan-merge", "Skipped", "Omitted")
    status = workflow_status(workflow(nodes, phase="Failed"))
    assert status.phase is WorkflowPhase.FAILED
    assert status.pods["scan-w0"].phase is PodPhase.FAILED
    assert status.pods["scan-w0"].exit_code == 3
    assert status.pods["scan-merge"].phase is PodPhase.SKIPPED
    assert status.pods["after"].phase is PodPhase.SKIPPED  # never created: the workflow ended


def test_a_succeeded_pod_with_its_earlier_failures() -> None:
    """B2: the failed attempts stay listed after the pod succeeded."""
    nodes = Nodes()
    oom = "main: OOMKilled (exit code 137)"
    nodes.pod(
        "after",
        [{"phase": "Failed", "exit": 137, "message": oom}, {"phase": "Succeeded", "exit": 0}],
        "Succeeded",
    )
    status = workflow_status(workflow(nodes))
    assert status.pods["after"].phase is PodPhase.SUCCEEDED
    assert status.pods["after"].exit_code == 0
    assert status.failures["after"] == [AttemptFailure(0, 137, True, oom)]


@pytest.mark.parametrize(
    ("phase", "shutdown", "expected"),
    [
        ("Running", None, WorkflowPhase.RUNNING),
        ("Succeeded", None, WorkflowPhase.SUCCEEDED),
        ("Failed", None, WorkflowPhase.FAILED),
        ("Error", None, WorkflowPhase.FAILED),
        ("Failed", "Stop", WorkflowPhase.STOPPED),
        ("Failed", "Terminate", WorkflowPhase.STOPPED),
    ],
)
def test_the_workflow_phase(phase: str, shutdown: str | None, expected: WorkflowPhase) -> None:
    assert workflow_status(workflow(Nodes(), phase, shutdown)).phase is expected


@pytest.mark.parametrize("retry_phase", ["Failed", "Running"])
def test_pods_a_stop_failed_before_they_ran_are_skipped(retry_phase: str) -> None:
    """K10: the pending nodes a stop fails never ran: skipped, not failed (also when the
    workflow ended before Argo settled their Retry node)."""
    nodes = Nodes()
    stopped = "workflow shutdown with strategy:  Stop"
    nodes.pod("scan-w0", [{"phase": "Succeeded", "exit": 0}], "Succeeded")
    nodes.pod("scan-extra(0:1)", [{"phase": "Failed", "message": stopped}], retry_phase)
    status = workflow_status(workflow(nodes, "Failed", "Stop"))
    assert status.phase is WorkflowPhase.STOPPED
    assert status.pods["scan-w1"].phase is PodPhase.SKIPPED


def test_each_pod_knows_its_task() -> None:
    assert task_of_pods(workflow(Nodes())) == {
        "scan-w0": "scan",
        "scan-w1": "scan",
        "scan-w2": "scan",
        "scan-merge": "scan",
        "after": "after",
    }


# --- gaps found by mutation testing (docs/testing.md) ---------------------------------------


def test_an_attempts_number_and_exit_code_are_read_as_argo_writes_them() -> None:
    """B2: `name(n)` is attempt n (0 for a node that is no attempt); Argo's exit code is a
    string, none when empty, "-1" or unreadable."""
    assert attempt_number({"name": "simrun-r1.scan-w0(12)"}) == 12
    assert attempt_number({"name": "simrun-r1.scan-w0"}) == 0
    assert attempt_number({}) == 0
    for value in (None, "", "-1", "sig"):
        assert exit_code({"outputs": {"exitCode": value}}) is None
    assert exit_code({"outputs": {"exitCode": "0"}}) == 0
    assert exit_code({}) is None


def test_the_attempts_of_a_pod_are_its_retry_nodes_children_in_attempt_order() -> None:
    """B2: a Retry node's children sorted by attempt (10 after 9), unknown ids left out; a
    Pod node is its own attempt; any other node has none."""
    nodes = {
        "a10": {"name": "x.p(10)", "type": "Pod"},
        "a9": {"name": "x.p(9)", "type": "Pod"},
        "a0": {"name": "x.p(0)", "type": "Pod"},
    }
    retry = {"type": "Retry", "children": ["a10", "gone", "a9", "a0"]}
    assert [a["name"] for a in attempts_of(retry, nodes)] == ["x.p(0)", "x.p(9)", "x.p(10)"]
    pod = {"name": "x.p", "type": "Pod"}
    assert attempts_of(pod, nodes) == [pod]
    assert attempts_of({"type": "Skipped"}, nodes) == []
    assert attempts_of({"type": "Retry"}, nodes) == []


def test_a_pods_node_exit_code_and_message_are_its_last_attempts() -> None:
    """B2: after an eviction and a failed attempt, the pod reports the last attempt's node,
    exit code and message, and counts both attempts."""
    nodes = Nodes()
    nodes.pod(
        "scan-w0",
        [
            {**DELETED, "hostNodeName": "node-1"},
            {"phase": "Failed", "exit": 3, "hostNodeName": "node-3", "message": "exit 3"},
        ],
        phase="Failed",
    )
    pod = workflow_status(workflow(nodes, phase="Failed")).pods["scan-w0"]
    assert (pod.phase, pod.attempts, pod.node, pod.exit_code, pod.message) == (
        PodPhase.FAILED,
        2,
        "node-3",
        3,
        "exit 3",
    )
