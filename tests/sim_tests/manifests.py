"""Small manifests the simulator's tests create: pods running `python -c`, Argo workflows."""

from __future__ import annotations

import json
import sys
from typing import Any

from kubernetes.client.rest import ApiException

QUEUE = {"kueue.x-k8s.io/queue-name": "simrun"}
ONE_NODE = {"kueue.x-k8s.io/podset-required-topology": "kubernetes.io/hostname"}
# A container that says "ready" once it handles SIGTERM, then waits to be stopped (exit 143).
WAITS = (
    "import signal, sys; signal.signal(signal.SIGTERM, lambda *a: sys.exit(143)); "
    "print('ready', flush=True); signal.pause()"
)


def logged(kube: Any, name: str, text: str = "ready") -> bool:
    """Whether the main container of pod `name` wrote `text` to its log yet."""
    try:
        log = kube.core.read_namespaced_pod_log(
            name, kube.namespace, container="main", _preload_content=False
        ).data
    except ApiException:
        return False
    return text.encode() in log


def python(code: str) -> list[str]:
    """The command of a container running a Python snippet in this environment."""
    return [sys.executable, "-c", code]


def resources(cpu: str = "1", memory: str = "1Gi") -> dict[str, Any]:
    """Requests equal to limits, as simrun's pods have."""
    amounts = {"cpu": cpu, "memory": memory}
    return {"requests": dict(amounts), "limits": dict(amounts)}


def pod(
    name: str,
    code: str = "pass",
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    cpu: str = "1",
    memory: str = "1Gi",
    grace: int | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A one-container pod running `code`."""
    body: dict[str, Any] = {
        "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "python",
                    "command": python(code),
                    "resources": resources(cpu, memory),
                }
            ],
            **spec,
        },
    }
    if grace is not None:
        body["spec"]["terminationGracePeriodSeconds"] = grace
    return body


def queued_pod(
    name: str, code: str = "pass", priority: str = "simrun-person", **fields: Any
) -> dict[str, Any]:
    """A pod of simrun's queue with one-node topology and a priority class."""
    return pod(
        name,
        code,
        labels={**QUEUE, "kueue.x-k8s.io/priority-class": priority},
        annotations=dict(ONE_NODE),
        priorityClassName=priority,
        **fields,
    )


# Exits with its first argument on the first attempt (the second argument is {{retries}}).
FAILS_FIRST = "import sys; sys.exit(int(sys.argv[1]) if sys.argv[2] == '0' else 0)"
# Exits with its first argument.
EXITS = "import sys; sys.exit(int(sys.argv[1]))"
# simrun's retry strategy of a split task: 3 and 4 (analysis failures) are never retried.
SPLIT_RETRIES = {
    "limit": 100,
    "retryPolicy": "Always",
    "expression": "lastRetry.exitCode != '3' && lastRetry.exitCode != '4'",
}


def worker_template(
    name: str = "work",
    code: str = EXITS,
    *,
    args: tuple[str, ...] = ("{{inputs.parameters.code}}", "{{retries}}"),
    retry: dict[str, Any] | None = None,
    patch: dict[str, Any] | None = None,
    memory: str = "1Gi",
    queued: bool = True,
) -> dict[str, Any]:
    """A container template with the inputs `code` and `priority`, like simrun's workers."""
    template: dict[str, Any] = {
        "name": name,
        "inputs": {
            "parameters": [
                {"name": "code", "value": "0"},
                {"name": "priority", "value": "simrun-person"},
            ]
        },
        "priorityClassName": "{{inputs.parameters.priority}}",
        "container": {
            "image": "python",
            "command": python(code),
            "args": list(args),
            "env": [{"name": "WORKER_PRIORITY", "value": "{{inputs.parameters.priority}}"}],
            "resources": resources("1", memory),
        },
    }
    if queued:
        template["metadata"] = {
            "labels": {**QUEUE, "kueue.x-k8s.io/priority-class": "{{inputs.parameters.priority}}"},
            "annotations": dict(ONE_NODE),
        }
    if retry is not None:
        template["retryStrategy"] = retry
    if patch is not None:
        template["podSpecPatch"] = json.dumps(patch)
    return template


def task(name: str, code: str = "0", template: str = "work", **fields: Any) -> dict[str, Any]:
    """A DAG task of the worker template exiting with `code`."""
    parameters = [{"name": "code", "value": code}]
    if "priority" in fields:
        parameters.append({"name": "priority", "value": fields.pop("priority")})
    return {"name": name, "template": template, "arguments": {"parameters": parameters}, **fields}


def workflow(
    name: str, tasks: list[dict[str, Any]], *templates: dict[str, Any], **spec: Any
) -> dict[str, Any]:
    """A workflow whose entrypoint is a DAG of `tasks`."""
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": name},
        "spec": {
            "entrypoint": "dag",
            "templates": [
                {"name": "dag", "dag": {"tasks": tasks}},
                *(templates or (worker_template(),)),
            ],
            **spec,
        },
    }
