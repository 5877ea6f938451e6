"""Simulated Kueue for plain pods: gates, quota, topology, priority and preemption.

- Webhook (`pkg/controller/jobs/pod/pod_webhook.go`): a pod created with the label
  `kueue.x-k8s.io/queue-name` is labelled `kueue.x-k8s.io/managed: "true"`, gets the
  finalizer `kueue.x-k8s.io/managed` and is gated with `kueue.x-k8s.io/admission` (plus
  `kueue.x-k8s.io/topology` when it carries a `kueue.x-k8s.io/podset-required-topology`
  annotation), so it stays Pending (seed 003 K1).
- The pod controller (`KueuePods`, controller name `kueue-pods`; pod_controller.go `Load`,
  `Finalize`): removes the finalizer from a managed pod once it is being deleted
  (`deletionTimestamp`) or has ended (its workload finished). Until then a deleted pod
  lingers with its final status after its containers stopped. It runs apart from the
  admission (`kueue`), as Kueue's pod reconciler runs apart from its scheduler.
- Admission: the gated pods of a LocalQueue's ClusterQueue, highest priority first (the
  WorkloadPriorityClass of `kueue.x-k8s.io/priority-class`, else the pod's priority), then
  oldest first (BestEffortFIFO: one that does not fit does not block the others), are admitted
  when their requests fit the ClusterQueue's `nominalQuota` beside the admitted pods that have
  not ended. With the topology annotation the pod must also fit one node (the flavor's node
  labels, the pod's node selector, tolerated taints, allocatable less every active pod there),
  taken best-fit (the fullest that fits). Admission removes the gates and adds the flavor's
  `nodeLabels` and, with topology, `kubernetes.io/hostname: <node>` to the node selector
  (`prepare` of pod_controller.go, `topology_ungater.go`; seed 003 K4).
- Preemption (`withinClusterQueue: LowerPriority`): a pod that does not fit evicts admitted
  pods of lower priority, lowest priority and most recently admitted first, until it fits a
  node and the quota; eviction sets the pod condition `TerminationTarget` (reason
  `WorkloadEvictedDueToPreempted`) and deletes the pod with its grace (`Stop` of
  pod_controller.go; seed 003 K2). While victims terminate the preemptor waits.

- Workloads (`tests/sim/workloads.py`): one per managed pod, as Kueue's pod integration
  creates it, its status kept through admission, preemption and the pod's end.

Not simulated: cohorts and borrowing, several flavors, admission checks.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from tests.sim.events import record_event
from tests.sim.quantities import Amounts, amounts, fits, pod_requests, subtract, total
from tests.sim.resources import (
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    NODES,
    PODS,
    RESOURCE_FLAVORS,
    WORKLOAD_PRIORITY_CLASSES,
    ResourceInfo,
)
from tests.sim.scheduling import node_ready, pod_active, untolerated
from tests.sim.selectors import matches_node_selector
from tests.sim.store import Obj, Store, meta
from tests.sim.workloads import Workloads

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
MANAGED_LABEL = "kueue.x-k8s.io/managed"
FINALIZER = "kueue.x-k8s.io/managed"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
HOSTNAME = "kubernetes.io/hostname"


def webhook(info: ResourceInfo, pod: Obj) -> None:
    """Kueue's mutating webhook for pods: label and gate the pods of a queue."""
    if info is not PODS or QUEUE_LABEL not in (meta(pod).get("labels") or {}):
        return
    meta(pod)["labels"][MANAGED_LABEL] = "true"
    finalizers = meta(pod).setdefault("finalizers", [])
    if FINALIZER not in finalizers:
        finalizers.append(FINALIZER)
    gates = pod.setdefault("spec", {}).setdefault("schedulingGates", [])
    wanted = [ADMISSION_GATE]
    if REQUIRED_TOPOLOGY in (meta(pod).get("annotations") or {}):
        wanted.append(TOPOLOGY_GATE)
    gates.extend({"name": g} for g in wanted if {"name": g} not in gates)


def is_gated(pod: Obj) -> bool:
    """Whether Kueue has yet to admit the pod."""
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return any(g.get("name") == ADMISSION_GATE for g in gates)


class KueuePods:
    """Kueue's pod controller: the `managed` finalizer goes once a pod is deleted or ended."""

    name = "kueue-pods"

    def __init__(self, store: Store) -> None:
        self.store = store

    def step(self) -> None:
        """Finalize the managed pods that are being deleted or have ended."""
        for pod in self.store.objects(PODS)[0]:
            if FINALIZER not in (meta(pod).get("finalizers") or []):
                continue
            ended = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
            if meta(pod).get("deletionTimestamp") or ended:
                self.store.modify(PODS, meta(pod)["namespace"], meta(pod)["name"], _finalize)


def _finalize(pod: Obj) -> None:
    finalizers = [f for f in meta(pod).get("finalizers") or [] if f != FINALIZER]
    if finalizers:
        meta(pod)["finalizers"] = finalizers
    else:
        meta(pod).pop("finalizers", None)


class Kueue:
    """Kueue's controllers for plain pods (see the module docstring)."""

    name = "kueue"

    def __init__(self, store: Store) -> None:
        self.store = store
        self.admitted_at: dict[str, float] = {}
        self.workloads = Workloads(store)

    # -- configuration -------------------------------------------------------------------

    def _priority(self, pod: Obj) -> int:
        return self._priority_class(pod)[1]

    def _priority_class(self, pod: Obj) -> tuple[dict[str, str] | None, int]:
        """The class a pod's workload refers to and its priority: the WorkloadPriorityClass
        of its label, else its PriorityClass."""
        name = (meta(pod).get("labels") or {}).get(PRIORITY_LABEL)
        if name:
            found = self.store.find(WORKLOAD_PRIORITY_CLASSES, "", name)
            if found is not None:
                ref = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": name}
                return ref, int(found.get("value", 0))
        spec = pod.get("spec") or {}
        value = int(spec.get("priority") or 0)
        if spec.get("priorityClassName"):
            ref = {
                "group": "scheduling.k8s.io",
                "kind": "PriorityClass",
                "name": spec["priorityClassName"],
            }
            return ref, value
        return None, value

    def _queue_of(self, pod: Obj) -> Obj | None:
        local = self.store.find(
            LOCAL_QUEUES,
            meta(pod)["namespace"],
            (meta(pod).get("labels") or {}).get(QUEUE_LABEL, ""),
        )
        if local is None:
            return None
        return self.store.find(
            CLUSTER_QUEUES, "", (local.get("spec") or {}).get("clusterQueue", "")
        )

    @staticmethod
    def _quota(queue: Obj) -> tuple[Amounts, str | None]:
        quota: Amounts = {}
        flavor = None
        for group in (queue.get("spec") or {}).get("resourceGroups") or []:
            for entry in group.get("flavors") or []:
                flavor = flavor or entry.get("name")
                for resource in entry.get("resources") or []:
                    quota[resource["name"]] = (
                        quota.get(resource["name"], Decimal(0))
                        + (amounts({"q": resource.get("nominalQuota", 0)})["q"])
                    )
        return quota, flavor

    # -- the tick ------------------------------------------------------------------------

    def step(self) -> None:
        """Admit what fits, preempt for what does not."""
        pods = self.store.objects(PODS)[0]
        managed = [p for p in pods if (meta(p).get("labels") or {}).get(MANAGED_LABEL) == "true"]
        for pod in managed:
            self.workloads.ensure(pod, *self._priority_class(pod))
            if not is_gated(pod):
                self.admitted_at.setdefault(meta(pod)["uid"], self.store.clock.time())
        waiting = [p for p in managed if is_gated(p) and not meta(p).get("deletionTimestamp")]
        waiting.sort(
            key=lambda p: (-self._priority(p), meta(p)["creationTimestamp"], meta(p)["name"])
        )
        for pod in waiting:
            queue = self._queue_of(pod)
            if queue is not None and self._try(pod, queue, pods):
                pods = self.store.objects(PODS)[0]
        self.workloads.step(
            [p for p in pods if (meta(p).get("labels") or {}).get(MANAGED_LABEL) == "true"]
        )

    def _admitted(self, queue: Obj, pods: list[Obj]) -> list[Obj]:
        name = meta(queue)["name"]
        return [
            p
            for p in pods
            if (meta(p).get("labels") or {}).get(MANAGED_LABEL) == "true"
            and not is_gated(p)
            and pod_active(p)
            and self._queue_name(p) == name
        ]

    def _queue_name(self, pod: Obj) -> str | None:
        queue = self._queue_of(pod)
        return meta(queue)["name"] if queue else None

    def _nodes(self, pod: Obj, flavor: Obj | None) -> list[Obj]:
        """Nodes the pod could use, capacity aside."""
        labels = ((flavor or {}).get("spec") or {}).get("nodeLabels") or {}
        selector = (pod.get("spec") or {}).get("nodeSelector") or {}
        return [
            n
            for n in self.store.objects(NODES)[0]
            if node_ready(n)
            and not (n.get("spec") or {}).get("unschedulable")
            and matches_node_selector({**labels, **selector}, meta(n).get("labels") or {})
            and not untolerated(n, pod, ("NoSchedule", "NoExecute"))
        ]

    @staticmethod
    def _on_node(node: str, pods: list[Obj]) -> list[Obj]:
        return [
            p
            for p in pods
            if pod_active(p)
            and (
                (p.get("spec") or {}).get("nodeName") == node
                or (
                    not (p.get("spec") or {}).get("nodeName")
                    and ((p.get("spec") or {}).get("nodeSelector") or {}).get(HOSTNAME) == node
                    and not is_gated(p)
                )
            )
        ]

    def _node_free(self, node: Obj, pods: list[Obj], gone: list[Obj]) -> Amounts:
        """A node's free resources if the pods `gone` were gone (admitted, unbound included)."""
        uids = {meta(p)["uid"] for p in gone}
        present = [p for p in self._on_node(meta(node)["name"], pods) if meta(p)["uid"] not in uids]
        allocatable = amounts((node.get("status") or {}).get("allocatable"))
        return subtract(allocatable, total(pod_requests(p) for p in present))

    def _try(self, pod: Obj, queue: Obj, pods: list[Obj]) -> bool:
        """Admit `pod`, or evict for it; True when something was written."""
        quota, flavor_name = self._quota(queue)
        flavor = self.store.find(RESOURCE_FLAVORS, "", flavor_name) if flavor_name else None
        need = pod_requests(pod)
        if any(v > 0 and name not in quota for name, v in need.items()):
            return False  # a resource the ClusterQueue does not cover: inadmissible
        admitted = self._admitted(queue, pods)
        topology = REQUIRED_TOPOLOGY in (meta(pod).get("annotations") or {})
        nodes = self._nodes(pod, flavor) if topology else [None]

        def placement(gone: list[Obj]) -> Obj | bool | None:
            uids = {meta(p)["uid"] for p in gone}
            used = total(pod_requests(p) for p in admitted if meta(p)["uid"] not in uids)
            if not fits(need, subtract(quota, used)):
                return False
            if not topology:
                return None
            fitting = [(self._node_free(n, pods, gone), n) for n in nodes if n is not None]
            fitting = [(free, n) for free, n in fitting if fits(need, free)]
            if not fitting:
                return False
            return min(fitting, key=lambda f: (f[0].get("cpu", Decimal(0)), meta(f[1])["name"]))[1]

        place = placement([])
        if place is not False:
            node = place if isinstance(place, dict) else None
            self._admit(pod, flavor, node)
            self.workloads.admitted(
                pod, meta(queue)["name"], flavor_name, meta(node)["name"] if node else None
            )
            return True
        terminating = [p for p in admitted if meta(p).get("deletionTimestamp")]
        if terminating and placement(terminating) is not False:
            return False  # victims are on their way out: wait for them
        victims = self._victims(pod, admitted, terminating, placement)
        for victim in victims:
            self.evict(
                victim,
                "Preempted",
                f"Preempted to accommodate a workload (UID: {meta(pod)['uid']}) due to "
                "prioritization in the ClusterQueue",
            )
        return bool(victims)

    def _victims(
        self, pod: Obj, admitted: list[Obj], terminating: list[Obj], placement: Any
    ) -> list[Obj]:
        """The fewest lower-priority pods whose eviction makes room, lowest first."""
        priority = self._priority(pod)
        leaving = {meta(p)["uid"] for p in terminating}
        candidates = [
            p for p in admitted if meta(p)["uid"] not in leaving and self._priority(p) < priority
        ]
        candidates.sort(key=lambda p: (self._priority(p), -self.admitted_at.get(meta(p)["uid"], 0)))
        chosen: list[Obj] = []
        for candidate in candidates:
            chosen.append(candidate)
            if placement(terminating + chosen) is not False:
                # drop victims that turned out unnecessary (e.g. on another node)
                for extra in list(chosen):
                    trial = [c for c in chosen if c is not extra]
                    if placement(terminating + trial) is not False:
                        chosen = trial
                return chosen
        return []

    def _admit(self, pod: Obj, flavor: Obj | None, node: Obj | None) -> None:
        labels = ((flavor or {}).get("spec") or {}).get("nodeLabels") or {}

        def ungate(o: Obj) -> None:
            spec = o["spec"]
            gates = [
                g
                for g in spec.get("schedulingGates") or []
                if g.get("name") not in (ADMISSION_GATE, TOPOLOGY_GATE)
            ]
            if gates:
                spec["schedulingGates"] = gates
            else:
                spec.pop("schedulingGates", None)
            selector = {**(spec.get("nodeSelector") or {}), **labels}
            if node is not None:
                selector[HOSTNAME] = meta(node)["name"]
            if selector:
                spec["nodeSelector"] = selector

        admitted = self.store.modify(PODS, meta(pod)["namespace"], meta(pod)["name"], ungate)
        if admitted is not None:
            self.admitted_at[meta(pod)["uid"]] = self.store.clock.time()
            message = "Admitted by clusterQueue"
            record_event(self.store, admitted, "Started", message, component="kueue-admission")

    def evict(self, pod: Obj, reason: str, message: str, grace: int | None = None) -> None:
        """Stop a pod as Kueue does: mark it `TerminationTarget`, then delete it."""
        condition = {
            "type": "TerminationTarget",
            "status": "True",
            "reason": f"WorkloadEvictedDueTo{reason}",
            "message": message,
            "lastTransitionTime": self.store.clock.stamp(),
        }

        def mark(o: Obj) -> None:
            conditions = [
                c
                for c in o["status"].get("conditions") or []
                if c.get("type") != "TerminationTarget"
            ]
            o["status"]["conditions"] = [*conditions, condition]

        namespace, name = meta(pod)["namespace"], meta(pod)["name"]
        marked = self.store.modify(PODS, namespace, name, mark)
        if marked is None:
            return
        record_event(self.store, marked, reason, message, component="kueue-admission")
        self.workloads.evicted(marked, message)
        self.store.delete(PODS, namespace, name, grace=grace)


def queue_objects(
    nominal: dict[str, str], node_labels: dict[str, str], namespace: str, name: str = "simrun"
) -> list[tuple[ResourceInfo, Obj]]:
    """A ResourceFlavor, ClusterQueue and LocalQueue as the deploy manifests declare them."""
    flavor = {
        "metadata": {"name": name},
        "spec": {"nodeLabels": node_labels, "topologyName": "hostname"},
    }
    cluster_queue = {
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "preemption": {"withinClusterQueue": "LowerPriority"},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [
                {
                    "coveredResources": list(nominal),
                    "flavors": [
                        {
                            "name": name,
                            "resources": [
                                {"name": r, "nominalQuota": q} for r, q in nominal.items()
                            ],
                        }
                    ],
                }
            ],
        },
    }
    local_queue = {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": name},
    }
    return [
        (RESOURCE_FLAVORS, flavor),
        (CLUSTER_QUEUES, cluster_queue),
        (LOCAL_QUEUES, local_queue),
    ]


def used_quota(pods: list[Obj]) -> dict[str, Any]:
    """What admitted, active pods request in total (for tests that check the quota)."""
    return dict(total(pod_requests(p) for p in pods if pod_active(p) and not is_gated(p)))
