"""`SimCluster`: the simulated cluster as tests and benchmarks drive it.

It wires the store, the API server, Kueue, the scheduler, the taint manager, the kubelets,
the Job controller, Argo (its controller, and its server's API for offloaded nodes) and the
registry with BuildKit, runs the controllers in one background thread (a pass every
`tick_s`, at once after any write), and offers the controls a test needs: nodes to add,
remove, lose and restore; a pod to preempt as Kueue would; controllers to pause and resume;
the clock to advance; waits with deadlines.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import kubernetes

from tests.sim.admission import (
    default_tolerations,
    pod_defaults,
    priority_admission,
    service_account_admission,
)
from tests.sim.apiserver import ApiServer
from tests.sim.argo.controller import DONE, ArgoController
from tests.sim.argo.packing import NodeStatusPacker, NodeStatusStorage
from tests.sim.argo.server import ArgoServer
from tests.sim.argo.templates import ExecutorConfig, node_id
from tests.sim.clock import SimClock
from tests.sim.jobs import JobController
from tests.sim.kubelet import Kubelet
from tests.sim.kueue import Kueue, KueuePods, queue_objects, webhook
from tests.sim.loop import ControllerLoop
from tests.sim.nodes import WORKER_LABEL, NodeSpec, mark_reachable, mark_unreachable
from tests.sim.quantities import amounts, render, total
from tests.sim.registry import BuildKit, Registry
from tests.sim.resources import (
    NAMESPACES,
    NODES,
    PODS,
    PRIORITY_CLASSES,
    SERVICE_ACCOUNTS,
    WORKFLOWS,
    WORKLOAD_PRIORITY_CLASSES,
    ResourceInfo,
)
from tests.sim.routes import AccessRecord
from tests.sim.scheduling import Scheduler, TaintManager
from tests.sim.store import Obj, Store, meta
from tests.waiting import DEADLINE_S, wait_for

# The six tiers of simrun; values only order them.
WORKFLOW_ACCOUNTS = ("simrun-workflow",)
"""The accounts besides `default` the deploy makes in the namespace (deploy/cluster/argo/
workflow-pods.yaml: the identity of a run's pods)."""
DEFAULT_PRIORITIES = {
    "simrun-owner": 600,
    "simrun-person": 500,
    "simrun-agent": 400,
    "simrun-owner-extra": 300,
    "simrun-person-extra": 200,
    "simrun-agent-extra": 100,
}


class SimCluster:
    """A simulated Kubernetes cluster with Argo, Kueue and BuildKit (see module docstring)."""

    def __init__(
        self,
        nodes: int | Sequence[NodeSpec] = 3,
        *,
        namespace: str = "simrun",
        workdir: Path | None = None,
        volume_dirs: Mapping[str, Path] | None = None,
        priority_classes: Mapping[str, int] | None = None,
        quota: Mapping[str, str] | None = None,
        executor: ExecutorConfig | None = None,
        tick_s: float = 0.02,
        memory_poll_s: float = 0.05,
        with_registry: bool = True,
        single_process_oom_kill: bool = False,
        node_status: NodeStatusStorage | None = None,
        service_accounts: Sequence[str] = WORKFLOW_ACCOUNTS,
    ) -> None:
        self.namespace = namespace
        self._accounts = ("default", *service_accounts)
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="simcluster-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.clock = SimClock()
        self.store = Store(self.clock)
        self.store.admission += [
            pod_defaults,
            default_tolerations,
            webhook,
            priority_admission(self.store),
            service_account_admission(self.store),
        ]
        self.registry = Registry() if with_registry else None
        self.buildkit = BuildKit(self.store, self.registry)
        self.kubelet = Kubelet(
            self.store,
            self.workdir,
            volume_dirs or {},
            self.buildkit,
            memory_poll_s,
            single_process_oom_kill,
        )
        self.kueue = Kueue(self.store)
        self.packer = NodeStatusPacker(node_status)
        self.argo = ArgoController(
            self.store, self.kubelet.terminate_containers, executor, self.packer
        )
        self.argo_server = ArgoServer(self.store, self.packer)
        self.api = ApiServer(self.store, self.kubelet)

        self.loop = ControllerLoop(
            self.store,
            [
                TaintManager(self.store),
                self.kueue,
                KueuePods(self.store),
                Scheduler(self.store),
                self.kubelet,
                JobController(self.store),
                self.argo,
            ],
            tick_s,
        )
        self._auto_quota = quota is None
        self._quota = dict(quota or {})
        self._priorities = dict(
            DEFAULT_PRIORITIES if priority_classes is None else priority_classes
        )
        self._nodes = (
            [NodeSpec(f"node-{i + 1}") for i in range(nodes)]
            if isinstance(nodes, int)
            else list(nodes)
        )
        self.kubeconfig = self.workdir / "kubeconfig"

    # -- life ----------------------------------------------------------------------------

    def start(self) -> SimCluster:
        """Create the nodes, queue and priority classes, serve, run the controllers."""
        for name in ("default", self.namespace):
            self.store.create(NAMESPACES, "", {"metadata": {"name": name}})
            for account in self._accounts if name == self.namespace else ("default",):
                self.store.create(SERVICE_ACCOUNTS, name, {"metadata": {"name": account}})
        for name, value in self._priorities.items():
            self.set_priority_class(name, value)
        for spec in self._nodes:
            self.store.create(NODES, "", spec.manifest())
        self.configure_queue(self._quota or None)
        self.api.start()
        self.api.write_kubeconfig(self.kubeconfig, self.namespace)
        self.argo_server.start()
        self.loop.start()
        return self

    def stop(self) -> None:
        """Stop everything and kill every container."""
        self.loop.stop()
        self.kubelet.shutdown()
        self.api.stop()
        self.argo_server.stop()
        if self.registry is not None:
            self.registry.stop()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> SimCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- access --------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return self.api.url

    @property
    def access_log(self) -> list[AccessRecord]:
        """Every API request so far, as RBAC sees it."""
        return self.api.access_log

    @property
    def errors(self) -> list[str]:
        """Exceptions raised inside the simulated controllers (should stay empty)."""
        return self.loop.errors

    def api_client(self) -> kubernetes.client.ApiClient:
        """A `kubernetes` ApiClient configured from the cluster's kubeconfig."""
        return kubernetes.config.new_client_from_config(config_file=str(self.kubeconfig))

    # -- configuration -------------------------------------------------------------------

    def set_priority_class(self, name: str, value: int) -> None:
        """A PriorityClass and a Kueue WorkloadPriorityClass of the same name and value."""
        for info in (PRIORITY_CLASSES, WORKLOAD_PRIORITY_CLASSES):
            if self.store.find(info, "", name) is None:
                self.store.create(info, "", {"metadata": {"name": name}, "value": value})

    def configure_queue(
        self, nominal: Mapping[str, str] | None = None, node_labels: Mapping[str, str] | None = None
    ) -> None:
        """The ResourceFlavor, ClusterQueue and LocalQueue `simrun` (quota: the workers')."""
        self._auto_quota = nominal is None
        quota = dict(nominal) if nominal is not None else self._worker_quota()
        labels = dict(node_labels) if node_labels is not None else dict([WORKER_LABEL])
        for info, obj in queue_objects(quota, labels, self.namespace):
            namespace = meta(obj).get("namespace", "")
            if self.store.find(info, namespace, meta(obj)["name"]) is None:
                self.store.create(info, namespace, obj)
            else:
                self.store.modify(info, namespace, meta(obj)["name"], _spec_setter(obj["spec"]))

    def _worker_quota(self) -> dict[str, str]:
        workers = [
            n
            for n in self.store.objects(NODES)[0]
            if (meta(n).get("labels") or {}).get(WORKER_LABEL[0]) == WORKER_LABEL[1]
        ]
        summed = total(amounts(n["status"]["allocatable"]) for n in workers)
        return {
            r: render(summed.get(r, Decimal(0)))
            for r in ("cpu", "memory", "nvidia.com/gpu", "ephemeral-storage")
        }

    # -- nodes ---------------------------------------------------------------------------

    def add_node(self, spec: NodeSpec | str, **fields: Any) -> None:
        """Add a node (a NodeSpec, or a name and NodeSpec fields)."""
        node = spec if isinstance(spec, NodeSpec) else NodeSpec(spec, **fields)
        self.store.create(NODES, "", node.manifest())
        if self._auto_quota:
            self.configure_queue()

    def lose_node(self, name: str) -> None:
        """The node dies: its processes are killed and its kubelet stops reporting; the node
        turns unreachable and its pods not ready. They stay as last reported until the taint
        manager evicts them (their `tolerationSeconds`, 300 s by default) and then linger
        terminating, as nobody confirms their end, until the node comes back or is removed."""
        with self.loop.pass_lock, self.store.lock:
            self.kubelet.kill_node(name)
            stamp = self.clock.stamp()
            self.store.modify(NODES, "", name, lambda node: mark_unreachable(node, stamp))
            for pod in self.store.objects(PODS)[0]:
                if (pod.get("spec") or {}).get("nodeName") == name:
                    self.store.modify(PODS, meta(pod)["namespace"], meta(pod)["name"], not_ready)

    def restore_node(self, name: str) -> None:
        """A lost node comes back Ready, without its unreachable taints."""
        with self.loop.pass_lock:
            self.kubelet.down_nodes.discard(name)
            self.store.modify(NODES, "", name, mark_reachable)

    def remove_node(self, name: str) -> None:
        """The node leaves the cluster (lost first); the pod garbage collector force-deletes
        the pods bound to it (`gcOrphaned`)."""
        self.lose_node(name)
        self.store.delete(NODES, "", name)
        for pod in self.store.objects(PODS)[0]:
            if (pod.get("spec") or {}).get("nodeName") == name:
                self.store.delete(PODS, meta(pod)["namespace"], meta(pod)["name"], grace=0)
        with self.loop.pass_lock:
            self.kubelet.down_nodes.discard(name)
        if self._auto_quota:
            self.configure_queue()

    # -- pods and workflows --------------------------------------------------------------

    def preempt(self, name: str, namespace: str | None = None, grace: int | None = None) -> None:
        """Evict a pod as Kueue's preemption does (TerminationTarget, then a graceful delete)."""
        pod = self.store.get(PODS, namespace or self.namespace, name)
        self.kueue.evict(pod, "Preempted", "Preempted by the simulator's control", grace)

    def pods(
        self, namespace: str | None = None, where: Callable[[Obj], bool] | None = None
    ) -> list[Obj]:
        """The pods (of a namespace, matching a predicate), as stored."""
        return self.store.objects(PODS, namespace or self.namespace, where)[0]

    def workflow_pods(self, workflow: str, namespace: str | None = None) -> list[Obj]:
        return self.pods(
            namespace,
            lambda p: (
                (meta(p).get("labels") or {}).get("workflows.argoproj.io/workflow") == workflow
            ),
        )

    def get(self, info: ResourceInfo, name: str, namespace: str | None = None) -> Obj | None:
        """An object as stored, None when it does not exist."""
        return self.store.find(info, namespace or self.namespace, name)

    def get_pod(self, name: str, namespace: str | None = None) -> Obj | None:
        """A pod as stored, None when it does not exist."""
        return self.get(PODS, name, namespace)

    def pod(self, name: str, namespace: str | None = None) -> Obj:
        """A pod as stored; KeyError when it does not exist."""
        found = self.get_pod(name, namespace)
        if found is None:
            raise KeyError(f"no pod {name}")
        return found

    def workflow(self, name: str, namespace: str | None = None) -> Obj | None:
        return self.get(WORKFLOWS, name, namespace)

    def node_status(
        self, workflow: str, node_name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        """The status node named `<workflow>.<node_name>` (or the root for ""), wherever the
        simulated Argo stored it (`argo/packing.py`)."""
        found = self.workflow(workflow, namespace)
        name = f"{workflow}.{node_name}" if node_name else workflow
        nodes = self.packer.hydrated_status(found or {}).get("nodes") or {}
        return nodes.get(node_id(workflow, name))

    # -- controllers and time ------------------------------------------------------------

    def pause(self, *names: str) -> None:
        """Stop controllers (argo, kueue, scheduler, kubelet, jobs, taints) after this pass."""
        with self.loop.pass_lock:
            self.loop.paused.update(names)

    def resume(self, *names: str) -> None:
        self.loop.paused.difference_update(names)
        self.store.poke()

    @contextlib.contextmanager
    def paused(self, *names: str) -> Iterator[None]:
        self.pause(*names)
        try:
            yield
        finally:
            self.resume(*names)

    def advance(self, seconds: float) -> None:
        """Move the simulated clock forward (TTLs, backoff, graces, deadlines)."""
        self.clock.advance(seconds)

    # -- waiting -------------------------------------------------------------------------

    def wait_for(
        self, condition: Callable[[], Any], timeout: float = DEADLINE_S, what: str = ""
    ) -> Any:
        """Poll `condition` until truthy and return its value; fail after `timeout` seconds."""
        return wait_for(condition, timeout=timeout, interval=0.01, what=what)

    def settle(self, timeout: float = DEADLINE_S) -> None:
        """Wait until the controllers made two passes that wrote nothing."""
        start = self.loop.quiet_passes
        self.wait_for(lambda: self.loop.quiet_passes >= start + 2, timeout, "quiet controllers")

    def wait_for_workflow(
        self, name: str, phases: Iterable[str] = DONE, timeout: float = DEADLINE_S
    ) -> Obj:
        """The workflow once its phase is one of `phases`."""
        wanted = set(phases)

        def reached() -> Obj | None:
            found = self.workflow(name)
            return found if (found or {}).get("status", {}).get("phase") in wanted else None

        return self.wait_for(reached, timeout, f"workflow {name} in {sorted(wanted)}")

    def wait_for_pod(
        self, where: Callable[[Obj], bool], timeout: float = DEADLINE_S, what: str = "a pod"
    ) -> Obj:
        """The first pod matching `where`."""
        return self.wait_for(lambda: next(iter(self.pods(None, where)), None), timeout, what)


def not_ready(pod: Obj) -> None:
    """What the node lifecycle controller marks on the pods of a lost node (MarkPodsNotReady)."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            condition["status"] = "False"


def _spec_setter(spec: dict[str, Any]) -> Callable[[Obj], None]:
    return lambda obj: obj.update(spec=spec)
