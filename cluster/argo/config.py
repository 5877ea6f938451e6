"""What the Argo backend knows about its cluster: one frozen value, built from settings.

No Django here: `runs/backends.py` reads the settings and passes their values in, so the
backend and its tests can build a `ClusterConfig` from plain values.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cluster.argo.node_status import NODES_LIMIT_BYTES
from runs.local_packages import LocalPackageRules

SERVICE_ENVIRONMENT = "service"
"""The environment of a model without a pyproject.toml: the cluster's default image."""
GRACE_MARGIN_S = 30
"""M9: a pod's termination grace is the harness's grace plus this, for the executor."""
RETRY_LIMIT = 100
"""M8, K8: retries of a pod; every eviction counts, so it only bounds other failures."""


@dataclass(frozen=True)
class ClusterConfig:
    """The cluster of the Argo backend (the SIMRUN_* settings of docs/argo-backend.md)."""

    namespace: str = "simrun"
    queue: str = "simrun"
    """The Kueue LocalQueue every pod names (`kueue.x-k8s.io/queue-name`)."""
    store_claim: str = "simrun-store"
    """The PersistentVolumeClaim of the run store, mounted by every pod."""
    pod_store: str = "/mnt/simrun-store"
    """Where pods mount the run store (the harness's paths start here)."""
    scratch_path: str = "/scratch"
    """The directory on each node's disk for scratch (a hostPath), and its mount path."""
    service_account: str = "simrun-workflow"
    """The account of the workflow pods (Argo's wait container reports with it)."""
    registry: str = "registry.cluster.internal:5000"
    """The registry of the environments' images, as the nodes and BuildKit name it."""
    registry_url: str = ""
    """The registry's HTTP API as the service reaches it; empty: http://<registry>."""
    registry_secret: str = "simrun-registry-auth"
    """The optional Secret (a .dockerconfigjson) with the registry's credentials."""
    environment_repository: str = "simrun-environments"
    """The repository of the environments' images; an environment digest is its tag."""
    default_image: str = ""
    """The image of a run whose model has no pyproject.toml (it carries the harness)."""
    build_base_image: str = ""
    """The base of environment images (uv, Python, the harness's wheels); empty: default."""
    buildkit_addr: str = "tcp://buildkitd:1234"
    buildctl_image: str = "moby/buildkit:v0.29.0"
    build_timeout_s: float = 1800.0
    workflow_ttl_s: int = 86400
    """M12: seconds a finished workflow (and its pods and logs) is kept."""
    executor_cores: float = 0.1
    executor_memory_gb: float = 0.25
    """K5: what Argo's wait container requests (= limits) in every pod of a run."""
    kubeconfig: str = ""
    """A kubeconfig file; empty: the pod's service account (in the cluster)."""
    watch_timeout_s: int = 60
    """B8: how long one watch request lasts before the thread renews it."""
    shutdown_wait_s: float = 30.0
    """K10: how long a stop waits for Argo to fail the pending nodes before it leaves their
    gated pods (Argo stops them if Kueue ever admits them)."""
    nodes_limit_bytes: int = NODES_LIMIT_BYTES
    """The most JSON a workflow's `status.compressedNodes` may decompress to (node_status.py)."""
    argo_server_url: str = ""
    """The Argo server (`https://argo-server.<namespace>:2746`), to read the node status Argo
    offloaded to its database (argo_server.py); empty: such a run keeps its state and says so."""
    argo_server_token_file: str = ""
    """The bearer token for the Argo server; empty: the pod's service account token."""
    argo_server_ca_file: str = ""
    """The CA of the Argo server's certificate; empty: the system's CAs."""
    argo_server_insecure: bool = False
    """Skip the check of the Argo server's certificate (Argo's default self-signed one)."""
    local_packages: LocalPackageRules = field(default_factory=LocalPackageRules)
    """Where a model's local packages packed into its image's build may lie besides its
    snapshot, and how large each may be (SIMRUN_LOCAL_PACKAGE_ROOTS)."""

    @property
    def registry_api(self) -> str:
        """The base URL of the registry's HTTP API, without a trailing slash."""
        return (self.registry_url or f"http://{self.registry}").rstrip("/")

    @property
    def base_image(self) -> str:
        """The image environment images are built on."""
        return self.build_base_image or self.default_image
