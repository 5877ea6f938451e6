"""Fixtures of the Argo backend's tests: a simulated cluster with a store, the backend on it.

`lab` runs a test on the simulator and, marked `cluster`, on a real cluster when
SIMRUN_KUBECONFIG names one (skipped otherwise, the only skip of the suite). Every simulated
cluster checks at its end that its controllers raised nothing and that the backend made no API
call beyond those of tests/deploy/argo_api_calls.txt (what the service's RBAC allows).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_django import Settings

from cluster.argo.backend import ArgoBackend
from tests.cluster.argo.lab import (
    Lab,
    allowed_calls,
    calls_made,
    real_config,
    real_store,
    sim_config,
    start_sim,
)


def sim_lab_of(
    tmp_path: Path, store: Path, sim_options: dict[str, Any] | None = None, **config: Any
) -> Iterator[Lab]:
    """A lab on a new simulated cluster (`sim_options` of SimCluster), checked at its end."""
    sim = start_sim(tmp_path, store, **(sim_options or {}))
    cluster_config = sim_config(sim, **config)
    lab = Lab(ArgoBackend(cluster_config, sim.api_client()), cluster_config, store, sim)
    try:
        yield lab
    finally:
        lab.close()
        sim.stop()
    assert sim.errors == [], "the simulator's controllers raised"
    assert calls_made(sim) <= allowed_calls(), "a call tests/deploy/argo_api_calls.txt lacks"


@pytest.fixture
def sim_lab(tmp_path: Path, store: Path) -> Iterator[Lab]:
    """The simulated cluster (3 nodes of 4 cores, 16 GiB) and the backend on it."""
    yield from sim_lab_of(tmp_path, store)


@pytest.fixture(params=["sim", pytest.param("real", marks=pytest.mark.cluster)])
def lab(
    request: pytest.FixtureRequest, tmp_path: Path, store: Path, settings: Settings
) -> Iterator[Lab]:
    """The simulator, then a real cluster when SIMRUN_KUBECONFIG is set."""
    if request.param == "sim":
        yield from sim_lab_of(tmp_path, store)
        return
    if not os.environ.get("SIMRUN_KUBECONFIG"):
        pytest.skip("needs a real cluster: set SIMRUN_KUBECONFIG (docs/argo-backend.md)")
    config = real_config()
    settings.SIMRUN_STORE = real_store()
    the_lab = Lab(ArgoBackend(config), config, real_store())
    yield the_lab
    the_lab.close()


@pytest.fixture
def argo_settings(lab: Lab, settings: Settings) -> Iterator[Callable[[], ArgoBackend]]:
    """The service's settings pointed at the lab (SIMRUN_BACKEND=argo); returns the backend
    `runs.backends.backend()` builds from them."""
    from runs.backends import backend

    config = lab.config
    settings.SIMRUN_BACKEND = "argo"
    settings.SIMRUN_STORE = lab.store
    values = {
        "SIMRUN_KUBECONFIG": config.kubeconfig,
        "SIMRUN_NAMESPACE": config.namespace,
        "SIMRUN_QUEUE": config.queue,
        "SIMRUN_STORE_CLAIM": config.store_claim,
        "SIMRUN_POD_STORE": config.pod_store,
        "SIMRUN_SCRATCH_PATH": config.scratch_path,
        "SIMRUN_WORKFLOW_SERVICE_ACCOUNT": config.service_account,
        "SIMRUN_REGISTRY": config.registry,
        "SIMRUN_REGISTRY_URL": config.registry_url,
        "SIMRUN_DEFAULT_IMAGE": config.default_image,
        "SIMRUN_WORKFLOW_TTL_S": config.workflow_ttl_s,
        "SIMRUN_WATCH_TIMEOUT_S": config.watch_timeout_s,
        "SIMRUN_GRACE_S": 1,
        "SIMRUN_MERGE_MARKER_GRACE_S": 5.0,
    }
    for name, value in values.items():
        setattr(settings, name, value)
    backend.cache_clear()

    def made() -> ArgoBackend:
        found = backend()
        assert isinstance(found, ArgoBackend)
        return found

    yield made
    made().close()
    backend.cache_clear()
