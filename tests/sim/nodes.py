"""Nodes of the simulated cluster: what a node object looks like, and a lost node.

A node reports its allocatable resources (cpu, memory, pods, ephemeral storage, GPUs as
`nvidia.com/gpu`), a Ready condition, the labels of a k3s node plus `simrun/worker=true` for
a worker (the ResourceFlavor's node label, seed 003), and `nodeInfo` as a kubelet fills it.
A lost node turns `Ready=Unknown` and gets the `node.kubernetes.io/unreachable` taints
(NoSchedule and NoExecute), as the node lifecycle controller does; a restored one is Ready
again without them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tests.sim.store import Obj

WORKER_LABEL = ("simrun/worker", "true")
UNREACHABLE = "node.kubernetes.io/unreachable"
NOT_READY = "node.kubernetes.io/not-ready"


@dataclass(frozen=True)
class NodeSpec:
    """A node to add: its allocatable resources, labels and taints."""

    name: str
    cpu: str = "4"
    memory: str = "16Gi"
    gpus: int = 0
    ephemeral_storage: str = "100Gi"
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Mapping[str, str]] = ()
    worker: bool = True

    def manifest(self) -> Obj:
        resources = {
            "cpu": self.cpu,
            "memory": self.memory,
            "pods": "110",
            "ephemeral-storage": self.ephemeral_storage,
        }
        if self.gpus:
            resources["nvidia.com/gpu"] = str(self.gpus)
        labels = {
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            **self.labels,
        }
        if self.worker:
            labels[WORKER_LABEL[0]] = WORKER_LABEL[1]
        spec = {"taints": [dict(t) for t in self.taints]} if self.taints else {}
        return {
            "metadata": {"name": self.name, "labels": labels},
            "spec": spec,
            "status": {
                "capacity": dict(resources),
                "allocatable": dict(resources),
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "kubelet is posting ready status",
                    }
                ],
                "addresses": [
                    {"type": "InternalIP", "address": "127.0.0.1"},
                    {"type": "Hostname", "address": self.name},
                ],
                "nodeInfo": {
                    "architecture": "amd64",
                    "bootID": f"boot-{self.name}",
                    "containerRuntimeVersion": "containerd://2.1.5-k3s1",
                    "kernelVersion": "6.8.0",
                    "kubeProxyVersion": "v1.35.5+k3s1",
                    "kubeletVersion": "v1.35.5+k3s1",
                    "machineID": f"machine-{self.name}",
                    "operatingSystem": "linux",
                    "osImage": "simulated",
                    "systemUUID": f"uuid-{self.name}",
                },
            },
        }


def mark_unreachable(node: Obj, stamp: str) -> None:
    """A lost node: Ready Unknown, tainted unreachable (the NoExecute taint added at `stamp`,
    from when the pods' `tolerationSeconds` count)."""
    node["status"]["conditions"] = [
        {
            "type": "Ready",
            "status": "Unknown",
            "reason": "NodeStatusUnknown",
            "message": "Kubelet stopped posting node status.",
        }
    ]
    taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t["key"] != UNREACHABLE]
    node.setdefault("spec", {})["taints"] = [
        *taints,
        {"key": UNREACHABLE, "effect": "NoSchedule"},
        {"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": stamp},
    ]


def mark_reachable(node: Obj) -> None:
    """A node back: Ready, its unreachable taints gone."""
    node["status"]["conditions"] = [
        {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
        }
    ]
    taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t["key"] != UNREACHABLE]
    node["spec"]["taints"] = taints
    if not taints:
        node["spec"].pop("taints")
