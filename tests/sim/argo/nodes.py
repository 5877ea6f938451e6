"""Nodes of `status.nodes` and how Argo reads a pod into its node.

`assess` follows `assessNodeStatus` (workflow/controller/operator.go): a Pending pod makes a
Pending node with the reason it waits (a waiting container's reason, else the scheduler's
`Unschedulable` message); Running, Succeeded as they are; a Failed pod goes through
`infer_failed` (`inferFailedReason`): the main container's non-zero exit fails the node with
`main: <reason> (exit code <n>)` (so a kill for memory reads `main: OOMKilled (exit code
137)`), an init or wait container's failure makes it Error. The main container's exit code
becomes `outputs.exitCode` (a string) and the pod's node `hostNodeName`.
"""

from __future__ import annotations

from typing import Any

from tests.sim.store import Obj

FULFILLED = frozenset({"Succeeded", "Failed", "Error", "Skipped", "Omitted"})
FAILED = frozenset({"Failed", "Error"})


def fulfilled(node: dict[str, Any] | None) -> bool:
    """Whether a node reached a final phase."""
    return node is not None and node.get("phase") in FULFILLED


def exit_code(node: dict[str, Any]) -> str | None:
    """The exit code Argo recorded for a node, None without one."""
    return ((node.get("outputs") or {}).get("exitCode")) or None


def pending_reason(pod: Obj) -> str:
    """Why a pending pod waits, as `getPendingReason` words it."""
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting")
        if waiting:
            reason, message = waiting.get("reason", ""), waiting.get("message")
            return f"{reason}: {message}" if message else reason
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("reason") == "Unschedulable":
            message = condition.get("message")
            return f"Unschedulable: {message}" if message else "Unschedulable"
    return ""


def infer_failed(pod: Obj) -> tuple[str, str]:
    """The phase and message of the node of a Failed pod."""
    pod_status = pod.get("status") or {}
    if pod_status.get("message"):
        return "Failed", pod_status["message"]
    order = {"main": 1, "wait": 2}
    containers = sorted(
        pod_status.get("containerStatuses") or [], key=lambda c: order.get(c.get("name"), 3)
    )
    containers = [*(pod_status.get("initContainerStatuses") or []), *containers]
    if not containers:
        name, namespace = pod["metadata"]["name"], pod["metadata"].get("namespace")
        return "Failed", f"can't find failed message for pod {name} namespace {namespace}"
    main_ok = wait_ok = False
    for container in containers:
        name, state = container.get("name"), container.get("state") or {}
        if state.get("waiting"):
            waiting = state["waiting"]
            return "Error", (
                f"Pod failed before {name} container starts due to "
                f"{waiting.get('reason', '')}: {waiting.get('message', '')}"
            )
        terminated = state.get("terminated")
        if terminated is None:
            continue
        code = terminated.get("exitCode", 0)
        if code == 0:
            main_ok = main_ok or name == "main"
            wait_ok = wait_ok or name == "wait"
            continue
        message = f"{name}: {terminated.get('reason', '')} (exit code {code})"
        if terminated.get("message"):
            message += f": {terminated['message']}"
        if name == "main":
            return "Failed", message
        if name in ("init", "wait"):
            return "Error", message
        if code not in (137, 143):
            return "Failed", message
    if main_ok:
        return (
            ("Succeeded", "")
            if wait_ok
            else ("Failed", "pod failed: wait container did not complete successfully")
        )
    if wait_ok:
        return "Failed", "pod failed: main container did not complete successfully"
    return "Failed", "pod failed: neither main nor wait container completed successfully"


def _main_terminated(pod: Obj) -> dict[str, Any] | None:
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        if container.get("name") == "main":
            return (container.get("state") or {}).get("terminated")
    return None


def _latest_finish(pod: Obj, now: str) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    finishes = [
        (c.get("state") or {}).get("terminated", {}).get("finishedAt")
        for c in statuses
        if (c.get("state") or {}).get("terminated")
    ]
    return max((f for f in finishes if f), default=now)


def assess(node: dict[str, Any], pod: Obj, now: str) -> None:
    """Update a Pod node from its pod (see the module docstring)."""
    old_phase, old_message = node.get("phase"), node.get("message", "")
    phase = (pod.get("status") or {}).get("phase")
    if phase == "Pending":
        node["phase"], node["message"] = "Pending", pending_reason(pod)
    elif phase == "Succeeded":
        node["phase"] = "Succeeded"
    elif phase == "Failed":
        node["phase"], node["message"] = infer_failed(pod)
    elif phase == "Running":
        node["phase"] = "Running"
    else:
        node["phase"] = "Error"
        node["message"] = f"Unexpected pod phase for {pod['metadata']['name']}: {phase}"
    if (pod.get("spec") or {}).get("nodeName"):
        node["hostNodeName"] = pod["spec"]["nodeName"]
    terminated = _main_terminated(pod)
    if terminated is not None:
        node.setdefault("outputs", {})["exitCode"] = str(terminated.get("exitCode", 0))
    if (
        old_phase == "Pending"
        and node["phase"] not in ("Pending", "Failed", "Error")
        and node.get("message", "") == old_message
    ):
        node["message"] = ""
    if not node.get("message"):
        node.pop("message", None)
    if fulfilled(node) and not node.get("finishedAt"):
        node["finishedAt"] = _latest_finish(pod, now)
