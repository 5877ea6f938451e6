"""A simulated Kubernetes cluster (API server, Argo, Kueue, scheduler, kubelet, BuildKit).

Tests and benchmarks start a `SimCluster`, point the real `kubernetes` client at its
kubeconfig, and drive it through the controls of the cluster object. What is simulated and
where each behaviour comes from: docs/simulator.md.
"""

from tests.sim.argo.packing import NodeStatusStorage
from tests.sim.argo.templates import ExecutorConfig, node_id, pod_name
from tests.sim.cluster import NodeSpec, SimCluster
from tests.sim.registry import Build, BuildKit, Registry
from tests.sim.routes import AccessRecord

__all__ = [
    "AccessRecord",
    "Build",
    "BuildKit",
    "ExecutorConfig",
    "NodeSpec",
    "NodeStatusStorage",
    "Registry",
    "SimCluster",
    "node_id",
    "pod_name",
]
