"""Stopping and cancelling a workflow (K10): its shutdown strategy, then the pods Argo left.

Argo fails the nodes still pending and stops the running pods, but leaves the pods Kueue
still gates, and a pod Kueue admits after the workflow ended would run on. So once Argo has
ended a pod's node, a pod of it that has not ended is deleted; a pod is never deleted while
its node still waits, or Argo would create it again for the same attempt (K3) before it saw
the shutdown.
"""

from __future__ import annotations

import logging
import threading
import time

from kubernetes.client import CoreV1Api, CustomObjectsApi
from kubernetes.client.rest import ApiException

from cluster.argo.argo_server import hydrated
from cluster.argo.config import ClusterConfig
from cluster.argo.listing import read_workflow
from cluster.argo.logs import workflow_pods
from cluster.argo.names import MERGE_PATCH, STRICT
from cluster.argo.node_status import NodesUnreadable, workflow_nodes
from cluster.argo.status import DONE_PHASES
from cluster.argo.watch import GROUP, PLURAL, VERSION

log = logging.getLogger(__name__)

SHUTDOWN_POLL_S = 0.05


def shut_down(
    custom: CustomObjectsApi,
    core: CoreV1Api,
    config: ClusterConfig,
    name: str,
    *,
    strategy: str,
    closing: threading.Event,
) -> None:
    """Set the workflow's shutdown strategy (`Stop`, `Terminate`), then delete the pods Argo
    has given up, for at most the configured wait or until `closing` is set. KeyError for a
    workflow that does not exist."""
    try:
        custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            config.namespace,
            PLURAL,
            name,
            {"spec": {"shutdown": strategy}},
            field_validation=STRICT,
            _content_type=MERGE_PATCH,
        )
    except ApiException as error:
        if error.status == 404:
            raise KeyError(name) from None
        raise
    deadline = time.monotonic() + config.shutdown_wait_s
    while not remove_given_up(custom, core, config, name) and time.monotonic() < deadline:
        if closing.wait(SHUTDOWN_POLL_S):
            return


def remove_given_up(
    custom: CustomObjectsApi, core: CoreV1Api, config: ClusterConfig, name: str
) -> bool:
    """Delete the live pods whose nodes Argo has ended; whether no live pod's node waits."""
    try:
        workflow = read_workflow(custom, config.namespace, name)
    except KeyError:
        return True
    try:
        nodes = workflow_nodes(hydrated(workflow, config), limit_bytes=config.nodes_limit_bytes)
    except NodesUnreadable as error:  # which nodes ended is unknown: delete no pod
        log.warning("argo backend: %s: its gated pods are left (%s)", name, error)
        return True
    waiting = False
    for node_id, pod in workflow_pods(core, config.namespace, name).items():
        ended = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        if ended or pod["metadata"].get("deletionTimestamp"):
            continue
        if (nodes.get(node_id) or {}).get("phase") not in DONE_PHASES:
            waiting = True
            continue
        try:
            core.delete_namespaced_pod(pod["metadata"]["name"], config.namespace)
        except ApiException as error:
            if error.status != 404:
                raise
    return not waiting
