"""Nodes and pods as the planner and the servers page see them (B3, B11, B12, K5).

- `pod_requests`: what a pod requests as the scheduler counts it (`PodRequests` of
  k8s.io/component-helpers/resource): its containers together, or an init container alone when
  it asks for more (init containers run one at a time before the containers; a sidecar, an
  init container with `restartPolicy: Always`, counts with the containers and with the init
  containers after it), plus the pod's overhead.
- `node_from`: a worker node (label `simrun/worker=true`) that pods may use: schedulable and
  without a taint that keeps pods off (NoSchedule, NoExecute), a reservation of simrun aside.
  Its capacity for the planner is its allocatable resources less Argo's wait container (every
  pod of a run has one beside its main container) less what the pods on it that belong to no
  run request, rounded down to whole cores and GiB, so a pod sized for it fits beside them.
  Its scratch is its allocatable ephemeral storage less the same requests, in whole GiB (0
  when the node reports none: the scheduler then admits no pod that asks for scratch).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from kubernetes.utils.quantity import parse_quantity

from runs.plans import Node

WORKER_LABEL = "simrun/worker"
RESERVED_KEY = "simrun/reserved"
GPU = "nvidia.com/gpu"
EPHEMERAL = "ephemeral-storage"
GIB = Decimal(1024**3)
KEEP_OFF = frozenset({"NoSchedule", "NoExecute"})
ENDED = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class Requests:
    """Cores, GiB, GPUs and GiB of ephemeral storage (scratch)."""

    cores: float = 0.0
    memory_gb: float = 0.0
    gpus: int = 0
    scratch_gb: float = 0.0

    def __add__(self, other: Requests) -> Requests:
        return Requests(
            self.cores + other.cores,
            self.memory_gb + other.memory_gb,
            self.gpus + other.gpus,
            self.scratch_gb + other.scratch_gb,
        )


def _amounts(values: Mapping[str, Any] | None) -> dict[str, Decimal]:
    return {k: Decimal(parse_quantity(v)) for k, v in (values or {}).items()}


def _container(container: Mapping[str, Any]) -> dict[str, Decimal]:
    """A container's requests; a limit without a request counts as its request."""
    resources = container.get("resources") or {}
    return _amounts({**(resources.get("limits") or {}), **(resources.get("requests") or {})})


def _add(a: Mapping[str, Decimal], b: Mapping[str, Decimal]) -> dict[str, Decimal]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, Decimal(0)) + v
    return out


def _max(a: Mapping[str, Decimal], b: Mapping[str, Decimal]) -> dict[str, Decimal]:
    out = dict(a)
    for k, v in b.items():
        out[k] = max(out.get(k, Decimal(0)), v)
    return out


def _requests(amounts: Mapping[str, Decimal]) -> Requests:
    return Requests(
        cores=float(amounts.get("cpu", Decimal(0))),
        memory_gb=float(amounts.get("memory", Decimal(0)) / GIB),
        gpus=int(amounts.get(GPU, Decimal(0))),
        scratch_gb=float(amounts.get(EPHEMERAL, Decimal(0)) / GIB),
    )


def pod_requests(pod: Mapping[str, Any]) -> Requests:
    """B11: a pod's request as the scheduler counts it (see the module docstring)."""
    spec = pod.get("spec") or {}
    total: dict[str, Decimal] = {}
    for container in spec.get("containers") or []:
        total = _add(total, _container(container))
    sidecars: dict[str, Decimal] = {}
    init_peak: dict[str, Decimal] = {}
    for container in spec.get("initContainers") or []:
        own = _container(container)
        if container.get("restartPolicy") == "Always":
            sidecars = _add(sidecars, own)
            total = _add(total, own)
            init_peak = _max(init_peak, sidecars)
        else:
            init_peak = _max(init_peak, _add(own, sidecars))
    return _requests(_add(_max(total, init_peak), _amounts(spec.get("overhead"))))


def reservation_of(node: Mapping[str, Any]) -> str | None:
    """The run a node is reserved for (its label), None."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    return labels.get(RESERVED_KEY) or None


def usable(node: Mapping[str, Any]) -> bool:
    """Whether runs' pods may go to a node: a schedulable worker without a keep-off taint."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    spec = node.get("spec") or {}
    if labels.get(WORKER_LABEL) != "true" or spec.get("unschedulable"):
        return False
    for taint in spec.get("taints") or []:
        if taint.get("effect") in KEEP_OFF and taint.get("key") != RESERVED_KEY:
            return False
    return True


def node_from(node: Mapping[str, Any], used: Requests, executor: Requests) -> Node | None:
    """B3: the planner's node of a Kubernetes node, None when runs' pods cannot use it.

    `used`: what the live pods on it that belong to no run request; `executor`: Argo's wait
    container of every pod of a run.
    """
    if not usable(node):
        return None
    allocatable = _requests(_amounts((node.get("status") or {}).get("allocatable")))
    cores = allocatable.cores - executor.cores - used.cores
    memory = allocatable.memory_gb - executor.memory_gb - used.memory_gb
    scratch = allocatable.scratch_gb - executor.scratch_gb - used.scratch_gb
    return Node(
        name=(node.get("metadata") or {})["name"],
        cores=float(max(0, math.floor(cores + 1e-9))),
        memory_gb=float(max(0, math.floor(memory + 1e-9))),
        gpus=max(0, allocatable.gpus - used.gpus),
        reserved_by=reservation_of(node),
        scratch_gb=float(max(0, math.floor(scratch + 1e-9))),
    )


def live(pod: Mapping[str, Any]) -> bool:
    """A pod that holds its node's resources: bound and not ended."""
    phase = (pod.get("status") or {}).get("phase")
    return bool((pod.get("spec") or {}).get("nodeName")) and phase not in ENDED


def used_by_others(pods: Iterable[Mapping[str, Any]], run_label: str) -> dict[str, Requests]:
    """What the live pods of no run request, per node."""
    used: dict[str, Requests] = {}
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if not live(pod) or run_label in labels:
            continue
        node = pod["spec"]["nodeName"]
        used[node] = used.get(node, Requests()) + pod_requests(pod)
    return used
