"""The logs of a task's pods (B10, K11): every attempt, oldest first, at most a byte limit.

Each attempt of a pod is a node of the workflow whose Kubernetes pod carries the node's id in
its annotation `workflows.argoproj.io/node-id`; the main container's log is read from that
pod. A log that cannot be read says why: the pod has not started, or it is gone (a pod deleted
by a preemption takes its log with it, K11), or the API refused.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kubernetes.client import CoreV1Api
from kubernetes.client.rest import ApiException

from cluster.argo.node_status import NODES_LIMIT_BYTES, workflow_nodes
from cluster.argo.status import DONE_PHASES, attempt_number, attempts_of, pod_nodes
from runs.ports import LOG_LIMIT_BYTES, PodLog

NODE_ID = "workflows.argoproj.io/node-id"
WORKFLOW_LABEL = "workflows.argoproj.io/workflow"
ENDED = frozenset({"Succeeded", "Failed"})
GONE = "its pod is gone (deleted, e.g. by a preemption), and its log with it"


def api_reason(error: ApiException) -> str:
    """The message of an API error's Status body, else its reason."""
    try:
        return str(json.loads(error.body or "{}").get("message") or error.reason)
    except (TypeError, ValueError):
        return str(error.reason)


def workflow_pods(core: CoreV1Api, namespace: str, workflow: str) -> dict[str, dict[str, Any]]:
    """The pods of a workflow by the id of their node."""
    reply = core.list_namespaced_pod(
        namespace, label_selector=f"{WORKFLOW_LABEL}={workflow}", _preload_content=False
    )
    found: dict[str, dict[str, Any]] = {}
    for pod in json.loads(reply.data).get("items") or []:
        node_id = ((pod.get("metadata") or {}).get("annotations") or {}).get(NODE_ID)
        if node_id:
            found[node_id] = pod
    return found


def read_log(
    core: CoreV1Api, namespace: str, pod: Mapping[str, Any], tail_lines: int | None
) -> tuple[str, bool]:
    """The main container's log (its last `tail_lines`), at most LOG_LIMIT_BYTES; and whether
    it was cut. Raises ApiException."""
    reply = core.read_namespaced_pod_log(
        pod["metadata"]["name"],
        namespace,
        container="main",
        tail_lines=tail_lines,
        limit_bytes=LOG_LIMIT_BYTES + 1,
        _preload_content=False,
    )
    data: bytes = reply.data
    cut = len(data) > LOG_LIMIT_BYTES
    return data[:LOG_LIMIT_BYTES].decode("utf-8", errors="replace"), cut


def task_logs(
    core: CoreV1Api,
    namespace: str,
    workflow: Mapping[str, Any],
    task_id: str,
    tail_lines: int | None = None,
    *,
    limit_bytes: int = NODES_LIMIT_BYTES,
) -> list[PodLog]:
    """B10: a log per attempt of every pod of the task, oldest first; KeyError for an unknown
    task, NodesUnreadable when the workflow's nodes cannot be read (`node_status.py`)."""
    entries = [e for e in pod_nodes(workflow) if e.task_id == task_id]
    if not entries:
        raise KeyError(task_id)
    name = workflow["metadata"]["name"]
    nodes = workflow_nodes(workflow, limit_bytes=limit_bytes)
    by_name = {n.get("name"): n for n in nodes.values()}
    pods = workflow_pods(core, namespace, name)
    found: list[tuple[tuple[str, str, int], PodLog]] = []
    for entry in entries:
        node = by_name.get(entry.node_name)
        attempts = attempts_of(node, nodes) if node else []
        if not attempts:
            found.append((("~", entry.pod, 0), PodLog(entry.pod, 0, error="not started")))
            continue
        for attempt in attempts:
            number = attempt_number(attempt)
            key = (attempt.get("startedAt") or "~", entry.pod, number)
            done = attempt.get("phase") in DONE_PHASES
            pod = pods.get(attempt.get("id", ""))
            if pod is None:
                found.append((key, PodLog(entry.pod, number, ended=done, error=GONE)))
                continue
            ended = done or (pod.get("status") or {}).get("phase") in ENDED
            try:
                text, cut = read_log(core, namespace, pod, tail_lines)
            except ApiException as error:
                log = PodLog(entry.pod, number, ended=ended, error=api_reason(error))
            else:
                log = PodLog(entry.pod, number, text, ended=ended, truncated=cut)
            found.append((key, log))
    return [log for _, log in sorted(found, key=lambda item: item[0])]
