"""The simulated Argo Workflows controller: operate workflows, label them, delete by TTL.

Each tick runs one `Operation` per unfinished workflow and writes its status (and the labels
`workflows.argoproj.io/phase` and `/completed`) only when it changed. A finished workflow's
pods of finished nodes are labelled `completed: "true"` (the pod cleanup queue of
workflow/controller/pod/cleanup.go), and the workflow is deleted once its `ttlStrategy`
(`secondsAfterFailure`, `secondsAfterSuccess`, else `secondsAfterCompletion`; `ttl` in
workflow/gccontroller/gc_controller.go) has passed on the simulator's clock; its pods go
with it through their owner reference. A large workflow's nodes are stored compressed or
offloaded, and read back, as Argo's hydrator does (`packing.py`).

Not simulated (a workflow using them fails with a `simulator:` message or ignores them):
steps, script, resource, suspend and HTTP templates, `depends`, `when`, exit handlers and
hooks, synchronization, memoization, `podGC`, artifacts and output parameters, the
10-second grace (`RECENTLY_STARTED_POD_DURATION`) before a missing pod is taken as deleted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from tests.sim.argo.nodes import fulfilled
from tests.sim.argo.operation import Operation
from tests.sim.argo.packing import NodeStatusPacker
from tests.sim.argo.templates import (
    COMPLETED_LABEL,
    NODE_ID,
    PHASE_LABEL,
    WORKFLOW_LABEL,
    ExecutorConfig,
)
from tests.sim.clock import parse_timestamp
from tests.sim.resources import PODS, WORKFLOWS
from tests.sim.store import Obj, Store, meta

DONE = frozenset({"Succeeded", "Failed", "Error"})


def ttl_seconds(workflow: Obj) -> float | None:
    """The time to live of a finished workflow, None without one."""
    strategy = (workflow.get("spec") or {}).get("ttlStrategy") or {}
    phase = (workflow.get("status") or {}).get("phase")
    if phase in ("Failed", "Error") and strategy.get("secondsAfterFailure") is not None:
        return float(strategy["secondsAfterFailure"])
    if phase == "Succeeded" and strategy.get("secondsAfterSuccess") is not None:
        return float(strategy["secondsAfterSuccess"])
    if phase in DONE and strategy.get("secondsAfterCompletion") is not None:
        return float(strategy["secondsAfterCompletion"])
    return None


class ArgoController:
    """Argo's workflow controller, one tick at a time."""

    name = "argo"

    def __init__(
        self,
        store: Store,
        terminate: Callable[[Obj], None],
        executor: ExecutorConfig | None = None,
        packer: NodeStatusPacker | None = None,
    ) -> None:
        self.store = store
        self.terminate = terminate
        self.executor = executor or ExecutorConfig.from_configmap()
        self.packer = packer or NodeStatusPacker()

    def _pods(self) -> dict[tuple[str, str], dict[str, Obj]]:
        """Pods of workflows by (namespace, workflow), then by node id."""
        by_workflow: dict[tuple[str, str], dict[str, Obj]] = defaultdict(dict)
        for pod in self.store.objects(PODS)[0]:
            labels, annotations = meta(pod).get("labels") or {}, meta(pod).get("annotations") or {}
            if WORKFLOW_LABEL in labels and NODE_ID in annotations:
                key = (meta(pod)["namespace"], labels[WORKFLOW_LABEL])
                by_workflow[key][annotations[NODE_ID]] = pod
        return by_workflow

    def step(self) -> None:
        """Operate every workflow once."""
        pods = self._pods()
        for workflow in self.store.objects(WORKFLOWS)[0]:
            m = meta(workflow)
            if m.get("deletionTimestamp"):
                continue
            own = pods.get((m["namespace"], m["name"]), {})
            hydrated = self.packer.hydrated(workflow)  # as Argo's operator does first
            if (workflow.get("status") or {}).get("phase") in DONE:
                self._finished(hydrated, own)
                continue
            operation = Operation(hydrated, dict(own), self.store, self.executor, self.terminate)
            operation.run()
            if operation.status != hydrated.get("status"):
                self._write(workflow, operation.status)

    def _write(self, workflow: Obj, new_status: dict[str, Any]) -> None:
        """Write the status, its nodes dehydrated (`packing.py`): compressed or offloaded when
        the workflow is large; marked Error when it stays too large (`persistUpdates`)."""

        def apply(obj: Obj) -> None:
            obj["status"] = new_status  # the operation's own copy
            error = self.packer.dehydrate(obj)
            if error:
                obj["status"].update(phase="Error", message=error)
                obj["status"].setdefault("finishedAt", self.store.clock.stamp())
            labels = meta(obj).setdefault("labels", {})
            labels[PHASE_LABEL] = obj["status"].get("phase", "Running")
            if obj["status"].get("phase") in DONE:
                labels[COMPLETED_LABEL] = "true"

        self.store.modify(WORKFLOWS, meta(workflow)["namespace"], meta(workflow)["name"], apply)

    def _finished(self, workflow: Obj, pods: dict[str, Obj]) -> None:
        nodes = (workflow.get("status") or {}).get("nodes") or {}
        for node_id, pod in pods.items():
            labels = meta(pod).get("labels") or {}
            if labels.get(COMPLETED_LABEL) == "false" and fulfilled(nodes.get(node_id)):
                self.store.modify(
                    PODS,
                    meta(pod)["namespace"],
                    meta(pod)["name"],
                    lambda o: meta(o)["labels"].update({COMPLETED_LABEL: "true"}),
                )
        ttl = ttl_seconds(workflow)
        finished = (workflow.get("status") or {}).get("finishedAt")
        if (
            ttl is not None
            and finished
            and self.store.clock.time() >= parse_timestamp(finished) + ttl
        ):
            self.store.delete(WORKFLOWS, meta(workflow)["namespace"], meta(workflow)["name"])
