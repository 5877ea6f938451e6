"""Argo's executor containers (init, wait) as the deploy configures them (K5)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.sim import ExecutorConfig, SimCluster
from tests.sim.argo.templates import ARGO_CONFIGMAP
from tests.sim.fixtures import KubeApis
from tests.sim.resources import WORKFLOWS
from tests.sim_tests.manifests import task, workflow
from tests.sim_tests.workflows import pod_of, submit


def _executor_resources(pod: dict[str, Any]) -> list[Any]:
    spec = pod["spec"]
    return [c["resources"] for c in [*spec["initContainers"], spec["containers"][0]]]


def test_the_executor_containers_have_the_resources_of_the_deploys_config_map(
    kube: KubeApis, sim_cluster: SimCluster
) -> None:
    """init and wait request and limit what deploy/cluster's workflow-controller-configmap
    says, as Argo's controller reads its `executor`.

    The cluster side of K5 (docs/behaviours.md), as the simulator reproduces it.
    """
    configmap = yaml.safe_load(ARGO_CONFIGMAP.read_text())
    configured = yaml.safe_load(configmap["data"]["executor"])["resources"]
    submit(kube, workflow("wf", [task("w0")]))
    assert _executor_resources(pod_of(sim_cluster, "wf", "w0")) == [configured, configured]


def test_a_cluster_of_another_config_map_gives_its_executor_resources(tmp_path: Path) -> None:
    """The executor's resources are read from the config map, not built in (the cluster side
    of K5, as the simulator reproduces it)."""
    resources = {"requests": {"cpu": "50m", "memory": "300Mi"}}
    resources["limits"] = dict(resources["requests"])
    configmap = yaml.safe_load(ARGO_CONFIGMAP.read_text())
    configmap["data"]["executor"] = yaml.safe_dump({"resources": resources})
    path = tmp_path / "controller-config.yaml"
    path.write_text(yaml.safe_dump(configmap))
    executor = ExecutorConfig.from_configmap(path)
    with SimCluster(1, workdir=tmp_path / "sim", executor=executor) as cluster:
        cluster.store.create(WORKFLOWS, cluster.namespace, workflow("wf", [task("w0")]))
        assert _executor_resources(pod_of(cluster, "wf", "w0")) == [resources, resources]
