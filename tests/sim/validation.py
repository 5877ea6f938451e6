"""What the API server refuses beyond the schemas: the semantic checks of the kinds simrun
makes, worded as a real server words them (docs/simulator.md cites the upstream code).

- Every object's metadata (`ValidateObjectMeta`, apimachinery `api/validation/objectmeta.go`):
  its name a DNS-1123 subdomain (a namespace's a DNS-1123 label), label keys qualified names
  and values at most 63 characters of `[A-Za-z0-9_.-]` starting and ending alphanumeric
  (`api/validate/content/kube.go`), annotation keys qualified names and all annotations at
  most 256 KiB; a replace may not change the uid.
- Pods and the pod templates of Jobs (`pkg/apis/core/validation`): containers required, each
  named (a DNS-1123 label, unique among all containers) and with an image; quantities not
  negative and requests at most their limits; env names; volume names and mounts of known
  volumes; a known restart policy; node selectors and tolerations as labels; an update may
  change only images, the active deadline, tolerations (added) and the grace period.
- Nodes: labels, taints (key, value, effect; one per key and effect).
- ConfigMaps: keys `[-._a-zA-Z0-9]+`, none in both `data` and `binaryData`, at most 1 MiB in
  all, nothing changed once `immutable`.
- Jobs: restart policy OnFailure or Never, counts not negative; the template and the selector
  immutable.

A malformed quantity is a decoding error (400 BadRequest), as the server's JSON decoder
refuses it before any validation (`quantity_error`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.sim.field_rules import (
    CONFIG_KEY,
    CONFIG_KEY_FMT,
    Problem,
    label_key,
    label_value,
    labels,
    max_len,
    metadata,
    regex_error,
)
from tests.sim.pod_rules import TAINT_EFFECTS, pod_spec, pod_update, supported
from tests.sim.resources import CONFIGMAPS, JOBS, NODES, PODS, ResourceInfo

# -- nodes, config maps, jobs ----------------------------------------------------------------


def node(obj: Mapping[str, Any]) -> list[Problem]:
    """`ValidateNode`'s taints (`validateNodeTaints`)."""
    found = []
    pairs: set[tuple[str, str]] = set()
    for i, taint in enumerate((obj.get("spec") or {}).get("taints") or []):
        where = f"spec.taints[{i}]"
        key, effect = str(taint.get("key") or ""), str(taint.get("effect") or "")
        found += [Problem("Invalid", f"{where}.key", key, e) for e in label_key(key)]
        value = str(taint.get("value") or "")
        found += [Problem("Invalid", f"{where}.value", value, e) for e in label_value(value)]
        if not effect:
            found.append(Problem("Required", f"{where}.effect"))
        elif effect not in TAINT_EFFECTS:
            found.append(
                Problem("NotSupported", f"{where}.effect", effect, supported(TAINT_EFFECTS))
            )
        if (key, effect) in pairs:
            found.append(
                Problem("Duplicate", where, "taints must be unique by key and effect pair")
            )
        pairs.add((key, effect))
    return found


CONFIG_MAP_MAX = 1024 * 1024


def config_map(obj: Mapping[str, Any]) -> list[Problem]:
    """`ValidateConfigMap`: keys, no key twice, 1 MiB in all."""
    found = []
    data, binary = obj.get("data") or {}, obj.get("binaryData") or {}
    size = 0
    for field, values in (("data", data), ("binaryData", binary)):
        for key, value in values.items():
            errors = [max_len(253)] if len(key) > 253 else []
            if not CONFIG_KEY.match(key):
                errors.append(
                    regex_error(
                        "a valid config key must consist of alphanumeric characters, '-', '_' "
                        "or '.'",
                        CONFIG_KEY_FMT,
                        "key.name",
                        "KEY_NAME",
                        "key-name",
                    )
                )
            if key in (".", ".."):
                errors.append(f"must not be '{key}'")
            elif key.startswith(".."):
                errors.append("must not start with '..'")
            found += [Problem("Invalid", f"{field}[{key}]", key, e) for e in errors]
            size += len(str(value))
    for key in set(data) & set(binary):
        found.append(
            Problem("Invalid", f"data[{key}]", key, "duplicate of key present in binaryData")
        )
    if size > CONFIG_MAP_MAX:
        found.append(Problem("TooLong", "", detail=f"may not be more than {CONFIG_MAP_MAX} bytes"))
    return found


def config_map_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Problem]:
    """An immutable config map keeps its data."""
    if not old.get("immutable"):
        return []
    found = []
    if not new.get("immutable"):
        found.append(
            Problem("Forbidden", "immutable", detail="field is immutable when `immutable` is set")
        )
    for field in ("data", "binaryData"):
        if (old.get(field) or {}) != (new.get(field) or {}):
            found.append(
                Problem("Forbidden", field, detail="field is immutable when `immutable` is set")
            )
    return found


def job(obj: Mapping[str, Any]) -> list[Problem]:
    """`ValidateJob`: its pod template, restart policy and counts."""
    spec = obj.get("spec") or {}
    template = spec.get("template") or {}
    found = labels((template.get("metadata") or {}).get("labels"), "spec.template.metadata.labels")
    pod = template.get("spec") or {}
    found += pod_spec(pod, "spec.template.spec")
    policy = pod.get("restartPolicy") or "Always"
    if policy not in ("OnFailure", "Never"):
        found.append(
            Problem(
                "NotSupported",
                "spec.template.spec.restartPolicy",
                policy,
                supported(("OnFailure", "Never")),
            )
        )
    for key in (
        "parallelism",
        "completions",
        "backoffLimit",
        "activeDeadlineSeconds",
        "ttlSecondsAfterFinished",
    ):
        value = spec.get(key)
        if isinstance(value, int) and value < 0:
            found.append(
                Problem("Invalid", f"spec.{key}", value, "must be greater than or equal to 0")
            )
    return found


def job_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Problem]:
    """`ValidateJobUpdate`: the template and selector stay as created."""
    found = []
    before, after = old.get("spec") or {}, new.get("spec") or {}
    for key in ("template", "selector"):
        if before.get(key) != after.get(key):
            found.append(Problem("Invalid", f"spec.{key}", after.get(key), "field is immutable"))
    return found


# -- the entry points ------------------------------------------------------------------------


def problems_of_new(info: ResourceInfo, obj: Mapping[str, Any]) -> list[Problem]:
    """What the server refuses of a new object (after defaults and mutating admission)."""
    found = metadata(info, obj)
    if info is PODS:
        found += pod_spec(obj.get("spec") or {}, "spec")
    elif info is NODES:
        found += node(obj)
    elif info is CONFIGMAPS:
        found += config_map(obj)
    elif info is JOBS:
        found += job(obj)
    return found


def problems_of_update(
    info: ResourceInfo, old: Mapping[str, Any], new: Mapping[str, Any]
) -> list[Problem]:
    """What the server refuses of a replaced or patched object."""
    found = problems_of_new(info, new)
    given, stored = (new.get("metadata") or {}).get("uid"), (old.get("metadata") or {}).get("uid")
    if given and given != stored:
        found.append(Problem("Invalid", "metadata.uid", given, "field is immutable"))
    if info is PODS:
        found += pod_update(old, new)
    elif info is CONFIGMAPS:
        found += config_map_update(old, new)
    elif info is JOBS:
        found += job_update(old, new)
    return found
