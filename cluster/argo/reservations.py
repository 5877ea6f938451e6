"""Reservations of nodes (B4, B5): the taint `simrun/reserved=<run>:NoExecute`, which evicts
other runs' pods, and the label `simrun/reserved=<run>`, which the run's pods select.

A change is a merge patch of the node guarded by the resourceVersion it was made from: a node
changed meanwhile (a conflict) is read again and the change made anew.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes.client import CoreV1Api
from kubernetes.client.rest import ApiException

from cluster.argo.names import MERGE_PATCH, STRICT, label_value
from cluster.argo.nodes import RESERVED_KEY

RESERVE_ATTEMPTS = 10

Change = Callable[[Mapping[str, Any]], dict[str, Any] | None]
"""The patch to make of a node as read; None when it needs none."""


def reserving(run_id: str) -> Change:
    """The taint and label of the run's reservation, replacing any earlier one of the node."""
    value = label_value(run_id)

    def change(current: Mapping[str, Any]) -> dict[str, Any]:
        taints = [
            t
            for t in (current.get("spec") or {}).get("taints") or []
            if t.get("key") != RESERVED_KEY
        ]
        taints.append({"key": RESERVED_KEY, "value": value, "effect": "NoExecute"})
        return {"metadata": {"labels": {RESERVED_KEY: value}}, "spec": {"taints": taints}}

    return change


def releasing(run_id: str) -> Change:
    """The removal of this run's taint and label; another run's reservation stays."""
    value = label_value(run_id)

    def change(current: Mapping[str, Any]) -> dict[str, Any] | None:
        labels = (current.get("metadata") or {}).get("labels") or {}
        taints = (current.get("spec") or {}).get("taints") or []
        kept = [t for t in taints if not (t.get("key") == RESERVED_KEY and t.get("value") == value)]
        patch: dict[str, Any] = {}
        if labels.get(RESERVED_KEY) == value:
            patch["metadata"] = {"labels": {RESERVED_KEY: None}}
        if len(kept) != len(taints):
            patch["spec"] = {"taints": kept or None}
        return patch or None

    return change


def patch_node(core: CoreV1Api, node: str, change: Change) -> None:
    """B4: read the node, patch what `change` makes of it with the node's resourceVersion
    as a precondition, and start over on a conflict. KeyError for an unknown node."""
    for _ in range(RESERVE_ATTEMPTS):
        try:
            current = json.loads(core.read_node(node, _preload_content=False).data)
        except ApiException as error:
            if error.status == 404:
                raise KeyError(node) from None
            raise
        patch = change(current)
        if patch is None:
            return
        patch.setdefault("metadata", {})["resourceVersion"] = current["metadata"]["resourceVersion"]
        try:
            core.patch_node(node, patch, field_validation=STRICT, _content_type=MERGE_PATCH)
            return
        except ApiException as error:
            if error.status == 409:
                continue
            if error.status == 404:
                raise KeyError(node) from None
            raise
    raise RuntimeError(f"node {node} kept changing; its reservation was not written")
