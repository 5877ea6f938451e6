"""pytest fixtures of the simulated cluster.

Use them from a conftest.py of a suite: `from tests.sim.fixtures import kube, sim_cluster`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client

from tests.sim.cluster import SimCluster


@dataclass(frozen=True)
class KubeApis:
    """The real `kubernetes` client's APIs, configured for a simulated cluster."""

    api_client: client.ApiClient
    core: client.CoreV1Api
    batch: client.BatchV1Api
    custom: client.CustomObjectsApi
    namespace: str


@pytest.fixture
def sim_cluster(tmp_path: Path) -> Iterator[SimCluster]:
    """A running 3-node simulated cluster; the test fails if a simulated controller raised."""
    with SimCluster(3, workdir=tmp_path / "sim") as cluster:
        yield cluster
        assert cluster.errors == [], "the simulator's controllers raised"


@pytest.fixture
def kube(sim_cluster: SimCluster) -> Iterator[KubeApis]:
    """Clients of the `sim_cluster` built from its kubeconfig."""
    api = sim_cluster.api_client()
    yield KubeApis(
        api,
        client.CoreV1Api(api),
        client.BatchV1Api(api),
        client.CustomObjectsApi(api),
        sim_cluster.namespace,
    )
    api.close()
