"""The pods of a workflow and every field of their status, on hand-written Argo dicts (B1, B2).

Gaps found by mutation testing (docs/testing.md): the fast tests of `test_status.py` build
their workflows with the manifest, so they never met a `withItems`, a sequence given by its
end, a task without parameters, a node without a message, nor checked a pod's name.
"""

from __future__ import annotations

from typing import Any

from cluster.argo.status import PodNode, pod_nodes, workflow_status
from runs.ports import AttemptFailure, PodPhase, PodStatus

STOPPED = "workflow shutdown with strategy:  Stop"


def dag(*tasks: dict[str, Any], name: str | None = "wf") -> dict[str, Any]:
    """A workflow whose entry DAG holds `tasks` (a second template is never its entry)."""
    workflow: dict[str, Any] = {
        "spec": {
            "entrypoint": "main",
            "templates": [
                {"name": "other", "dag": {"tasks": [{"name": "not-an-entry"}]}},
                {"name": "main", "dag": {"tasks": list(tasks)}},
            ],
        }
    }
    if name is not None:
        workflow["metadata"] = {"name": name}
    return workflow


def expanded(name: str, **expansion: Any) -> dict[str, Any]:
    parameters = [{"name": "pod", "value": "s-w{{item}}"}, {"name": "task", "value": "s"}]
    return {"name": name, "arguments": {"parameters": parameters}, **expansion}


def items(workflow: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p.pod, p.node_name) for p in pod_nodes(workflow)]


def test_a_sequence_counts_from_its_start_or_runs_to_its_end_either_way() -> None:
    """B2: `withSequence` as Argo reads it: start (default 0) and count, or start to end
    inclusive (downwards when the end is below the start); an empty end means a count."""
    assert items(dag(expanded("x", withSequence={"count": "2"}))) == [
        ("s-w0", "wf.x(0:0)"),
        ("s-w1", "wf.x(1:1)"),
    ]
    assert items(dag(expanded("x", withSequence={"start": "3", "count": 2}))) == [
        ("s-w3", "wf.x(0:3)"),
        ("s-w4", "wf.x(1:4)"),
    ]
    assert items(dag(expanded("x", withSequence={"start": "2", "end": "4"}))) == [
        ("s-w2", "wf.x(0:2)"),
        ("s-w3", "wf.x(1:3)"),
        ("s-w4", "wf.x(2:4)"),
    ]
    assert items(dag(expanded("x", withSequence={"start": "2", "end": "0"}))) == [
        ("s-w2", "wf.x(0:2)"),
        ("s-w1", "wf.x(1:1)"),
        ("s-w0", "wf.x(2:0)"),
    ]
    assert items(dag(expanded("x", withSequence={"end": "0"}))) == [("s-w0", "wf.x(0:0)")]
    assert items(dag(expanded("x", withSequence={"end": "", "count": 1}))) == [
        ("s-w0", "wf.x(0:0)")
    ]
    assert items(dag(expanded("x", withSequence={"start": "1"}))) == []


def test_with_items_names_a_pod_per_item_and_a_task_without_parameters_is_its_own_pod() -> None:
    """B2: `withItems` expands like a sequence; a task without `pod`/`task` parameters (or a
    parameter without value) is named after itself; only the entrypoint's DAG counts."""
    workflow = dag(
        expanded("x", withItems=[5, "b"]),
        {"name": "plain"},
        {"name": "empty", "arguments": {"parameters": [{"name": "pod"}, {"value": "lost"}]}},
    )
    assert list(pod_nodes(workflow)) == [
        PodNode("s-w5", "s", "wf.x(0:5)"),
        PodNode("s-wb", "s", "wf.x(1:b)"),
        PodNode("plain", "plain", "wf.plain"),
        PodNode("", "empty", "wf.empty"),
    ]
    assert [p.node_name for p in pod_nodes(dag({"name": "t"}, name=None))] == [".t"]
    assert list(pod_nodes({"spec": {"entrypoint": "gone", "templates": []}})) == []


def retry(wf: str, pod: str, phase: str, *attempts: dict[str, Any], **fields: Any) -> dict:
    """`status.nodes` with a Retry node `wf.pod` and its attempts (id = name)."""
    nodes: dict[str, Any] = {}
    for number, attempt in enumerate(attempts):
        name = f"{wf}.{pod}({number})"
        nodes[name] = {"name": name, "type": "Pod", **attempt}
    name = f"{wf}.{pod}"
    nodes[name] = {"name": name, "type": "Retry", "phase": phase, "children": list(nodes)}
    nodes[name].update(fields)
    return nodes


def status_of(nodes: dict[str, Any], phase: str = "Running", **status: Any) -> Any:
    workflow = dag({"name": "p"})
    workflow["status"] = {"phase": phase, "nodes": nodes, **status}
    return workflow_status(workflow)


def test_a_pods_status_carries_its_name_node_exit_code_and_message() -> None:
    """B2: the pod's own name; an attempt without a message fails with an empty one; the
    Retry node's message wins over its attempt's; an empty host is no node."""
    nodes = retry("wf", "p", "Failed", {"phase": "Failed", "hostNodeName": "", "outputs": {}})
    status = status_of(nodes, "Failed", message="child failed")
    assert status.pods == {"p": PodStatus("p", PodPhase.FAILED, 1, None, None, "")}
    assert status.failures == {"p": [AttemptFailure(0, None, False, "")]}
    assert status.message == "child failed"
    nodes = retry("wf", "p", "Running", {"phase": "Running", "message": "mine"}, message="its")
    status = status_of(nodes)
    assert status.pods["p"] == PodStatus("p", PodPhase.RUNNING, 1, None, None, "its")
    assert (status.failures, status.message) == ({}, "")


def test_when_the_workflow_ended_an_unsettled_node_takes_its_last_attempts_end() -> None:
    """B1: after the workflow ended, a Retry node still running is what its last attempt
    became, and failed when that attempt had not ended or there is none."""

    def ended(*attempts: dict[str, Any]) -> PodPhase:
        return status_of(retry("wf", "p", "Running", *attempts), "Failed").pods["p"].phase

    assert ended({"phase": "Succeeded"}) is PodPhase.SUCCEEDED
    assert ended({"phase": "Running", "hostNodeName": "n"}) is PodPhase.FAILED
    assert ended({"hostNodeName": "n"}) is PodPhase.FAILED
    assert ended() is PodPhase.FAILED
    omitted = {"wf.p": {"name": "wf.p", "type": "Pod", "phase": "Omitted"}}
    assert status_of(omitted, "Failed").pods["p"].phase is PodPhase.SKIPPED
    assert status_of({}, "Succeeded").pods == {"p": PodStatus("p", PodPhase.SKIPPED)}
    assert status_of({}, "Pending").pods == {"p": PodStatus("p", PodPhase.WAITING)}


def test_a_running_retry_node_reads_its_last_attempt_and_its_own_end() -> None:
    """B1: a last attempt that succeeded before Argo settled the node is a success; a node
    Succeeded or Omitted decides whatever its attempts; a Skipped node is skipped."""

    def running(node_phase: str, *attempts: dict[str, Any], kind: str = "Retry") -> PodPhase:
        nodes = retry("wf", "p", node_phase, *attempts, type=kind)
        return status_of(nodes).pods["p"].phase

    assert running("Running", {"phase": "Succeeded"}) is PodPhase.SUCCEEDED
    assert running("Running") is PodPhase.QUEUED
    assert running("Succeeded") is PodPhase.SUCCEEDED
    assert running("Omitted", {"phase": "Running"}) is PodPhase.SKIPPED
    assert running("", kind="Skipped") is PodPhase.SKIPPED


def test_only_a_pod_that_never_ran_is_skipped_by_a_stop() -> None:
    """K10: a stopped pod is skipped only when no attempt had a node or an exit code; a
    failed pod that never ran without any stop is failed."""

    def stopped(*attempts: dict[str, Any]) -> PodPhase:
        nodes = retry("wf", "p", "Failed", *attempts)
        return status_of(nodes, "Failed").pods["p"].phase

    assert stopped({"phase": "Failed"}, {"phase": "Failed", "message": STOPPED}) is (
        PodPhase.SKIPPED
    )
    ran = {"phase": "Failed", "message": STOPPED, "hostNodeName": "n"}
    assert stopped(ran) is PodPhase.FAILED
    exited = {"phase": "Failed", "message": STOPPED, "outputs": {"exitCode": "143"}}
    assert stopped(exited) is PodPhase.FAILED
    assert stopped({"phase": "Failed", "message": "pod deleted"}) is PodPhase.FAILED
