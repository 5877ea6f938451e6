"""One pass of the simulated Argo controller over one workflow (`operate` in operator.go).

1. Pod reconciliation: every unfulfilled Pod node reads its pod; a node that was seen
   running whose pod is gone becomes `Error` with `pod deleted` and no exit code, once
   RECENTLY_STARTED_S passed since the node started (Argo's grace for its informer to catch
   up, `RECENTLY_STARTED_POD_DURATION`: until then it only requeues); a Pending node without
   a pod is left for step 2 to create again, as the same attempt (seed 003 K3).
   Under `shutdown`, pods still Pending or Running get their containers terminated and their
   nodes fail with `workflow shutdown with strategy:  <S>` (`applyExecutionControl`).
2. The entrypoint DAG: tasks run when their `dependencies` succeeded, or failed/errored with
   `continueOn`; otherwise they are Omitted. `withSequence`/`withItems` make a TaskGroup of
   `<task>(<i>:<item>)` children with `{{item}}` substituted. A template with a
   `retryStrategy` makes a Retry node whose attempts are its children `<node>(<n>)`.
3. The DAG's phase (`assessDAGPhase`): Running while any node is, Failed at once under
   shutdown, else the first failed leaf task without `continueOn` for its phase.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from tests.sim import status
from tests.sim.argo import retries
from tests.sim.argo.nodes import FAILED, assess, fulfilled
from tests.sim.argo.templates import ExecutorConfig, build_pod, display_name, node_id, pod_name
from tests.sim.argo.templates import substitute as substitute_tags
from tests.sim.clock import parse_timestamp
from tests.sim.resources import PODS
from tests.sim.store import Obj, Store, meta

RECENTLY_STARTED_S = 10.0
"""Argo's `RECENTLY_STARTED_POD_DURATION` (10 s): a pod missing sooner after its node started
is not yet taken as deleted (operator.go `recentlyStarted`)."""


class Operation:
    """The state of one pass: a copy of the workflow, its pods, the store to create pods in."""

    def __init__(
        self,
        workflow: Obj,
        pods: dict[str, Obj],
        store: Store,
        executor: ExecutorConfig,
        terminate: Callable[[Obj], None],
    ) -> None:
        self.wf = copy.deepcopy(workflow)
        self.pods = pods
        self.store = store
        self.executor = executor
        self.terminate = terminate
        self.name = meta(self.wf)["name"]
        self.spec = self.wf.get("spec") or {}
        self.status = self.wf.setdefault("status", {})
        self.nodes: dict[str, dict[str, Any]] = self.status.setdefault("nodes", {})
        self.shutdown: str | None = self.spec.get("shutdown") or None
        self.templates = {t["name"]: t for t in self.spec.get("templates") or []}
        self.now = store.clock.stamp()
        self.scope = {
            "workflow.name": self.name,
            "workflow.namespace": meta(self.wf).get("namespace", ""),
            "workflow.uid": meta(self.wf).get("uid", ""),
            **{
                f"workflow.parameters.{p['name']}": str(p.get("value", ""))
                for p in (self.spec.get("arguments") or {}).get("parameters") or []
            },
        }

    # -- nodes ---------------------------------------------------------------------------

    def node(self, name: str) -> dict[str, Any] | None:
        return self.nodes.get(node_id(self.name, name))

    def init_node(
        self,
        name: str,
        kind: str,
        boundary: str,
        phase: str,
        template: str,
        message: str = "",
        retried: bool = False,
        inputs: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A new node of `status.nodes` (`initializeNode`); an executable one keeps its inputs."""
        boundary_name = self.nodes[boundary]["name"] if boundary in self.nodes else None
        node: dict[str, Any] = {
            "id": node_id(self.name, name),
            "name": name,
            "type": kind,
            "phase": phase,
            "displayName": display_name(name, boundary_name),
            "startedAt": self.now,
        }
        if template:
            node["templateName"] = template
        if boundary:
            node["boundaryID"] = boundary
        if retried:
            node["nodeFlag"] = {"retried": True}
        if message:
            node["message"] = message
        if inputs:
            node["inputs"] = inputs
        if fulfilled(node):
            node["finishedAt"] = self.now
        self.nodes[node["id"]] = node
        return node

    def mark(self, node: dict[str, Any], phase: str, message: str | None = None) -> None:
        node["phase"] = phase
        if message is not None:
            if message:
                node["message"] = message
            else:
                node.pop("message", None)
        if fulfilled(node) and not node.get("finishedAt"):
            node["finishedAt"] = self.now

    def add_child(self, parent: dict[str, Any], child_name: str) -> None:
        child = node_id(self.name, child_name)
        if child not in parent.setdefault("children", []):
            parent["children"].append(child)

    def outbound(self, node: dict[str, Any]) -> list[str]:
        """The nodes a dependent task hangs below (`getOutboundNodes`)."""
        children = [self.nodes[c] for c in node.get("children") or [] if c in self.nodes]
        if node["type"] == "Retry" and children:
            return self.outbound(children[-1])
        if node["type"] == "TaskGroup" and children:
            return [o for child in children for o in self.outbound(child)]
        if node["type"] == "DAG":
            return list(node.get("outboundNodes") or [node["id"]])
        return [node["id"]]

    # -- the pass ------------------------------------------------------------------------

    def run(self) -> None:
        """Reconcile pods, execute the entrypoint, settle the workflow's phase."""
        if not self.status.get("phase"):
            self.status.update(phase="Running", startedAt=self.now)
        self.reconcile_pods()
        entry = self.spec.get("entrypoint", "")
        if entry not in self.templates:
            self.fail_workflow("Error", f"spec.entrypoint: template {entry!r} not found")
            return
        root = self.execute_template(self.name, entry, self.spec.get("arguments") or {}, "")
        if root is not None and fulfilled(root):
            message = root.get("message", "")
            if self.shutdown and root["phase"] in FAILED:
                message = f"Stopped with strategy '{self.shutdown}'"
            self.fail_workflow(root["phase"], message)

    def fail_workflow(self, phase: str, message: str) -> None:
        """Settle the workflow (Succeeded too, despite the name)."""
        self.status.update(phase=phase, finishedAt=self.now)
        if message:
            self.status["message"] = message

    def reconcile_pods(self) -> None:
        for node in list(self.nodes.values()):
            if node["type"] != "Pod" or fulfilled(node):
                continue
            pod = self.pods.get(node["id"])
            if pod is None:
                if node["phase"] != "Pending" and not self.recently_started(node):
                    self.mark(node, "Error", "pod deleted")
                continue
            assess(node, pod, self.now)
            phase = (pod.get("status") or {}).get("phase")
            if self.shutdown and phase in ("Pending", "Running") and not fulfilled(node):
                self.terminate(pod)
                self.mark(node, "Failed", f"workflow shutdown with strategy:  {self.shutdown}")

    def recently_started(self, node: dict[str, Any]) -> bool:
        """Whether the node started at most RECENTLY_STARTED_S ago on the simulated clock."""
        started = node.get("startedAt")
        if not started:
            return False
        return self.store.clock.time() - parse_timestamp(started) <= RECENTLY_STARTED_S

    def execute_template(
        self, name: str, template_name: str, arguments: dict[str, Any], boundary: str
    ) -> dict[str, Any] | None:
        template = self.templates.get(template_name)
        if template is None:
            node = self.node(name) or self.init_node(name, "Skipped", boundary, "Error", "")
            self.mark(node, "Error", f"templates.{template_name} not found")
            return node
        scope = dict(self.scope)
        given = {p["name"]: p.get("value") for p in arguments.get("parameters") or []}
        resolved = []
        for parameter in (template.get("inputs") or {}).get("parameters") or []:
            value = given.get(parameter["name"], parameter.get("value", parameter.get("default")))
            if value is None:
                node = self.node(name) or self.init_node(name, "Skipped", boundary, "Error", "")
                self.mark(node, "Error", f"inputs.parameters.{parameter['name']} was not supplied")
                return node
            scope[f"inputs.parameters.{parameter['name']}"] = str(value)
            resolved.append({**parameter, "value": str(value)})
        if resolved:  # what `ProcessArgs` records: the inputs with their values
            template = {**template, "inputs": {**template["inputs"], "parameters": resolved}}
        if "dag" in template:
            return self.execute_dag(name, template, scope, boundary)
        if "container" not in template:
            node = self.node(name) or self.init_node(name, "Skipped", boundary, "Error", "")
            self.mark(
                node,
                "Error",
                f"simulator: template {template_name!r} is not a DAG or a container template",
            )
            return node
        if template.get("retryStrategy"):
            return retries.execute(self, name, template, scope, boundary)
        scope["pod.name"] = pod_name(self.name, name, template_name)
        return self.run_pod_node(name, substitute_tags(template, scope), boundary)

    def run_pod_node(
        self, name: str, template: dict[str, Any], boundary: str, retried: bool = False
    ) -> dict[str, Any]:
        """Create the node of a pod, and its pod while the node waits for one."""
        node = self.node(name) or self.init_node(
            name,
            "Pod",
            boundary,
            "Pending",
            template["name"],
            retried=retried,
            inputs=template.get("inputs"),
        )
        if fulfilled(node) or node["id"] in self.pods:
            return node
        if self.shutdown:
            self.mark(node, "Failed", f"workflow shutdown with strategy: {self.shutdown}")
            return node
        pod = build_pod(self.wf, name, template, self.executor)
        try:
            self.pods[node["id"]] = self.store.create(PODS, meta(self.wf)["namespace"], pod)
        except status.ApiError as error:
            if error.reason != "AlreadyExists":  # an old pod of the name still terminates
                self.mark(node, "Error", error.message)
        return node

    # -- DAGs ----------------------------------------------------------------------------

    def execute_dag(
        self, name: str, template: dict[str, Any], scope: dict[str, str], boundary: str
    ) -> dict[str, Any]:
        dag = self.node(name) or self.init_node(
            name, "DAG", boundary, "Running", template["name"], inputs=template.get("inputs")
        )
        if fulfilled(dag):
            return dag
        tasks = {t["name"]: substitute_tags(t, scope) for t in template["dag"].get("tasks") or []}
        visited: set[str] = set()
        for task in tasks:
            self.execute_task(dag, tasks, task, visited)
        phase = self.assess_dag(dag, tasks)
        if phase != "Running":
            leaves = [t for t in tasks if not any(t in _deps(o) for o in tasks.values())]
            dag["outboundNodes"] = [
                o for t in leaves if (n := self.node(f"{name}.{t}")) for o in self.outbound(n)
            ]
            self.mark(dag, phase)
        return dag

    def execute_task(
        self, dag: dict[str, Any], tasks: dict[str, Any], name: str, visited: set[str]
    ) -> None:
        if name in visited:
            return
        visited.add(name)
        task, node_name = tasks[name], f"{dag['name']}.{name}"
        deps = _deps(task)
        for dep in deps:
            self.execute_task(dag, tasks, dep, visited)
        existing = self.node(node_name)
        if fulfilled(existing):
            return
        if existing is None:
            dep_nodes = [self.node(f"{dag['name']}.{d}") for d in deps]
            if not all(fulfilled(n) for n in dep_nodes):
                return
            if not all(_satisfies(n, tasks[d]) for n, d in zip(dep_nodes, deps, strict=True)):
                self.connect(dag, node_name, deps)
                self.init_node(
                    node_name,
                    "Skipped",
                    dag["id"],
                    "Omitted",
                    task["template"],
                    "omitted: depends condition not met",
                )
                return
        arguments = task.get("arguments") or {}
        items = _items(task)
        if items is None:
            if existing is None:
                self.connect(dag, node_name, deps)
            self.execute_template(node_name, task["template"], arguments, dag["id"])
            return
        group = existing
        if group is None:
            self.connect(dag, node_name, deps)
            if not items:
                self.init_node(
                    node_name,
                    "Skipped",
                    dag["id"],
                    "Skipped",
                    task["template"],
                    "Skipped, empty params",
                )
                return
            group = self.init_node(node_name, "TaskGroup", dag["id"], "Running", task["template"])
        children = []
        for index, item in enumerate(items):
            clean = str(item).replace("(", "").replace(")", "")
            child_name = f"{node_name}({index}:{clean})"
            self.add_child(group, child_name)
            child_args = substitute_tags(arguments, {"item": str(item)})
            children.append(
                self.execute_template(child_name, task["template"], child_args, dag["id"])
            )
        if all(fulfilled(c) for c in children):
            failed = [c for c in children if c and c["phase"] in FAILED]
            self.mark(group, failed[-1]["phase"] if failed else "Succeeded")

    def connect(self, dag: dict[str, Any], node_name: str, deps: list[str]) -> None:
        """Hang a task's node below its dependencies' outbound nodes (or the DAG)."""
        if not deps:
            self.add_child(dag, node_name)
        for dep in deps:
            dep_node = self.node(f"{dag['name']}.{dep}")
            for outbound in self.outbound(dep_node) if dep_node else []:
                self.add_child(self.nodes[outbound], node_name)

    def assess_dag(self, dag: dict[str, Any], tasks: dict[str, Any]) -> str:
        if self.shutdown:
            return "Failed"
        inside = [n for n in self.nodes.values() if n.get("boundaryID") == dag["id"]]
        if any(not fulfilled(n) for n in inside):
            return "Running"
        if any(self.node(f"{dag['name']}.{t}") is None for t in tasks):
            return "Running"
        leaves = [t for t in tasks if not any(t in _deps(o) for o in tasks.values())]
        for leaf in leaves:
            phase = self.branch_phase(dag, tasks, leaf)
            if phase in FAILED and not _continues_on(tasks[leaf], phase):
                return phase
        return "Succeeded"

    def branch_phase(self, dag: dict[str, Any], tasks: dict[str, Any], name: str) -> str:
        """A task's phase, an omitted task taking the failure of the branch above it."""
        node = self.node(f"{dag['name']}.{name}")
        if node is None or node["phase"] != "Omitted":
            return node["phase"] if node else "Running"
        for dep in _deps(tasks[name]):
            phase = self.branch_phase(dag, tasks, dep)
            if phase in FAILED:
                return phase
        return "Omitted"


def _deps(task: dict[str, Any]) -> list[str]:
    return list(task.get("dependencies") or [])


def _continues_on(task: dict[str, Any], phase: str) -> bool:
    continue_on = task.get("continueOn") or {}
    return bool(continue_on.get("failed" if phase == "Failed" else "error"))


def _satisfies(node: dict[str, Any] | None, task: dict[str, Any]) -> bool:
    """Whether a finished dependency lets its dependents run (`expandDependency`)."""
    phase = node["phase"] if node else ""
    return phase in ("Succeeded", "Skipped") or (phase in FAILED and _continues_on(task, phase))


def _items(task: dict[str, Any]) -> list[Any] | None:
    """The items of `withItems`/`withSequence`, None for a task that does not expand."""
    if "withItems" in task:
        return list(task["withItems"])
    sequence = task.get("withSequence")
    if sequence is None:
        return None
    start = int(sequence.get("start", 0))
    end = int(sequence["end"]) if "end" in sequence else start + int(sequence["count"]) - 1
    step = 1 if end >= start else -1
    return list(range(start, end + step, step))
