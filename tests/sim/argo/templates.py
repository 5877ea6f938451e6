"""Argo's names, variable substitution and the pods it builds from templates.

- Node ids: `<workflow>-<fnv32a(node name)>`, the root node's id is the workflow's name
  (`Workflow.NodeID`, pkg/apis/workflow/v1alpha1/workflow_types.go).
- Pod names (v2, the default): `<workflow>-<template>-<fnv32a(node name)>`
  (`GeneratePodName`, workflow/util/pod_name.go).
- Substitution: `{{name}}` tags of the scope and `{{=expression}}` tags anywhere in a
  template, its metadata, `priorityClassName`, env and `podSpecPatch` included (`SubstituteParams`
  in workflow/common/util.go). A tag the scope does not know stays as written.
- The pod (`createWorkflowPod`, workflow/controller/workflowpod.go): labels
  `workflows.argoproj.io/workflow` and `/completed: "false"`, annotations `/node-name` and
  `/node-id`, an owner reference to the workflow, `restartPolicy: Never`, the executor's
  `init` and `wait` containers with the executor's resources, the template's container as
  `main` behind `argoexec emissary --`, the scheduling fields of the template or else of the
  workflow, then the strategic merge of `podSpecPatch`, then
  `ARGO_TERMINATION_GRACE_PERIOD_SECONDS` from the patched spec in every container (what the
  emissary waits after SIGTERM).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.sim.argo.expressions import ExprError, evaluate, format_value, nested
from tests.sim.patches import strategic_merge
from tests.sim.store import Obj, meta

WORKFLOW_LABEL = "workflows.argoproj.io/workflow"
COMPLETED_LABEL = "workflows.argoproj.io/completed"
PHASE_LABEL = "workflows.argoproj.io/phase"
NODE_NAME = "workflows.argoproj.io/node-name"
NODE_ID = "workflows.argoproj.io/node-id"
EMISSARY = ["/var/run/argo/argoexec", "emissary", "--"]
_TAG = re.compile(r"\{\{\s*(=?)(.*?)\s*\}\}", re.DOTALL)


ARGO_CONFIGMAP = (
    Path(__file__).resolve().parents[3] / "deploy/cluster/controllers/argo/controller-config.yaml"
)
"""The deploy's `workflow-controller-configmap`: the executor settings of the cluster."""


@dataclass(frozen=True)
class ExecutorConfig:
    """The controller's `executor` settings: image and resources of `init` and `wait`.

    `from_configmap()` reads them from the deploy's config map, as Argo's controller reads
    its `executor` key (a container); the default of a SimCluster (seed K5).
    """

    image: str = "quay.io/argoproj/argoexec:v4.1.6"
    resources: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_configmap(cls, path: Path = ARGO_CONFIGMAP) -> ExecutorConfig:
        """The `executor` of a workflow-controller-configmap manifest."""
        configmap = yaml.safe_load(path.read_text())
        executor = yaml.safe_load((configmap.get("data") or {}).get("executor") or "{}") or {}
        return cls(
            image=executor.get("image") or cls.image, resources=executor.get("resources") or {}
        )


def fnv32a(text: str) -> int:
    """The 32-bit FNV-1a hash Argo names nodes and pods with."""
    value = 0x811C9DC5
    for byte in text.encode():
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def node_id(workflow: str, name: str) -> str:
    """The id of the node named `name` in `workflow`."""
    return workflow if name == workflow else f"{workflow}-{fnv32a(name)}"


def pod_name(workflow: str, name: str, template: str) -> str:
    """The pod of the node named `name` (pod names v2)."""
    if name == workflow:
        return workflow
    prefix = f"{workflow}-{template}" if template else workflow
    return f"{prefix[:242]}-{fnv32a(name)}"


def display_name(name: str, boundary_name: str | None) -> str:
    """A node's name without its boundary's name and the separating dot."""
    if boundary_name is None:
        return name
    shown = name.removeprefix(boundary_name)
    return re.sub(r"^(\[\d+\])?\.", "", shown)


def _substitute_text(text: str, scope: dict[str, str], env: dict[str, Any]) -> str:
    def replace(match: re.Match[str]) -> str:
        is_expression, body = match.group(1), match.group(2)
        if is_expression:
            try:
                return format_value(evaluate(body, env))
            except (ExprError, ArithmeticError, TypeError, ValueError):
                return match.group(0)
        return scope.get(body, match.group(0))

    return _TAG.sub(replace, text)


def substitute(value: Any, scope: dict[str, str]) -> Any:
    """`value` with every tag of `scope` (and every expression it can evaluate) replaced."""
    env = nested(scope)

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            return _substitute_text(item, scope, env) if "{{" in item else item
        if isinstance(item, list):
            return [walk(v) for v in item]
        if isinstance(item, dict):
            return {k: walk(v) for k, v in item.items()}
        return item

    return walk(value)


def parse_patch(text: str | dict[str, Any]) -> dict[str, Any]:
    """A `podSpecPatch`: JSON or YAML text (or already a map)."""
    if isinstance(text, dict):
        return text
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = yaml.safe_load(text)
    if not isinstance(parsed, dict):
        raise ValueError(f"podSpecPatch is not a map: {text!r}")
    return parsed


def _pick(template: dict[str, Any], spec: dict[str, Any], key: str, wf_key: str = "") -> Any:
    return template.get(key) or spec.get(wf_key or key)


def build_pod(
    workflow: Obj, node_name: str, template: dict[str, Any], executor: ExecutorConfig
) -> Obj:
    """The pod Argo creates for a node of a container template (already substituted)."""
    wf_meta, spec = meta(workflow), workflow.get("spec") or {}
    wf_name = wf_meta["name"]
    name = pod_name(wf_name, node_name, template.get("name", ""))
    exec_env = [
        {
            "name": "ARGO_POD_NAME",
            "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
        },
        {
            "name": "ARGO_POD_UID",
            "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.uid"}},
        },
        {"name": "ARGO_WORKFLOW_NAME", "value": wf_name},
        {"name": "ARGO_WORKFLOW_UID", "value": wf_meta.get("uid", "")},
    ]

    def executor_container(role: str) -> dict[str, Any]:
        return {
            "name": role,
            "image": executor.image,
            "command": ["argoexec", role],
            "env": copy.deepcopy(exec_env),
            "resources": copy.deepcopy(executor.resources),
        }

    main = copy.deepcopy(template.get("container") or {})
    main["name"] = "main"
    if main.get("command"):
        main["command"] = [*EMISSARY, *main["command"]]
    main["env"] = [
        *(main.get("env") or []),
        {"name": "ARGO_CONTAINER_NAME", "value": "main"},
        {"name": "ARGO_NODE_ID", "value": node_id(wf_name, node_name)},
    ]
    pod_metadata = spec.get("podMetadata") or {}
    tmpl_metadata = template.get("metadata") or {}
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "initContainers": [executor_container("init")],
        "containers": [executor_container("wait"), main],
        "volumes": [*(spec.get("volumes") or []), *(template.get("volumes") or [])],
    }
    account = _pick(template, spec, "serviceAccountName")
    for key, value in (
        ("serviceAccountName", account),
        ("nodeSelector", _pick(template, spec, "nodeSelector")),
        ("tolerations", _pick(template, spec, "tolerations")),
        ("affinity", _pick(template, spec, "affinity")),
        ("schedulerName", _pick(template, spec, "schedulerName")),
        ("priorityClassName", _pick(template, spec, "priorityClassName", "podPriorityClassName")),
        ("securityContext", _pick(template, spec, "securityContext")),
        ("activeDeadlineSeconds", template.get("activeDeadlineSeconds")),
    ):
        if value:
            pod_spec[key] = copy.deepcopy(value)
    for patch in (spec.get("podSpecPatch"), template.get("podSpecPatch")):
        if patch:
            pod_spec = strategic_merge(pod_spec, parse_patch(patch))
    grace = pod_spec.get("terminationGracePeriodSeconds")
    if grace is not None:
        for container in pod_spec["containers"]:
            container.setdefault("env", []).append(
                {"name": "ARGO_TERMINATION_GRACE_PERIOD_SECONDS", "value": str(grace)}
            )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": wf_meta["namespace"],
            "labels": {
                **(pod_metadata.get("labels") or {}),
                **(tmpl_metadata.get("labels") or {}),
                WORKFLOW_LABEL: wf_name,
                COMPLETED_LABEL: "false",
            },
            "annotations": {
                **(pod_metadata.get("annotations") or {}),
                **(tmpl_metadata.get("annotations") or {}),
                NODE_NAME: node_name,
                NODE_ID: node_id(wf_name, node_name),
                "kubectl.kubernetes.io/default-container": "main",
            },
            "ownerReferences": [
                {
                    "apiVersion": "argoproj.io/v1alpha1",
                    "kind": "Workflow",
                    "name": wf_name,
                    "uid": wf_meta.get("uid", ""),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": pod_spec,
    }
