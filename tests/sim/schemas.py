"""The schemas an object is checked against, as the API server checks it under
`fieldValidation=Strict`: every field must be known and of its type.

- Kubernetes' own kinds (Pod, Node, ConfigMap, Job, PriorityClass, Deployment ...): the
  strict schemas kubernetes-validate bundles for KUBERNETES_VERSION (the k3s of the cluster).
- Argo's kinds (Workflow, WorkflowTemplate, CronWorkflow, ClusterWorkflowTemplate): hera's
  models, generated from Argo's upstream OpenAPI, as JSON Schema with every object closed
  (an unknown field is an error), quantities taking a number or a string as the API does.
- Kueue's kinds: `tests.sim.kueue_schemas` (the fields simrun uses).

Fields set to null count as absent (the API server's decoder drops them). An object of a kind
none of these knows has no schema (`field_errors` answers None): the caller decides.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import jsonschema
from hera.workflows import models as argo_models
from kubernetes_validate import utils as kubernetes_schemas
from pydantic import BaseModel
from referencing import Registry, Resource

from tests.sim.kueue_schemas import KUEUE_SCHEMAS

KUBERNETES_VERSION = "1.35"
"""The Kubernetes of the cluster (k3s v1.35): every object must be valid there."""

ARGO_API_VERSION = "argoproj.io/v1alpha1"
_ARGO_MODELS: dict[str, type[BaseModel]] = {
    "Workflow": argo_models.Workflow,
    "WorkflowTemplate": argo_models.WorkflowTemplate,
    "CronWorkflow": argo_models.CronWorkflow,
    "ClusterWorkflowTemplate": argo_models.ClusterWorkflowTemplate,
}
_QUANTITY = {"anyOf": [{"type": "string"}, {"type": "number"}]}


@dataclass(frozen=True)
class FieldError:
    """One field an API server refuses: its path (`spec.containers[0].image`) and why."""

    path: str
    message: str
    unknown: bool = False
    """An unknown field (a strict decoding error), not a value of the wrong type or range."""
    parts: tuple[str | int, ...] = field(default=(), compare=False)
    """The path as keys and indices, to drop an unknown field (`fieldValidation=Warn`)."""


def field_errors(obj: Any) -> list[FieldError] | None:
    """Why the API server refuses `obj` (empty when valid); None when no schema knows its kind."""
    validator = schema_validator(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    if validator is None:
        return None
    found: list[FieldError] = []
    for error in validator.iter_errors(without_nulls(obj)):
        found.extend(_explain(error))
    return sorted(set(found), key=lambda e: (not e.unknown, e.path))


def model_errors(model: type[BaseModel], value: Any) -> list[FieldError]:
    """Why `value` is no valid `model` of hera's (e.g. the executor container of Argo's
    controller config, a `Container`), strictly: unknown fields are errors."""
    validator = jsonschema.Draft202012Validator(_closed(model.model_json_schema(by_alias=True)))
    return sorted(
        {e for error in validator.iter_errors(without_nulls(value)) for e in _explain(error)},
        key=lambda e: e.path,
    )


def without_nulls(value: Any) -> Any:
    """The value with every null field dropped, as the API server's decoder drops them."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def field_path(parts: Iterable[Any]) -> str:
    """`spec.containers[0].name` from ("spec", "containers", 0, "name")."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text


def _explain(error: jsonschema.ValidationError) -> list[FieldError]:
    base = list(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = set(
            (error.schema.get("properties") or {}) if isinstance(error.schema, dict) else ()
        )
        extra = sorted(set(error.instance) - known)
        return [
            FieldError(field_path([*base, key]), "unknown field", unknown=True, parts=(*base, key))
            for key in extra
        ]
    if error.validator == "required" and isinstance(error.instance, dict):
        # field.Required: `spec.containers[0].name: Required value`, as the API server
        # words a missing field (its decoder leaves it empty; validation refuses that)
        wanted = error.validator_value if isinstance(error.validator_value, list) else []
        return [
            FieldError(field_path([*base, key]), "Required value", parts=(*base, key))
            for key in wanted
            if key not in error.instance
        ]
    if error.validator in ("anyOf", "oneOf") and error.context:
        return [e for sub in error.context for e in _explain(sub) if e.unknown] or [
            FieldError(field_path(base) or "<root>", _invalid(error))
        ]
    return [FieldError(field_path(base) or "<root>", _invalid(error))]


def _invalid(error: jsonschema.ValidationError) -> str:
    value = json.dumps(error.instance)
    if len(value) > 80:
        value = value[:77] + "..."
    return f"Invalid value: {value}: {error.message}"


@functools.cache
def schema_validator(api_version: str, kind: str) -> jsonschema.Draft202012Validator | None:
    """The validator of a kind (Kueue's, Argo's or Kubernetes'), None for an unknown one."""
    kueue = KUEUE_SCHEMAS.get((api_version, kind))
    if kueue is not None:
        return jsonschema.Draft202012Validator(kueue)
    if api_version == ARGO_API_VERSION and kind in _ARGO_MODELS:
        schema = _closed(_ARGO_MODELS[kind].model_json_schema(by_alias=True))
        return jsonschema.Draft202012Validator(schema)
    return _kubernetes_validator(api_version, kind)


def _closed(schema: Any) -> Any:
    """A pydantic JSON Schema made strict: objects closed, `X | None` as X, quantities open."""
    if isinstance(schema, list):
        return [_closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    if schema.get("title") == "Quantity" and schema.get("type") == "string":
        return _QUANTITY
    options = schema.get("anyOf")
    if isinstance(options, list):
        kept = [o for o in options if o != {"type": "null"}]
        if len(kept) == 1:
            rest = {k: v for k, v in schema.items() if k not in ("anyOf", "default")}
            return _closed({**rest, **kept[0]})
    closed = {k: _closed(v) for k, v in schema.items() if k not in ("description", "default")}
    if "properties" in closed and "additionalProperties" not in closed:
        closed["additionalProperties"] = False
    return closed


def _kubernetes_validator(api_version: str, kind: str) -> jsonschema.Draft202012Validator | None:
    """The strict schema kubernetes-validate bundles (the files and resolution of its
    validate(), loaded once per kind instead of once per object)."""
    directory = f"kubernetes-json-schema/v{_bundled_version()}-local-strict"
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = kubernetes_schemas.schema_contents(
            f"{directory}/{kind.lower()}-{group_version}.json", KUBERNETES_VERSION
        )
    except FileNotFoundError:
        return None
    registry: Registry = Resource.from_contents(schema) @ Registry()
    registry = _definitions(directory) @ registry
    return jsonschema.Draft202012Validator(schema, registry=registry)


@functools.cache
def _definitions(directory: str) -> Resource:
    return Resource.from_contents(
        kubernetes_schemas.schema_contents(f"{directory}/_definitions.json", KUBERNETES_VERSION)
    )


@functools.cache
def _bundled_version() -> str:
    """The newest bundled schema version of KUBERNETES_VERSION's minor (must exist)."""
    versions = [
        v
        for v in kubernetes_schemas.all_versions()
        if kubernetes_schemas.major_minor(v) == KUBERNETES_VERSION
    ]
    if not versions:
        raise AssertionError(f"kubernetes-validate bundles no schemas for {KUBERNETES_VERSION}")
    return versions[-1]
