"""The default scheduler and the taint manager.

The scheduler binds each pending pod that has no node, no scheduling gate and no deletion
to a node that is Ready and schedulable, whose labels satisfy the pod's `nodeSelector`,
whose `NoSchedule`/`NoExecute` taints the pod tolerates (`ToleratesTaint` of
k8s.io/api/core/v1/toleration.go) and whose allocatable resources hold the pod beside the
pods already bound there that have not ended (`pod_requests`: init, wait and main containers
as the scheduler counts them; seed 000 B11, seed 003 K5). Among fitting nodes it takes the
least allocated. A pod that fits nowhere gets `PodScheduled=False, reason Unschedulable`
and a message like `0/3 nodes are available: 2 Insufficient cpu, 1 node(s) didn't match
Pod's node affinity/selector.`; a gated pod gets `reason SchedulingGated`.

The taint manager deletes (with the pod's grace) every pod bound to a node with a
`NoExecute` taint the pod does not tolerate: the reservation taint of seed 003 K4 evicts the
pods of other runs. A pod that tolerates every such taint, some only for `tolerationSeconds`,
is deleted once the shortest of those has passed since the taint's `timeAdded` on the
simulator's clock (`getMinTolerationTime` of the taint eviction controller): a lost node's
pods go 300 s after it became unreachable (the default tolerations of `tests.sim.admission`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from tests.sim.clock import parse_timestamp
from tests.sim.events import record_event
from tests.sim.quantities import Amounts, amounts, pod_requests, short_of, subtract, total
from tests.sim.resources import NODES, PODS
from tests.sim.selectors import matches_node_selector
from tests.sim.store import Obj, Store, meta

ENDED = frozenset({"Succeeded", "Failed"})


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Whether one toleration tolerates one taint."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    key = toleration.get("key", "")
    operator = toleration.get("operator") or "Equal"
    if not key:
        return operator == "Exists"
    if key != taint.get("key"):
        return False
    return operator == "Exists" or toleration.get("value", "") == taint.get("value", "")


def untolerated(node: Obj, pod: Obj, effects: Iterable[str]) -> list[dict[str, Any]]:
    """The taints of `node` with one of `effects` that `pod` does not tolerate."""
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    wanted = set(effects)
    return [
        taint
        for taint in (node.get("spec") or {}).get("taints") or []
        if taint.get("effect") in wanted and not any(tolerates(t, taint) for t in tolerations)
    ]


def node_ready(node: Obj) -> bool:
    """Whether the node's Ready condition is True."""
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def pod_active(pod: Obj) -> bool:
    """A pod that holds its node's resources: not Succeeded or Failed (deleting ones count)."""
    return (pod.get("status") or {}).get("phase") not in ENDED


def used_on(node_name: str, pods: Iterable[Obj]) -> Amounts:
    """What the active pods bound to a node request."""
    return total(
        pod_requests(p)
        for p in pods
        if (p.get("spec") or {}).get("nodeName") == node_name and pod_active(p)
    )


def free_on(node: Obj, pods: Iterable[Obj]) -> Amounts:
    """A node's allocatable resources less the requests of its active pods."""
    allocatable = amounts((node.get("status") or {}).get("allocatable"))
    return subtract(allocatable, used_on(meta(node)["name"], pods))


def why_not(pod: Obj, node: Obj, free: Amounts) -> str | None:
    """Why `pod` cannot go to `node`, `free` left there (a scheduler message fragment)."""
    spec = pod.get("spec") or {}
    labels = meta(node).get("labels") or {}
    if not node_ready(node):
        return "node(s) were not ready"
    if (node.get("spec") or {}).get("unschedulable"):
        return "node(s) were unschedulable"
    if not matches_node_selector(spec.get("nodeSelector"), labels):
        return "node(s) didn't match Pod's node affinity/selector"
    taints = untolerated(node, pod, ("NoSchedule", "NoExecute"))
    if taints:
        taint = taints[0]
        return f"node(s) had untolerated taint {{{taint['key']}: {taint.get('value', '')}}}"
    lacking = short_of(pod_requests(pod), free)
    if lacking:
        return f"Insufficient {lacking[0]}"
    return None


def _set_condition(pod: Obj, condition: dict[str, Any]) -> None:
    conditions = [
        c for c in pod["status"].get("conditions") or [] if c.get("type") != condition["type"]
    ]
    pod["status"]["conditions"] = [*conditions, condition]


class Scheduler:
    """kube-scheduler: binds pods to nodes."""

    name = "scheduler"

    def __init__(self, store: Store) -> None:
        self.store = store

    def step(self) -> None:
        """Bind every pod that can be bound now, higher priority first."""
        pods = self.store.objects(PODS)[0]
        nodes = self.store.objects(NODES)[0]
        waiting = [
            p
            for p in pods
            if not (p.get("spec") or {}).get("nodeName")
            and pod_active(p)
            and not meta(p).get("deletionTimestamp")
        ]
        waiting.sort(
            key=lambda p: (
                -(p["spec"].get("priority") or 0),
                meta(p)["creationTimestamp"],
                meta(p)["name"],
            )
        )
        free = {meta(n)["name"]: free_on(n, pods) for n in nodes}
        for pod in waiting:
            if pod["spec"].get("schedulingGates"):
                self._condition(
                    pod,
                    "SchedulingGated",
                    "Scheduling is blocked due to non-empty scheduling gates",
                )
                continue
            reasons: Counter[str] = Counter()
            best: tuple[Decimal, str] | None = None
            for node in nodes:
                name = meta(node)["name"]
                reason = why_not(pod, node, free[name])
                if reason:
                    reasons[reason] += 1
                    continue
                cpu = free[name].get("cpu", Decimal(0))
                if best is None or (-cpu, name) < (-best[0], best[1]):
                    best = (cpu, name)
            if best is None:
                detail = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
                self._condition(
                    pod, "Unschedulable", f"0/{len(nodes)} nodes are available: {detail}."
                )
                continue
            if self._bind(pod, best[1]):
                free[best[1]] = subtract(free[best[1]], pod_requests(pod))

    def _condition(self, pod: Obj, reason: str, message: str) -> None:
        current = {c.get("type"): c for c in (pod.get("status") or {}).get("conditions") or []}
        scheduled = current.get("PodScheduled") or {}
        if scheduled.get("reason") == reason and scheduled.get("message") == message:
            return
        stamp = self.store.clock.stamp()
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": reason,
            "message": message,
            "lastTransitionTime": stamp,
        }
        self.store.modify(
            PODS, meta(pod)["namespace"], meta(pod)["name"], lambda o: _set_condition(o, condition)
        )
        if reason == "Unschedulable":
            record_event(
                self.store, pod, "FailedScheduling", message, "Warning", "default-scheduler"
            )

    def _bind(self, pod: Obj, node_name: str) -> bool:
        stamp = self.store.clock.stamp()

        def bind(o: Obj) -> None:
            o["spec"]["nodeName"] = node_name
            _set_condition(
                o, {"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp}
            )

        bound = self.store.modify(PODS, meta(pod)["namespace"], meta(pod)["name"], bind)
        if bound is None:
            return False
        record_event(
            self.store,
            bound,
            "Scheduled",
            f"Successfully assigned {meta(pod)['namespace']}/{meta(pod)['name']} to {node_name}",
            component="default-scheduler",
        )
        return True


def eviction_time(node: Obj, pod: Obj) -> float | None:
    """When the taint manager evicts `pod` from `node`: at once (0) for an untolerated
    NoExecute taint, else the taints' `timeAdded` plus the shortest `tolerationSeconds` of
    the tolerations that match them; None while it tolerates them for ever."""
    taints = [
        t for t in (node.get("spec") or {}).get("taints") or [] if t.get("effect") == "NoExecute"
    ]
    if not taints:
        return None
    if untolerated(node, pod, ("NoExecute",)):
        return 0.0
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    used = [t for t in tolerations if any(tolerates(t, taint) for taint in taints)]
    seconds = [
        max(0, int(t["tolerationSeconds"])) for t in used if t.get("tolerationSeconds") is not None
    ]
    if not seconds:
        return None
    added = [parse_timestamp(t["timeAdded"]) for t in taints if t.get("timeAdded")]
    return (min(added) if added else 0.0) + min(seconds)


class TaintManager:
    """The node lifecycle controller's NoExecute eviction."""

    name = "taints"

    def __init__(self, store: Store) -> None:
        self.store = store

    def step(self) -> None:
        """Delete the pods on a node with a NoExecute taint they do not tolerate (any more)."""
        nodes = {meta(n)["name"]: n for n in self.store.objects(NODES)[0]}
        now = self.store.clock.time()
        for pod in self.store.objects(PODS)[0]:
            node = nodes.get((pod.get("spec") or {}).get("nodeName") or "")
            if node is None or not pod_active(pod) or meta(pod).get("deletionTimestamp"):
                continue
            evict_at = eviction_time(node, pod)
            if evict_at is not None and now >= evict_at:
                name = f"{meta(pod)['namespace']}/{meta(pod)['name']}"
                record_event(
                    self.store,
                    pod,
                    "TaintManagerEviction",
                    f"Marking for deletion Pod {name}",
                    component="taint-eviction-controller",
                )
                self.store.delete(PODS, meta(pod)["namespace"], meta(pod)["name"])
