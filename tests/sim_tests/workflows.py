"""Driving a workflow through the simulated Argo in tests: submit it, wait for its nodes,
find their pods."""

from __future__ import annotations

from typing import Any

from tests.sim import SimCluster
from tests.sim.fixtures import KubeApis

GROUP = ("argoproj.io", "v1alpha1")


def submit(kube: KubeApis, body: dict[str, Any]) -> None:
    kube.custom.create_namespaced_custom_object(*GROUP, kube.namespace, "workflows", body)


def wait_node(cluster: SimCluster, wf: str, name: str, *phases: str) -> dict[str, Any]:
    """The status node `<wf>.<name>` once in one of `phases` (any phase when none given)."""

    def reached() -> dict[str, Any] | None:
        found = cluster.node_status(wf, name)
        return found if found and (not phases or found["phase"] in phases) else None

    return cluster.wait_for(reached, what=f"node {name} in {phases}")


def pod_of(cluster: SimCluster, wf: str, name: str) -> dict[str, Any]:
    """The pod of the node `<wf>.<name>`."""
    return cluster.wait_for_pod(
        lambda p: (
            p["metadata"]["annotations"].get("workflows.argoproj.io/node-name") == f"{wf}.{name}"
        ),
        what=f"the pod of {name}",
    )


def main_env(pod: dict[str, Any]) -> dict[str, str]:
    (main,) = [c for c in pod["spec"]["containers"] if c["name"] == "main"]
    return {e["name"]: e.get("value", "") for e in main.get("env") or []}
