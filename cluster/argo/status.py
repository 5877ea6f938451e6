"""A workflow's status as the controller reads it: per pod, per attempt (B1, B2, K1-K3).

The nodes are read wherever Argo put them (`node_status.workflow_nodes`: `status.nodes`, or
`status.compressedNodes` of a large workflow). The pods are named from the workflow's spec
(the `pod` argument of each DAG task, with `{{item}}` of an expanded task replaced by its
item), so the names are the controller's (`<task>`, `<task>-w0`, `<task>-w1`…,
`<task>-merge`) whatever Argo calls its nodes. Each pod is the DAG node
`<workflow>.<dag task>` (or `<workflow>.<dag task>(<index>:<item>)` of an expanded task); a
template with a retry strategy makes it a Retry node whose children are the attempts `…(0)`,
`…(1)`…

- Retry node Succeeded → succeeded; Failed or Error → failed (skipped when the workflow was
  shut down before the pod ever ran); Omitted or Skipped → skipped; no node yet → waiting
  (skipped once the workflow ended).
- While the Retry node runs, its last attempt decides: Running → running; Pending → queued
  when no attempt failed before it (K1, K3: a pod deleted before it was seen running is
  created again as the same attempt), else preempted after an eviction (no exit code, or 143)
  and retrying after any other failure (K2, B1); an attempt that failed and awaits its retry
  is read the same way.
- Failures: every attempt that failed or errored, with its exit code (`outputs.exitCode`) and
  whether Argo's message names the kernel's kill for memory (`OOMKilled`, K6).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from cluster.argo.node_status import NODES_LIMIT_BYTES, NodesUnreadable, workflow_nodes
from runs.ports import (
    AttemptFailure,
    BackendStatus,
    PodPhase,
    PodStatus,
    WorkflowPhase,
)
from simrun_harness.exits import EXIT_TERMINATED

FAILED_PHASES = frozenset({"Failed", "Error"})
DONE_PHASES = frozenset({"Succeeded", "Failed", "Error"})
SKIPPED_PHASES = frozenset({"Omitted", "Skipped"})
OOM_REASON = "OOMKilled"
SHUTDOWN = "shutdown with strategy"
_ATTEMPT = re.compile(r"\((\d+)\)$")


@dataclass(frozen=True)
class PodNode:
    """One pod of the run as the spec names it, and the DAG node that stands for it."""

    pod: str
    task_id: str
    node_name: str


def _parameters(task: Mapping[str, Any]) -> dict[str, str]:
    found = (task.get("arguments") or {}).get("parameters") or []
    return {p["name"]: str(p.get("value", "")) for p in found if "name" in p}


def _sequence(sequence: Mapping[str, Any]) -> list[int]:
    """The items of a `withSequence` (start and count, or start and end)."""
    start = int(sequence.get("start") or 0)
    if sequence.get("end") not in (None, ""):
        end = int(sequence["end"])
        step = 1 if end >= start else -1
        return list(range(start, end + step, step))
    return list(range(start, start + int(sequence.get("count") or 0)))


def pod_nodes(workflow: Mapping[str, Any]) -> Iterator[PodNode]:
    """Every pod of the workflow's DAG, in the order of its tasks."""
    spec = workflow.get("spec") or {}
    name = (workflow.get("metadata") or {}).get("name", "")
    entry: Mapping[str, Any] = next(
        (t for t in spec.get("templates") or [] if t.get("name") == spec.get("entrypoint")), {}
    )
    for task in (entry.get("dag") or {}).get("tasks") or []:
        parameters = _parameters(task)
        pod = parameters.get("pod", task["name"])
        task_id = parameters.get("task", task["name"])
        node = f"{name}.{task['name']}"
        if "withSequence" in task:
            for index, item in enumerate(_sequence(task["withSequence"])):
                yield PodNode(
                    pod.replace("{{item}}", str(item)), task_id, f"{node}({index}:{item})"
                )
        elif "withItems" in task:
            for index, item in enumerate(task["withItems"]):
                yield PodNode(
                    pod.replace("{{item}}", str(item)), task_id, f"{node}({index}:{item})"
                )
        else:
            yield PodNode(pod, task_id, node)


def attempt_number(node: Mapping[str, Any]) -> int:
    """The attempt of a retried node (`…(n)`); 0 for a node that is not an attempt."""
    found = _ATTEMPT.search(node.get("name", ""))
    return int(found.group(1)) if found else 0


def exit_code(node: Mapping[str, Any]) -> int | None:
    """The main container's exit code Argo recorded, None without one."""
    value = (node.get("outputs") or {}).get("exitCode")
    if value in (None, "", "-1"):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def attempts_of(node: Mapping[str, Any], nodes: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The attempts of a pod's node, oldest first: a Retry node's children, or itself."""
    if node.get("type") != "Retry":
        return [node] if node.get("type") == "Pod" else []
    found = [nodes[c] for c in node.get("children") or [] if c in nodes]
    return sorted(found, key=attempt_number)


def was_evicted(attempt: Mapping[str, Any]) -> bool:
    """Whether a failed attempt was stopped from outside: no exit code, or SIGTERM's 143."""
    return exit_code(attempt) in (None, EXIT_TERMINATED)


def _waiting_phase(attempts: list[Mapping[str, Any]]) -> PodPhase:
    """The phase of a pod whose node has not finished, from its attempts (B1)."""
    if not attempts:
        return PodPhase.QUEUED
    last = attempts[-1]
    phase = last.get("phase")
    if phase == "Running":
        return PodPhase.RUNNING
    if phase == "Succeeded":
        return PodPhase.SUCCEEDED
    if phase in FAILED_PHASES:
        failed: Mapping[str, Any] | None = last
    else:  # Pending: it waits for admission, for a node, or for its retry
        failed = attempts[-2] if len(attempts) > 1 else None
    if failed is None:
        return PodPhase.QUEUED
    return PodPhase.PREEMPTED if was_evicted(failed) else PodPhase.RETRYING


def _never_ran(attempts: list[Mapping[str, Any]]) -> bool:
    return all(not a.get("hostNodeName") and exit_code(a) is None for a in attempts)


def _pod_status(
    pod: str, node: Mapping[str, Any] | None, nodes: Mapping[str, Any], ended: bool
) -> tuple[PodStatus, list[AttemptFailure]]:
    if node is None:
        return PodStatus(pod, PodPhase.SKIPPED if ended else PodPhase.WAITING), []
    attempts = attempts_of(node, nodes)
    failures = [
        AttemptFailure(
            attempt=attempt_number(a),
            exit_code=exit_code(a),
            oom_killed=OOM_REASON in a.get("message", ""),
            message=a.get("message", ""),
        )
        for a in attempts
        if a.get("phase") in FAILED_PHASES
    ]
    phase = node.get("phase", "")
    if ended and phase not in DONE_PHASES | SKIPPED_PHASES:
        # the workflow ended before Argo settled this node: its last attempt decides
        phase = attempts[-1].get("phase", "Failed") if attempts else "Failed"
        phase = phase if phase in DONE_PHASES else "Failed"
    message = node.get("message", "")
    if phase in SKIPPED_PHASES or node.get("type") == "Skipped":
        status = PodPhase.SKIPPED
    elif phase == "Succeeded":
        status = PodPhase.SUCCEEDED
    elif phase in FAILED_PHASES:
        shut_down = SHUTDOWN in message or any(SHUTDOWN in a.get("message", "") for a in attempts)
        status = PodPhase.SKIPPED if shut_down and _never_ran(attempts) else PodPhase.FAILED
    else:
        status = _waiting_phase(attempts)
    last = attempts[-1] if attempts else node
    return (
        PodStatus(
            name=pod,
            phase=status,
            attempts=len(attempts),
            node=last.get("hostNodeName") or None,
            exit_code=exit_code(last),
            message=message or last.get("message", ""),
        ),
        failures,
    )


def workflow_phase(workflow: Mapping[str, Any]) -> WorkflowPhase:
    """The workflow's own phase; a failed workflow that was shut down is stopped."""
    phase = (workflow.get("status") or {}).get("phase") or ""
    if phase == "Succeeded":
        return WorkflowPhase.SUCCEEDED
    if phase in FAILED_PHASES:
        shutdown = (workflow.get("spec") or {}).get("shutdown")
        return WorkflowPhase.STOPPED if shutdown else WorkflowPhase.FAILED
    if phase == "Running":
        return WorkflowPhase.RUNNING
    return WorkflowPhase.PENDING


def workflow_status(
    workflow: Mapping[str, Any], *, limit_bytes: int = NODES_LIMIT_BYTES
) -> BackendStatus:
    """B1, B2: the status of a workflow as the API returns it (a plain dict); its nodes
    compressed or not (`node_status.py`). Nodes that cannot be read (offloaded, corrupt)
    give an `unreadable` status that says why, so the run keeps its state."""
    phase = workflow_phase(workflow)
    try:
        nodes = workflow_nodes(workflow, limit_bytes=limit_bytes)
    except NodesUnreadable as error:
        return unreadable_status(workflow, str(error))
    by_name = {n.get("name"): n for n in nodes.values()}
    ended = phase is not WorkflowPhase.RUNNING and phase is not WorkflowPhase.PENDING
    pods: dict[str, PodStatus] = {}
    failures: dict[str, list[AttemptFailure]] = {}
    for entry in pod_nodes(workflow):
        status, failed = _pod_status(entry.pod, by_name.get(entry.node_name), nodes, ended)
        pods[entry.pod] = status
        if failed:
            failures[entry.pod] = failed
    message = (workflow.get("status") or {}).get("message", "")
    return BackendStatus(phase=phase, pods=pods, failures=failures, message=message)


def unreadable_status(workflow: Mapping[str, Any], why: str) -> BackendStatus:
    """The status of a workflow whose nodes cannot be read: its phase, no pods, and why."""
    message = (workflow.get("status") or {}).get("message", "")
    return BackendStatus(phase=workflow_phase(workflow), message=message, unreadable=why)


def task_of_pods(workflow: Mapping[str, Any]) -> dict[str, str]:
    """The task of every pod of the workflow (`pod name → task id`)."""
    return {entry.pod: entry.task_id for entry in pod_nodes(workflow)}
