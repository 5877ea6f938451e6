"""Kueue's Workload objects for plain pods, as Kueue's pod integration makes and keeps them.

- One per managed pod (`jobframework.ConstructWorkload` with the pod's `PodSets`,
  pkg/controller/jobs/pod/pod_controller.go `constructPodSet`): named
  `pod-<pod>-<5 hex of SHA-1("Pod\\n\\n<pod>\\n<uid>")>` (`GetWorkloadNameForOwnerWithGVK`,
  jobframework/workload_names.go), in the pod's namespace, owned by the pod (controller
  reference), labelled `kueue.x-k8s.io/job-uid: <pod uid>`, with the finalizer
  `kueue.x-k8s.io/resource-in-use`; one pod set `main` of count 1 whose template is the
  pod's spec, with the topology request of its `podset-required-topology` annotation; the
  pod's queue; `priorityClassRef` and `priority` from its WorkloadPriorityClass label, else
  from its PriorityClass.
- Admission: `status.admission` (the ClusterQueue; for `main`, the flavor of each resource
  requested, the resource usage, count 1 and, with topology, the node as a one-domain
  `topologyAssignment` on `kubernetes.io/hostname`) and the conditions `QuotaReserved` and
  `Admitted`.
- Preemption: `Evicted` (reason `Preempted`) and `Preempted` (reason `InClusterQueue`), the
  reservation and admission withdrawn; the pod is then deleted.
- The pod's end: `Finished` (reason `Succeeded` or `Failed`); the finalizer goes once the
  workload finished or its pod is gone, and the workload goes with its pod (owner reference).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from tests.sim.quantities import pod_requests, render
from tests.sim.resources import WORKLOADS
from tests.sim.store import Obj, Store, meta

WORKLOAD_FINALIZER = "kueue.x-k8s.io/resource-in-use"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
POD_INDEX_LABEL = "kueue.x-k8s.io/pod-group-pod-index"
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
HOSTNAME = "kubernetes.io/hostname"
NAME_MAX = 253
HASH_LENGTH = 5


def workload_name(pod: str, uid: str) -> str:
    """The name Kueue gives the workload of a pod (`GetWorkloadNameForOwnerWithGVK`)."""
    digest = hashlib.sha1(f"Pod\n\n{pod}\n{uid}".encode()).hexdigest()[:HASH_LENGTH]
    return f"{f'pod-{pod}'[: NAME_MAX - 1 - HASH_LENGTH]}-{digest}"


def workload_of(pod: Obj, priority: Mapping[str, Any] | None, value: int) -> Obj:
    """The Workload Kueue creates for a managed pod (see the module docstring)."""
    metadata = meta(pod)
    pod_set: dict[str, Any] = {
        "name": "main",
        "count": 1,
        "template": {"spec": dict(pod.get("spec") or {})},
    }
    topology = (metadata.get("annotations") or {}).get(REQUIRED_TOPOLOGY)
    if topology:
        pod_set["topologyRequest"] = {"required": topology, "podIndexLabel": POD_INDEX_LABEL}
    spec: dict[str, Any] = {
        "podSets": [pod_set],
        "queueName": (metadata.get("labels") or {}).get(QUEUE_LABEL, ""),
        "priority": value,
        "active": True,
    }
    if priority is not None:
        spec["priorityClassRef"] = dict(priority)
    return {
        "metadata": {
            "name": workload_name(metadata["name"], metadata["uid"]),
            "namespace": metadata["namespace"],
            "labels": {JOB_UID_LABEL: metadata["uid"]},
            "finalizers": [WORKLOAD_FINALIZER],
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": metadata["name"],
                    "uid": metadata["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }


class Workloads:
    """The Workloads of the managed pods, kept by the simulated Kueue (see the docstring)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def find(self, pod: Obj) -> Obj | None:
        metadata = meta(pod)
        return self.store.find(
            WORKLOADS, metadata["namespace"], workload_name(metadata["name"], metadata["uid"])
        )

    def ensure(self, pod: Obj, priority: Mapping[str, Any] | None, value: int) -> None:
        """Create the workload of a managed pod that has none."""
        if self.find(pod) is None and not meta(pod).get("deletionTimestamp"):
            self.store.create(WORKLOADS, meta(pod)["namespace"], workload_of(pod, priority, value))

    def _change(self, pod: Obj, change: Any) -> None:
        metadata = meta(pod)
        name = workload_name(metadata["name"], metadata["uid"])
        self.store.modify(WORKLOADS, metadata["namespace"], name, change)

    def admitted(self, pod: Obj, cluster_queue: str, flavor: str | None, node: str | None) -> None:
        """Quota reserved and admitted in `cluster_queue`, on `node` with topology."""
        usage = {name: render(q) for name, q in pod_requests(pod).items() if q > 0}
        assignment: dict[str, Any] = {
            "name": "main",
            "flavors": {name: flavor for name in usage} if flavor else {},
            "resourceUsage": usage,
            "count": 1,
        }
        if node is not None:
            assignment["topologyAssignment"] = {
                "levels": [HOSTNAME],
                "slices": [
                    {
                        "domainCount": 1,
                        "valuesPerLevel": [{"universalValue": node}],
                        "universalPodCount": 1,
                    }
                ],
            }
        now = self.store.clock.stamp()

        def admit(workload: Obj) -> None:
            status = workload.setdefault("status", {})
            status["admission"] = {"clusterQueue": cluster_queue, "podSetAssignments": [assignment]}
            _condition(
                status, "QuotaReserved", True, "QuotaReserved",
                f"Quota reserved in ClusterQueue {cluster_queue}", now,
            )  # fmt: skip
            _condition(status, "Admitted", True, "Admitted", "The workload is admitted", now)

        self._change(pod, admit)

    def evicted(self, pod: Obj, message: str) -> None:
        """Preempted in its ClusterQueue: evicted, its reservation withdrawn."""
        now = self.store.clock.stamp()

        def evict(workload: Obj) -> None:
            status = workload.setdefault("status", {})
            _condition(status, "Evicted", True, "Preempted", message, now)
            _condition(status, "Preempted", True, "InClusterQueue", message, now)
            _condition(status, "QuotaReserved", False, "Pending", message, now)
            _condition(
                status, "Admitted", False, "NoReservation", "The workload has no reservation", now
            )
            status.pop("admission", None)

        self._change(pod, evict)

    def step(self, pods: list[Obj]) -> None:
        """Finish the workloads of ended pods; release those finished or whose pod went."""
        now = self.store.clock.stamp()
        live = {meta(p)["uid"]: p for p in pods}
        for pod in pods:
            phase = (pod.get("status") or {}).get("phase")
            workload = self.find(pod)
            ended = phase in ("Succeeded", "Failed")
            if ended and workload is not None and not _has(workload, "Finished"):
                reason = "Succeeded" if phase == "Succeeded" else "Failed"
                text = "Job finished successfully" if phase == "Succeeded" else "Job failed"
                self._change(
                    pod,
                    lambda w, r=reason, t=text: _condition(
                        w.setdefault("status", {}), "Finished", True, r, t, now
                    ),
                )
        for workload in self.store.objects(WORKLOADS)[0]:
            owner = (meta(workload).get("labels") or {}).get(JOB_UID_LABEL)
            owned = live.get(owner or "")
            gone = owned is None or bool(meta(owned).get("deletionTimestamp"))
            if WORKLOAD_FINALIZER in (meta(workload).get("finalizers") or []) and (
                gone or _has(workload, "Finished")
            ):
                self.store.modify(
                    WORKLOADS, meta(workload)["namespace"], meta(workload)["name"], _release
                )


def _has(workload: Obj, kind: str) -> bool:
    conditions = (workload.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def _condition(
    status: dict[str, Any], kind: str, true: bool, reason: str, message: str, now: str
) -> None:
    """Set a condition (`metav1.Condition`); its time changes only with its status."""
    conditions = status.setdefault("conditions", [])
    value = "True" if true else "False"
    for condition in conditions:
        if condition.get("type") == kind:
            if condition.get("status") != value:
                condition["lastTransitionTime"] = now
            condition.update(status=value, reason=reason, message=message)
            return
    conditions.append(
        {
            "type": kind,
            "status": value,
            "reason": reason,
            "message": message,
            "lastTransitionTime": now,
            "observedGeneration": 1,
        }
    )


def _release(workload: Obj) -> None:
    finalizers = [f for f in meta(workload).get("finalizers") or [] if f != WORKLOAD_FINALIZER]
    if finalizers:
        meta(workload)["finalizers"] = finalizers
    else:
        meta(workload).pop("finalizers", None)
