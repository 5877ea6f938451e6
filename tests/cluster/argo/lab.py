"""The cluster a test drives: the simulator (always), or a real cluster (SIMRUN_KUBECONFIG).

A `Lab` holds the backend under test, its configuration and the run store as the service
sees it, and the few controls the scenarios need that work on both: finding a run's pod,
preempting it as Kueue does (a graceful delete), waiting for a finished workflow's time to
live. What only the simulator can do (pausing controllers, moving the clock) the tests ask of
`lab.sim` directly and are not run against a real cluster.

A real cluster (the k3d overlay of deploy/k3d) is described by the environment:
SIMRUN_KUBECONFIG, SIMRUN_CLUSTER_STORE (the host directory of the store, default
/tmp/simrun-k3d-store), SIMRUN_DEFAULT_IMAGE (an image with the harness and the example
plugin), SIMRUN_REGISTRY and SIMRUN_REGISTRY_URL.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster.argo.backend import ArgoBackend
from cluster.argo.config import ClusterConfig
from cluster.argo.listing import read_workflow
from runs.priorities import classes
from tests.deploy.api_rights import calls_from_access_log, read_calls
from tests.sim import SimCluster
from tests.sim.argo.operation import RECENTLY_STARTED_S
from tests.waiting import wait_for

API_CALLS = Path(__file__).resolve().parents[2] / "deploy" / "argo_api_calls.txt"
PRIORITIES = {c.name: c.value for c in classes()}
SIM_IMAGE = "simrun-test:latest"
REAL_TTL_S = 10


@dataclass
class Lab:
    """A cluster under test with the Argo backend on it (see the module docstring)."""

    backend: ArgoBackend
    config: ClusterConfig
    store: Path
    sim: SimCluster | None = None
    made: list[ArgoBackend] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)

    @property
    def namespace(self) -> str:
        return self.config.namespace

    @property
    def workers(self) -> list[str]:
        """The worker nodes, by name (node-1, node-2, node-3 on the simulator)."""
        return sorted(n.name for n in self.backend.nodes())

    def new_backend(self) -> ArgoBackend:
        """Another backend on the same cluster (a restarted service)."""
        api = self.sim.api_client() if self.sim is not None else None
        backend = ArgoBackend(self.config, api)
        self.made.append(backend)
        return backend

    def workflow(self, name: str) -> dict[str, Any] | None:
        if self.sim is not None:
            return self.sim.workflow(name)
        try:
            return read_workflow(self.backend.custom, self.namespace, name)
        except KeyError:
            return None

    def pods(self, selector: str) -> list[dict[str, Any]]:
        """The pods of the namespace matching a label selector (`k=v,k2=v2`)."""
        wanted = dict(term.split("=", 1) for term in selector.split(","))
        if self.sim is not None:
            found = self.sim.pods(self.namespace)
        else:
            reply = self.backend.core.list_namespaced_pod(
                self.namespace, label_selector=selector, _preload_content=False
            )
            found = json.loads(reply.data)["items"]
        return [
            p
            for p in found
            if all((p["metadata"].get("labels") or {}).get(k) == v for k, v in wanted.items())
        ]

    def pod(self, workflow: str, pod: str) -> dict[str, Any] | None:
        """The current pod of a run's pod (`<task>-w1` ...): the one that has not ended, else
        the newest; None when it has none."""
        found = self.pods(f"workflows.argoproj.io/workflow={workflow},simrun/pod={pod}")

        def order(p: dict[str, Any]) -> tuple[bool, str]:
            ended = (p.get("status") or {}).get("phase") in ("Succeeded", "Failed")
            return (not ended, p["metadata"]["creationTimestamp"])

        found.sort(key=order)
        return found[-1] if found else None

    def past_argo_grace(self) -> None:
        """On the simulator, move its clock past Argo's grace for a pod missing soon after its
        node started (RECENTLY_STARTED_S, within which Argo makes the pod again as the same
        attempt): the pods running now count as deleted once gone, as pods that ran a while
        do on a real cluster."""
        if self.sim is not None:
            self.sim.advance(RECENTLY_STARTED_S)

    def preempt(self, workflow: str, pod: str) -> None:
        """Evict the current attempt of a pod as Kueue does: a delete with the pod's grace.

        On the simulator its clock first moves past Argo's grace (`past_argo_grace`).
        """
        found = self.pod(workflow, pod)
        assert found is not None, f"{pod} has no pod"
        if self.sim is not None:
            self.past_argo_grace()
            self.sim.preempt(found["metadata"]["name"], self.namespace)
        else:
            self.backend.core.delete_namespaced_pod(found["metadata"]["name"], self.namespace)

    def block(self, node: str, priority: str) -> None:
        """A pod of no run, as large as a pod planned for `node`, that Kueue admits there as
        soon as it fits (before any pod of a lower priority) and that runs until the test
        ends."""
        cores = next(str(n.cores) for n in self.backend.nodes() if n.name == node)
        body = {
            "metadata": {
                "name": f"blocker-{node}",
                "labels": {
                    "kueue.x-k8s.io/queue-name": self.config.queue,
                    "kueue.x-k8s.io/priority-class": priority,
                },
                "annotations": {
                    "kueue.x-k8s.io/podset-required-topology": "kubernetes.io/hostname"
                },
            },
            "spec": {
                "restartPolicy": "Never",
                "priorityClassName": priority,
                "nodeSelector": {"kubernetes.io/hostname": node},
                "containers": [
                    {
                        "name": "main",
                        "image": self.config.default_image,
                        "command": [sys.executable, "-c", "import time; time.sleep(600)"],
                        "resources": {
                            "requests": {"cpu": cores, "memory": "256Mi"},
                            "limits": {"cpu": cores, "memory": "256Mi"},
                        },
                    }
                ],
            },
        }
        if self.sim is not None:
            from tests.sim.resources import PODS

            self.sim.store.create(PODS, self.namespace, body)
        else:
            body["spec"]["containers"][0]["command"] = ["sleep", "600"]
            self.backend.core.create_namespaced_pod(self.namespace, body)
            self.blockers.append(body["metadata"]["name"])

    def expire(self, workflow: str) -> None:
        """Let a finished workflow's time to live pass; returns once it is deleted."""
        if self.sim is not None:
            self.sim.advance(self.config.workflow_ttl_s + 1)
        wait_for(
            lambda: self.workflow(workflow) is None, timeout=REAL_TTL_S * 6, what="TTL deletion"
        )

    def node(self, name: str) -> dict[str, Any]:
        if self.sim is not None:
            from tests.sim.resources import NODES

            found = self.sim.get(NODES, name, "")
            assert found is not None
            return found
        return json.loads(self.backend.core.read_node(name, _preload_content=False).data)

    def close(self) -> None:
        for name in self.blockers:
            self.backend.core.delete_namespaced_pod(name, self.namespace)
        for backend in [self.backend, *self.made]:
            backend.close()


def sim_config(sim: SimCluster, **overrides: Any) -> ClusterConfig:
    values: dict[str, Any] = {
        "namespace": sim.namespace,
        "pod_store": "/mnt/simrun-store",
        "scratch_path": "/scratch",
        "default_image": SIM_IMAGE,
        "registry": sim.registry.host if sim.registry else "registry.invalid:5000",
        "build_timeout_s": 20.0,
        "workflow_ttl_s": 3600,
        "watch_timeout_s": 5,
        "kubeconfig": str(sim.kubeconfig),
    }
    values.update(overrides)
    return ClusterConfig(**values)


def start_sim(workdir: Path, store: Path, nodes: int = 3, **options: Any) -> SimCluster:
    """A running simulated cluster whose pods mount `store` and a scratch directory;
    `options` of SimCluster (e.g. `node_status`)."""
    scratch = workdir / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    (store / "snapshots").mkdir(parents=True, exist_ok=True)
    sim = SimCluster(
        nodes,
        workdir=workdir / "sim",
        volume_dirs={"simrun-store": store, "scratch": scratch},
        priority_classes=PRIORITIES,
        memory_poll_s=0.05,
        **options,
    )
    return sim.start()


def real_config() -> ClusterConfig:
    """The real cluster of the environment (see the module docstring)."""
    return ClusterConfig(
        namespace=os.environ.get("SIMRUN_NAMESPACE", "simrun"),
        default_image=os.environ.get("SIMRUN_DEFAULT_IMAGE", ""),
        registry=os.environ.get("SIMRUN_REGISTRY", "k3d-simrun-registry:5000"),
        registry_url=os.environ.get("SIMRUN_REGISTRY_URL", "http://127.0.0.1:5050"),
        workflow_ttl_s=REAL_TTL_S,
        watch_timeout_s=10,
        build_timeout_s=600.0,
        kubeconfig=os.environ["SIMRUN_KUBECONFIG"],
    )


def real_store() -> Path:
    return Path(os.environ.get("SIMRUN_CLUSTER_STORE", "/tmp/simrun-k3d-store"))


def allowed_calls() -> set[tuple[str, str, str]]:
    """The API calls tests/deploy/argo_api_calls.txt lists (verb, resource, namespace)."""
    return {(c.verb, c.resource, c.namespace) for c in read_calls(API_CALLS)}


def calls_made(sim: SimCluster) -> set[tuple[str, str, str]]:
    return {(c.verb, c.resource, c.namespace) for c in calls_from_access_log(sim.access_log)}
