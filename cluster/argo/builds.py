"""Running an image build on the cluster (B6): the Job, its context, the wait, the cleanup.

One Job per image (`images.build_name`): a builder that finds the Job already there (another
submission, or one that died half way) waits for it instead of starting another. The context
ConfigMap is created right after the Job, owned by it; the Job's pod waits for the ConfigMap to
appear. The wait ends when the Job completes (the image is pushed), fails (RuntimeError with the
end of buildctl's log), or the timeout passes (TimeoutError); the Job is then deleted with its
pods and its ConfigMap (background propagation), so a later build starts afresh.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from typing import Any

from kubernetes.client import BatchV1Api, CoreV1Api
from kubernetes.client.rest import ApiException

from cluster.argo.build_context import with_local_packages
from cluster.argo.config import ClusterConfig
from cluster.argo.images import (
    BUILD_LABEL,
    build_job,
    build_name,
    check_context,
    context_config_map,
    job_outcome,
)
from cluster.argo.logs import api_reason
from cluster.argo.names import STRICT

LOG_TAIL_LINES = 40
POLL_S = (0.05, 2.0)


def _tail(core: CoreV1Api, namespace: str, job: str) -> str:
    """The last lines of the logs of a build's pods (why it failed)."""
    reply = core.list_namespaced_pod(
        namespace, label_selector=f"{BUILD_LABEL}={job}", _preload_content=False
    )
    texts = []
    for pod in json.loads(reply.data).get("items") or []:
        try:
            log = core.read_namespaced_pod_log(
                pod["metadata"]["name"],
                namespace,
                container="buildctl",
                tail_lines=LOG_TAIL_LINES,
                _preload_content=False,
            )
            texts.append(log.data.decode("utf-8", errors="replace"))
        except ApiException as error:
            texts.append(f"[log not available: {api_reason(error)}]")
    return "\n".join(t.strip() for t in texts if t.strip()) or "(no log)"


def _create_job(batch: BatchV1Api, image: str, config: ClusterConfig) -> dict[str, Any]:
    """Create the build's Job, or find the one that exists."""
    try:
        reply = batch.create_namespaced_job(
            config.namespace,
            build_job(image, config),
            field_validation=STRICT,
            _preload_content=False,
        )
    except ApiException as error:
        if error.status != 409:
            raise
        reply = batch.read_namespaced_job(
            build_name(image), config.namespace, _preload_content=False
        )
    job: dict[str, Any] = json.loads(reply.data)
    return job


def _delete_job(batch: BatchV1Api, namespace: str, name: str) -> None:
    try:
        batch.delete_namespaced_job(name, namespace, propagation_policy="Background")
    except ApiException as error:
        if error.status != 404:
            raise


def run_build(
    core: CoreV1Api,
    batch: BatchV1Api,
    context: Mapping[str, bytes],
    image: str,
    config: ClusterConfig,
    stop: threading.Event | None = None,
) -> None:
    """B6: build `image` from a flat context and push it; see the module docstring.

    The model's local packages go into the context (`build_context.with_local_packages`).
    Raises ValueError (a context with a directory or too large), RuntimeError (the build
    failed), TimeoutError (it took longer than `config.build_timeout_s`).
    """
    context = with_local_packages(context, config.local_packages)
    check_context(context)
    job = _create_job(batch, image, config)
    name = job["metadata"]["name"]
    try:
        core.create_namespaced_config_map(
            config.namespace,
            context_config_map(image, context, job, config),
            field_validation=STRICT,
        )
    except ApiException as error:
        if error.status != 409:
            _delete_job(batch, config.namespace, name)
            raise
    deadline = time.monotonic() + config.build_timeout_s
    waiter = stop or threading.Event()
    pause = POLL_S[0]
    while True:
        reply = batch.read_namespaced_job(name, config.namespace, _preload_content=False)
        outcome = job_outcome(json.loads(reply.data))
        if outcome == "Complete":
            _delete_job(batch, config.namespace, name)
            return
        if outcome == "Failed":
            tail = _tail(core, config.namespace, name)
            _delete_job(batch, config.namespace, name)
            raise RuntimeError(f"the build of {image} failed:\n{tail}")
        if time.monotonic() > deadline:
            _delete_job(batch, config.namespace, name)
            raise TimeoutError(
                f"the build of {image} took longer than {config.build_timeout_s:g} s"
            )
        if waiter.wait(pause):
            raise RuntimeError(f"the build of {image} was abandoned: the backend closed")
        pause = min(pause * 1.5, POLL_S[1])
