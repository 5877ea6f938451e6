"""A plugin host in a pod of a model's image (`Backend.ask_plugin_host` on a cluster).

The model's environment is an image, not a directory of the service's, so what must be
answered by the model's copy of a plugin (its units listed for the keys of reuse, which
code that copy is) is asked of a Job of one pod of that image: `python -m
simrun_harness.plugin_host --once` with the questions as its argument and the run store
mounted where every pod mounts it (it reads the model's snapshot, writes a units list into
the run's task directory). Its answers are read back from the pod's log, then the Job is
deleted with its pod (background propagation). A pod that does not end within the deadline
(never scheduled, its image not pulled, a plugin that hangs) is an error naming what it was
doing, and is deleted all the same; its Job's `activeDeadlineSeconds` ends it should the
service die while waiting. Like a build, the pod runs off the worker nodes and outside
Kueue: it is small and short, and takes nothing Kueue gave a run.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from kubernetes.client import BatchV1Api, CoreV1Api
from kubernetes.client.rest import ApiException

from cluster.argo.config import ClusterConfig
from cluster.argo.images import OFF_WORKERS, environment_image, job_outcome
from cluster.argo.logs import api_reason
from cluster.argo.names import STRICT
from runs.ports import PluginHostFailed
from simrun_harness.plugin_host import parse_answers

HOST_LABEL = "simrun/plugin-host"
CONTAINER = "host"
BACKSTOP_S = 60
"""The Job's own deadline is the service's plus this: it ends a pod nobody waits for."""
MEMORY_MARGIN_MB = 256
"""The container's memory limit above the host's own data segment limit (Python itself)."""
LOG_TAIL_LINES = 20
POLL_S = (0.05, 1.0)


def host_job(
    name: str,
    environment: str,
    questions: Sequence[Mapping[str, Any]],
    config: ClusterConfig,
    *,
    timeout_s: float,
    memory_mb: int,
) -> dict[str, Any]:
    """The Job of one plugin host pod of the environment's image answering `questions`."""
    labels = {HOST_LABEL: name, "app.kubernetes.io/part-of": "simrun"}
    command = ["python", "-m", "simrun_harness.plugin_host", "--once"]
    command += ["--store", config.pod_store, "--memory-mb", str(memory_mb)]
    command += ["--questions", json.dumps(list(questions), sort_keys=True)]
    container = {
        "name": CONTAINER,
        "image": environment_image(environment, config),
        "command": command,
        "resources": {
            "requests": {"cpu": "100m", "memory": f"{memory_mb}Mi"},
            "limits": {"memory": f"{memory_mb + MEMORY_MARGIN_MB}Mi"},
        },
        "volumeMounts": [{"name": "store", "mountPath": config.pod_store}],
    }
    spec = {
        "restartPolicy": "Never",
        "affinity": OFF_WORKERS,
        "containers": [container],
        "volumes": [{"name": "store", "persistentVolumeClaim": {"claimName": config.store_claim}}],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": config.namespace, "labels": labels},
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": int(timeout_s) + BACKSTOP_S,
            "ttlSecondsAfterFinished": 600,
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def _pods(core: CoreV1Api, namespace: str, name: str) -> list[dict[str, Any]]:
    reply = core.list_namespaced_pod(
        namespace, label_selector=f"{HOST_LABEL}={name}", _preload_content=False
    )
    pods: list[dict[str, Any]] = json.loads(reply.data).get("items") or []
    return pods


def _log(core: CoreV1Api, namespace: str, pod: Mapping[str, Any]) -> str:
    try:
        reply = core.read_namespaced_pod_log(
            pod["metadata"]["name"], namespace, container=CONTAINER, _preload_content=False
        )
    except ApiException as error:
        return f"[log not available: {api_reason(error)}]"
    text: str = reply.data.decode("utf-8", errors="replace")
    return text


def _where(pods: list[dict[str, Any]]) -> str:
    """What the pod was doing when the deadline passed: its phase and why it waits."""
    if not pods:
        return "no pod was made"
    status = pods[0].get("status") or {}
    why = [
        c.get("message") or c.get("reason") or ""
        for c in status.get("conditions") or []
        if c.get("status") == "False" and c.get("type") == "PodScheduled"
    ]
    for c in status.get("containerStatuses") or []:
        waiting = (c.get("state") or {}).get("waiting")
        if waiting:
            why.append(waiting.get("message") or waiting.get("reason") or "")
    phase = status.get("phase") or "Pending"
    return f"its pod was {phase}" + (f": {'; '.join(w for w in why if w)}" if any(why) else "")


def _tail(text: str) -> str:
    return "\n".join(text.strip().splitlines()[-LOG_TAIL_LINES:])


def ask_in_pod(
    core: CoreV1Api,
    batch: BatchV1Api,
    environment: str,
    questions: Sequence[Mapping[str, Any]],
    config: ClusterConfig,
    *,
    timeout_s: float,
    memory_mb: int,
    stop: threading.Event | None = None,
) -> list[dict[str, Any]]:
    """The answers of a plugin host pod of `environment`; see the module docstring."""
    name = f"simrun-plugin-host-{uuid.uuid4().hex[:12]}"
    job = host_job(name, environment, questions, config, timeout_s=timeout_s, memory_mb=memory_mb)
    batch.create_namespaced_job(config.namespace, job, field_validation=STRICT)
    try:
        return _wait(core, batch, name, len(questions), config, timeout_s, stop)
    finally:
        try:
            batch.delete_namespaced_job(name, config.namespace, propagation_policy="Background")
        except ApiException as error:
            if error.status != 404:
                raise


def _wait(
    core: CoreV1Api,
    batch: BatchV1Api,
    name: str,
    count: int,
    config: ClusterConfig,
    timeout_s: float,
    stop: threading.Event | None,
) -> list[dict[str, Any]]:
    namespace = config.namespace
    deadline = time.monotonic() + timeout_s
    waiter = stop or threading.Event()
    pause = POLL_S[0]
    while True:
        reply = batch.read_namespaced_job(name, namespace, _preload_content=False)
        outcome = job_outcome(json.loads(reply.data))
        if outcome is not None:
            pods = _pods(core, namespace, name)
            log = _log(core, namespace, pods[0]) if pods else ""
            answers = parse_answers(log)
            if outcome == "Complete" and len(answers) == count:
                return answers
            tail = _tail(log)
            raise PluginHostFailed(
                f"its pod {outcome.lower()} without answering" + (f":\n{tail}" if tail else "")
            )
        if time.monotonic() > deadline:
            where = _where(_pods(core, namespace, name))
            raise PluginHostFailed(
                f"its pod did not answer within {timeout_s:g} s and was deleted ({where})"
            )
        if waiter.wait(pause):
            raise PluginHostFailed("it was abandoned: the backend closed")
        pause = min(pause * 1.5, POLL_S[1])
