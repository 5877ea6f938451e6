"""ArgoBackend: runs as Argo Workflows whose plain pods Kueue admits and preempts.

A run is one Workflow (`manifest.py`) in the cluster's namespace; its status is read from the
DAG's nodes (`status.py`), wherever Argo put them (`node_status.py`; offloaded ones through
the Argo server, `argo_server.py`); node capacity and placements come from the nodes and pods
(`nodes.py`); a reservation is a taint and a label on a node (`reservations.py`); a stopped
or cancelled workflow's gated pods are deleted once Argo gave them up (`shutdown.py`);
environment images are built by a Job of buildctl and looked up in the registry's API
(`images.py`, `builds.py`); one watch thread wakes the controller on every change of a
workflow (`watch.py`).

Every method may block on the API; none keeps state the controller depends on: a restarted
service builds a new backend and carries on from the cluster.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from typing import Any

from kubernetes import config as kube_config
from kubernetes.client import ApiClient, BatchV1Api, Configuration, CoreV1Api, CustomObjectsApi
from kubernetes.client.rest import ApiException

from cluster.argo import images, listing
from cluster.argo.argo_server import hydrated
from cluster.argo.builds import run_build
from cluster.argo.config import ClusterConfig
from cluster.argo.listing import read_workflow
from cluster.argo.logs import task_logs
from cluster.argo.manifest import RUN_LABEL, workflow_manifest
from cluster.argo.names import STRICT
from cluster.argo.node_status import NodesUnreadable, offload_version
from cluster.argo.nodes import WORKER_LABEL, Requests, live, node_from, pod_requests, used_by_others
from cluster.argo.plugin_hosts import ask_in_pod
from cluster.argo.pod_template import POD_LABEL, TASK_LABEL
from cluster.argo.reservations import patch_node, releasing, reserving
from cluster.argo.shutdown import shut_down
from cluster.argo.status import unreadable_status, workflow_status
from cluster.argo.watch import GROUP, PLURAL, VERSION, WorkflowWatch
from runs.plans import Node
from runs.ports import UNKNOWN_CHANGES, BackendStatus, Changes, Placement, PodLog, RunLaunch

log = logging.getLogger(__name__)


def make_client(config: ClusterConfig) -> ApiClient:
    """A client of the API: the kubeconfig when one is set, else the pod's service account."""
    if config.kubeconfig:
        client: ApiClient = kube_config.new_client_from_config(config_file=config.kubeconfig)
        return client
    configuration = Configuration()
    kube_config.load_incluster_config(client_configuration=configuration)
    return ApiClient(configuration)


class ArgoBackend:
    """The backend of a cluster of Argo Workflows, Kueue and BuildKit (docs/argo-backend.md)."""

    def __init__(self, config: ClusterConfig, api: ApiClient | None = None) -> None:
        """`api`: the API client to use; by default `make_client(config)`."""
        self.config = config
        self.api = api if api is not None else make_client(config)
        self.core = CoreV1Api(self.api)
        self.batch = BatchV1Api(self.api)
        self.custom = CustomObjectsApi(self.api)
        self._closing = threading.Event()
        self._parsed: dict[str, tuple[str, BackendStatus]] = {}  # name → (resourceVersion, it)
        self._run_labels: dict[str, str] = {}  # workflow name → its run label, by `revisions`
        self._watch = WorkflowWatch(
            lambda: ApiClient(self.api.configuration), config.namespace, config.watch_timeout_s
        )

    # -- workflows --------------------------------------------------------------------------

    def submit(self, launch: RunLaunch) -> str:
        """B9: create the run's workflow; one that exists counts as submitted. ValueError for a
        workflow that cannot be built (a pod without an image)."""
        manifest = workflow_manifest(launch, self.config)
        try:
            self.custom.create_namespaced_custom_object(
                GROUP, VERSION, self.config.namespace, PLURAL, manifest, field_validation=STRICT
            )
        except ApiException as error:
            if error.status != 409:
                raise
        return launch.workflow_name

    def _status_of(self, workflow: dict[str, Any]) -> BackendStatus:
        """The status of a workflow as listed or read, its nodes wherever Argo put them."""
        try:
            workflow = hydrated(workflow, self.config)
        except NodesUnreadable as error:
            return unreadable_status(workflow, str(error))
        return workflow_status(workflow, limit_bytes=self.config.nodes_limit_bytes)

    def status(self, name: str) -> BackendStatus:
        """B1, B2: the workflow's status; KeyError when it does not exist."""
        return self._status_of(read_workflow(self.custom, self.config.namespace, name))

    def changes(self, since: Hashable | None) -> Changes:
        """The workflows that changed are found by their revisions (`revisions`), which a
        tick lists anyway: this says nothing more."""
        return UNKNOWN_CHANGES

    def revisions(self, names: Collection[str]) -> dict[str, str]:
        """B1, B2: the resourceVersion of each named workflow that exists, from one list of the
        runs' workflows' metadata (`listing.py`). A workflow at the version this backend
        parsed last keeps its status object; `statuses` reads the others."""
        wanted = set(names)
        found: dict[str, str] = {}
        labels: dict[str, str] = {}
        for item in listing.listed(self.api, self.config.namespace, metadata_only=True):
            metadata = item.get("metadata") or {}
            name, version = metadata.get("name"), str(metadata.get("resourceVersion") or "")
            if name in wanted and version:
                found[name] = version
                labels[name] = str((metadata.get("labels") or {}).get(RUN_LABEL) or "")
        self._run_labels = labels
        self._parsed = {n: parsed for n, parsed in self._parsed.items() if n in found}
        return found

    def statuses(
        self, names: Collection[str], *, may_reuse: Collection[str] = ()
    ) -> dict[str, BackendStatus | None]:
        """B1, B2: the status of many workflows from one list (a page per `WHOLE_PAGE`)
        instead of one read per workflow: of those runs only, by their run label, when they
        are few and `revisions` named their labels; else of every run. None for a workflow
        the list does not hold. Every name is read now (`may_reuse` is not needed); a
        workflow whose resourceVersion is the one parsed last time keeps its status object
        (no parse, and the tick compares it by identity), but for offloaded nodes the Argo
        server did not give (asked again at every read)."""
        wanted = set(names)
        found: dict[str, BackendStatus | None] = dict.fromkeys(wanted)
        if not wanted:
            return found
        labels = {self._run_labels.get(name, "") for name in wanted}
        selector = RUN_LABEL
        if len(wanted) <= listing.SELECTED_MAX and "" not in labels:
            selector = listing.runs_selector(labels)
        parsed: dict[str, tuple[str, BackendStatus]] = {}
        for workflow in listing.listed(self.api, self.config.namespace, selector=selector):
            metadata = workflow.get("metadata") or {}
            name, version = metadata.get("name"), str(metadata.get("resourceVersion") or "")
            if name not in wanted:
                continue
            known = self._parsed.get(name)
            if known is not None and version and known[0] == version:
                found[name] = known[1]  # the same object version: the same status, not parsed
                parsed[name] = known
                continue
            try:
                status = self._status_of(workflow)
            except (KeyError, TypeError, ValueError, AttributeError):
                log.exception("argo backend: cannot read the status of %s", name)
                del found[name]
                continue
            found[name] = status
            if not (status.unreadable and offload_version(workflow)):  # the server: ask again
                parsed[name] = (version, status)
        if selector == RUN_LABEL:  # only the workflows of this read: the others ended or went
            self._parsed = parsed
        else:
            self._parsed.update(parsed)
        return found

    def cancel(self, name: str) -> None:
        """Terminate a workflow: Argo stops its running pods; waiting ones are deleted
        (`shutdown.py`)."""
        shut_down(
            self.custom, self.core, self.config, name, strategy="Terminate", closing=self._closing
        )

    def stop(self, name: str) -> None:
        """K10: stop a decided workflow: Argo fails its pending nodes and stops running pods;
        the pods it leaves (still gated by Kueue) are deleted (`shutdown.py`)."""
        shut_down(self.custom, self.core, self.config, name, strategy="Stop", closing=self._closing)

    def logs(self, name: str, task_id: str, tail_lines: int | None = None) -> list[PodLog]:
        """B10: the logs of a task's pods, every attempt, oldest first."""
        workflow = hydrated(read_workflow(self.custom, self.config.namespace, name), self.config)
        limit = self.config.nodes_limit_bytes
        return task_logs(
            self.core, self.config.namespace, workflow, task_id, tail_lines, limit_bytes=limit
        )

    # -- nodes and pods ---------------------------------------------------------------------

    def _pods(self, **query: Any) -> list[dict[str, Any]]:
        if "namespace" in query:
            namespace = query.pop("namespace")
            reply = self.core.list_namespaced_pod(namespace, _preload_content=False, **query)
        else:
            reply = self.core.list_pod_for_all_namespaces(_preload_content=False, **query)
        items: list[dict[str, Any]] = json.loads(reply.data).get("items") or []
        return items

    def nodes(self) -> list[Node]:
        """B3: the worker nodes runs can use, with their capacity for runs."""
        reply = self.core.list_node(label_selector=f"{WORKER_LABEL}=true", _preload_content=False)
        listed = json.loads(reply.data).get("items") or []
        pods = self._pods(field_selector="status.phase!=Succeeded,status.phase!=Failed")
        used = used_by_others(pods, RUN_LABEL)
        executor = Requests(self.config.executor_cores, self.config.executor_memory_gb)
        found = []
        for node in listed:
            planned = node_from(node, used.get(node["metadata"]["name"], Requests()), executor)
            if planned is not None:
                found.append(planned)
        return sorted(found, key=lambda n: n.name)

    def placements(self) -> list[Placement]:
        """B12: the live pods of runs, with their nodes and requests."""
        found = []
        for pod in self._pods(namespace=self.config.namespace, label_selector=RUN_LABEL):
            phase = (pod.get("status") or {}).get("phase") or "Pending"
            if phase in ("Succeeded", "Failed"):
                continue
            labels = pod["metadata"].get("labels") or {}
            requests = pod_requests(pod)
            found.append(
                Placement(
                    run_id=labels.get(RUN_LABEL),
                    task_id=labels.get(TASK_LABEL, ""),
                    pod=labels.get(POD_LABEL, pod["metadata"]["name"]),
                    node=(pod.get("spec") or {}).get("nodeName"),
                    phase="running" if live(pod) else phase.lower(),
                    cores=requests.cores,
                    memory_gb=requests.memory_gb,
                )
            )
        return sorted(found, key=lambda p: (p.run_id or "", p.pod))

    def reserve(self, node: str, run_id: str) -> None:
        """B4: taint the node `simrun/reserved=<run>:NoExecute` (evicting other runs' pods) and
        label it for the run's pods; it replaces any earlier reservation of the node."""
        patch_node(self.core, node, reserving(run_id))

    def unreserve(self, node: str, run_id: str) -> None:
        """B5: remove this run's taint and label; another run's reservation stays."""
        patch_node(self.core, node, releasing(run_id))

    # -- images -----------------------------------------------------------------------------

    def build_image(self, context: Mapping[str, bytes], ref: str) -> None:
        """B6: build the environment `ref` with BuildKit and push it to the registry."""
        image = images.environment_image(ref, self.config)
        images.split_reference(image, self.config)
        run_build(self.core, self.batch, context, image, self.config, self._closing)

    def has_image(self, ref: str) -> bool:
        """B7: whether the registry has the environment `ref`; ValueError for an image outside
        the cluster's registry, RuntimeError for an answer neither found nor not found."""
        url = images.manifest_url(ref, self.config)
        try:
            secret = json.loads(
                self.core.read_namespaced_secret(
                    self.config.registry_secret, self.config.namespace, _preload_content=False
                ).data
            )
        except ApiException as error:
            if error.status != 404:
                raise
            secret = None
        return images.registry_has(url, images.credentials(secret, self.config.registry))

    def ask_plugin_host(
        self,
        environment: str,
        questions: Sequence[Mapping[str, Any]],
        *,
        timeout_s: float,
        memory_mb: int,
    ) -> list[dict[str, Any]]:
        """A plugin host in a pod of the environment's image answers (plugin_hosts.py)."""
        return ask_in_pod(
            self.core,
            self.batch,
            environment,
            questions,
            self.config,
            timeout_s=timeout_s,
            memory_mb=memory_mb,
            stop=self._closing,
        )

    # -- watching ---------------------------------------------------------------------------

    def subscribe(self, callback: Callable[[], None]) -> None:
        """B8: call `callback` (from the shared watch thread) whenever a run's workflow
        changes; the first subscription starts the thread."""
        self._watch.subscribe(callback)

    def close(self) -> None:
        """Stop the watch thread (at its next event) and any build wait."""
        self._closing.set()
        self._watch.close()

    def join_watch(self, timeout_s: float | None = None) -> bool:
        """After `close`: wait for the watch thread to end; whether it has."""
        return self._watch.join(timeout_s)

    @property
    def watch(self) -> WorkflowWatch:
        return self._watch
