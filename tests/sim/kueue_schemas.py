"""JSON Schemas of the Kueue objects simrun deploys (kueue.x-k8s.io/v1beta2, Kueue v0.20).

kubernetes-validate bundles schemas of Kubernetes' own kinds only, and Kueue's CRDs are not
committed (deploy/vendor.sh fetches them), so these schemas, written for the simulator's API
server and the deploy tests, cover the fields of Kueue's API that simrun may use, with the
types, enums and bounds of its CRDs. They are strict: an unknown or misspelt field is an
error (what `fieldValidation=Strict` answers). Fields of the API that simrun does not use are
not allowed here either; add them when the manifests start using them. `metadata` takes the
fields the API server sets too (uid, resourceVersion ...), so a stored object read back and
written again validates; `status` is the simulated Kueue's to write and is not checked.
"""

from __future__ import annotations

from typing import Any

API_VERSION = "kueue.x-k8s.io/v1beta2"

_NAME = {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", "maxLength": 253}
_LABEL_KEY = {
    "type": "string",
    "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$",
    "maxLength": 316,
}
_QUANTITY = {
    "oneOf": [
        {"type": "integer", "minimum": 0},
        {
            "type": "string",
            "pattern": r"^(\+)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
            r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$",
        },
    ]
}
_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_SERVER_METADATA = {
    "uid": {"type": "string"},
    "resourceVersion": {"type": "string"},
    "creationTimestamp": {"type": "string", "format": "date-time"},
    "deletionTimestamp": {"type": "string", "format": "date-time"},
    "deletionGracePeriodSeconds": {"type": "integer"},
    "generation": {"type": "integer"},
    "generateName": {"type": "string"},
    "finalizers": {"type": "array", "items": {"type": "string"}},
    "ownerReferences": {
        "type": "array",
        "items": {
            "type": "object",
            "additionalProperties": False,
            "required": ["apiVersion", "kind", "name", "uid"],
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "name": {"type": "string"},
                "uid": {"type": "string"},
                "controller": {"type": "boolean"},
                "blockOwnerDeletion": {"type": "boolean"},
            },
        },
    },
}
_LABEL_SELECTOR = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "matchLabels": _STRING_MAP,
        "matchExpressions": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["key", "operator"],
                "properties": {
                    "key": {"type": "string"},
                    "operator": {"enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
                    "values": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
    },
}


def _object(kind: str, *, namespaced: bool, body: dict[str, Any], required: list[str]) -> Any:
    metadata: dict[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "required": ["name"],
        "properties": {
            "name": _NAME,
            "labels": _STRING_MAP,
            "annotations": _STRING_MAP,
            **_SERVER_METADATA,
        },
    }
    if namespaced:
        metadata["properties"]["namespace"] = _NAME
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["apiVersion", "kind", "metadata", *required],
        "properties": {
            "apiVersion": {"const": API_VERSION},
            "kind": {"const": kind},
            "metadata": metadata,
            "status": {"type": "object"},
            **body,
        },
    }


def _spec(properties: dict[str, Any], required: list[str] | None = None) -> Any:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": required or [],
        "properties": properties,
    }


TOPOLOGY = _object(
    "Topology",
    namespaced=False,
    required=["spec"],
    body={
        "spec": _spec(
            {
                "levels": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 16,
                    "items": _spec({"nodeLabel": _LABEL_KEY}, ["nodeLabel"]),
                }
            },
            ["levels"],
        )
    },
)

RESOURCE_FLAVOR = _object(
    "ResourceFlavor",
    namespaced=False,
    required=["spec"],
    body={
        "spec": _spec(
            {
                "nodeLabels": {**_STRING_MAP, "maxProperties": 8},
                "topologyName": _NAME,
            }
        )
    },
)

_RESOURCE_QUOTA = _spec(
    {
        "name": {"type": "string", "minLength": 1},
        "nominalQuota": _QUANTITY,
        "borrowingLimit": _QUANTITY,
        "lendingLimit": _QUANTITY,
    },
    ["name", "nominalQuota"],
)

CLUSTER_QUEUE = _object(
    "ClusterQueue",
    namespaced=False,
    required=["spec"],
    body={
        "spec": _spec(
            {
                "namespaceSelector": _LABEL_SELECTOR,
                "queueingStrategy": {"enum": ["StrictFIFO", "BestEffortFIFO"]},
                "cohortName": _NAME,
                "stopPolicy": {"enum": ["None", "Hold", "HoldAndDrain"]},
                "preemption": _spec(
                    {
                        "withinClusterQueue": {
                            "enum": ["Never", "LowerPriority", "LowerOrNewerEqualPriority"]
                        },
                        "reclaimWithinCohort": {"enum": ["Never", "LowerPriority", "Any"]},
                    }
                ),
                "resourceGroups": {
                    "type": "array",
                    "maxItems": 16,
                    "items": _spec(
                        {
                            "coveredResources": {
                                "type": "array",
                                "minItems": 1,
                                "maxItems": 64,
                                "items": {"type": "string"},
                            },
                            "flavors": {
                                "type": "array",
                                "minItems": 1,
                                "maxItems": 64,
                                "items": _spec(
                                    {
                                        "name": _NAME,
                                        "resources": {
                                            "type": "array",
                                            "minItems": 1,
                                            "maxItems": 64,
                                            "items": _RESOURCE_QUOTA,
                                        },
                                    },
                                    ["name", "resources"],
                                ),
                            },
                        },
                        ["coveredResources", "flavors"],
                    ),
                },
            }
        )
    },
)

LOCAL_QUEUE = _object(
    "LocalQueue",
    namespaced=True,
    required=["spec"],
    body={
        "spec": _spec(
            {"clusterQueue": _NAME, "stopPolicy": {"enum": ["None", "Hold", "HoldAndDrain"]}},
            ["clusterQueue"],
        )
    },
)

WORKLOAD_PRIORITY_CLASS = _object(
    "WorkloadPriorityClass",
    namespaced=False,
    required=["value"],
    body={
        "value": {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1},
        "description": {"type": "string"},
    },
)

_POD_SET_NAME = {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63}

WORKLOAD = _object(
    "Workload",
    namespaced=True,
    required=["spec"],
    body={
        "spec": _spec(
            {
                "podSets": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 8,
                    "items": _spec(
                        {
                            "name": _POD_SET_NAME,
                            "count": {"type": "integer", "minimum": 0},
                            # a PodTemplateSpec: the API server checks pods themselves
                            "template": {"type": "object"},
                            "topologyRequest": _spec(
                                {
                                    "required": {"type": "string", "maxLength": 63},
                                    "preferred": {"type": "string", "maxLength": 63},
                                    "podIndexLabel": {"type": "string", "maxLength": 317},
                                }
                            ),
                        },
                        ["count", "template"],
                    ),
                },
                "queueName": _NAME,
                "priorityClassRef": _spec(
                    {
                        "group": {"enum": ["kueue.x-k8s.io", "scheduling.k8s.io"]},
                        "kind": {"enum": ["WorkloadPriorityClass", "PriorityClass"]},
                        "name": _NAME,
                    },
                    ["group", "kind", "name"],
                ),
                "priority": {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1},
                "active": {"type": "boolean"},
            },
            ["podSets"],
        )
    },
)

KUEUE_SCHEMAS: dict[tuple[str, str], Any] = {
    (API_VERSION, schema["properties"]["kind"]["const"]): schema
    for schema in (
        TOPOLOGY,
        RESOURCE_FLAVOR,
        CLUSTER_QUEUE,
        LOCAL_QUEUE,
        WORKLOAD_PRIORITY_CLASS,
        WORKLOAD,
    )
}
"""The schema of each (apiVersion, kind) of Kueue that the deployment holds."""
