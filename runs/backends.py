"""The backend of these settings, one per process."""

from __future__ import annotations

from functools import cache

from django.conf import settings

from runs.ports import Backend
from runs.store import local_package_rules


@cache
def backend() -> Backend:
    """The local backend (embedded default) or the Argo backend, as SIMRUN_BACKEND says."""
    if settings.SIMRUN_BACKEND == "local":
        from cluster.local.backend import LocalBackend
        from runs.priorities import value_of

        return LocalBackend(
            settings.SIMRUN_STORE,
            cores=settings.SIMRUN_LOCAL_CORES or None,
            memory_gb=settings.SIMRUN_LOCAL_MEMORY_GB or None,
            priority_value=value_of,
            poll_s=min(0.25, settings.SIMRUN_POLL_S),
            standby=settings.SIMRUN_LOCAL_STANDBY,
            standby_idle_s=settings.SIMRUN_LOCAL_STANDBY_IDLE_S,
            local_packages=local_package_rules(),
        )
    from cluster.argo.backend import ArgoBackend
    from cluster.argo.config import ClusterConfig

    return ArgoBackend(
        ClusterConfig(
            namespace=settings.SIMRUN_NAMESPACE,
            queue=settings.SIMRUN_QUEUE,
            store_claim=settings.SIMRUN_STORE_CLAIM,
            pod_store=settings.SIMRUN_POD_STORE,
            scratch_path=settings.SIMRUN_SCRATCH_PATH,
            service_account=settings.SIMRUN_WORKFLOW_SERVICE_ACCOUNT,
            registry=settings.SIMRUN_REGISTRY,
            registry_url=settings.SIMRUN_REGISTRY_URL,
            default_image=settings.SIMRUN_DEFAULT_IMAGE,
            build_base_image=settings.SIMRUN_BUILD_BASE_IMAGE,
            buildkit_addr=settings.SIMRUN_BUILDKIT_ADDR,
            buildctl_image=settings.SIMRUN_BUILDCTL_IMAGE,
            build_timeout_s=settings.SIMRUN_BUILD_TIMEOUT_S,
            workflow_ttl_s=settings.SIMRUN_WORKFLOW_TTL_S,
            executor_cores=settings.SIMRUN_EXECUTOR_CORES,
            executor_memory_gb=settings.SIMRUN_EXECUTOR_MEMORY_GB,
            kubeconfig=settings.SIMRUN_KUBECONFIG,
            watch_timeout_s=settings.SIMRUN_WATCH_TIMEOUT_S,
            nodes_limit_bytes=settings.SIMRUN_ARGO_NODES_LIMIT_MB * 1024 * 1024,
            argo_server_url=settings.SIMRUN_ARGO_SERVER_URL,
            argo_server_token_file=settings.SIMRUN_ARGO_SERVER_TOKEN_FILE,
            argo_server_ca_file=settings.SIMRUN_ARGO_SERVER_CA_FILE,
            argo_server_insecure=settings.SIMRUN_ARGO_SERVER_INSECURE,
            local_packages=local_package_rules(),
        )
    )
