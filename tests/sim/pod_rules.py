"""The API server's checks of a pod spec (`pkg/apis/core/validation`: `ValidatePodSpec`,
`ValidateResourceRequirements`, `ValidateTolerations`, `ValidatePodUpdate`) and of quantities
(apimachinery `api/resource`), worded as it words them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from tests.sim.field_rules import Problem, dns_label, label_key, label_value, labels
from tests.sim.quantities import quantity
from tests.sim.resources import JOBS, PODS, ResourceInfo

# -- quantities ------------------------------------------------------------------------------

QUANTITY_FMT = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
QUANTITY_ERROR = f"quantities must match the regular expression '{QUANTITY_FMT}'"
_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
_DECIMAL = (("E", 18), ("P", 15), ("T", 12), ("G", 9), ("M", 6), ("k", 3))


def parsed(value: Any) -> Decimal | None:
    try:
        return quantity(value)
    except (ValueError, ArithmeticError, TypeError):
        return None


def canonical(value: str | int | float) -> str:
    """A quantity as `Quantity.String()` shows it: binary ones in the largest binary unit
    that keeps them whole, others in decimal units (`1500m`, `2`, `3k`)."""
    amount = quantity(value)
    if isinstance(value, str) and value.endswith("i") and amount == amount.to_integral_value():
        for suffix, factor in _BINARY:
            if amount % factor == 0:
                return f"{int(amount / factor)}{suffix}"
        return str(int(amount))
    if amount != amount.to_integral_value():
        for suffix, power in (("m", 3), ("u", 6), ("n", 9)):
            scaled = amount * (Decimal(10) ** power)
            if scaled == scaled.to_integral_value():
                return f"{int(scaled)}{suffix}"
        return str(amount)
    for suffix, exponent in _DECIMAL:
        unit = Decimal(10) ** exponent
        if amount != 0 and amount % unit == 0:
            return f"{int(amount / unit)}{suffix}"
    return str(int(amount))


def _resource_lists(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found = []
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            resources = container.get("resources") or {}
            found += [resources.get("limits") or {}, resources.get("requests") or {}]
    found.append(spec.get("overhead") or {})
    return found


def quantity_error(info: ResourceInfo, obj: Mapping[str, Any]) -> str | None:
    """The decoder's refusal of a malformed quantity of a pod or job (None when none)."""
    spec = obj.get("spec") or {}
    if info is JOBS:
        spec = (spec.get("template") or {}).get("spec") or {}
    elif info is not PODS:
        return None
    for values in _resource_lists(spec):
        if any(parsed(v) is None for v in values.values()):
            return QUANTITY_ERROR
    return None


# -- pods ------------------------------------------------------------------------------------

RESTART_POLICIES = ("Always", "OnFailure", "Never")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def supported(values: tuple[str, ...]) -> str:
    return "supported values: " + ", ".join(json.dumps(v) for v in values)


def _resources(resources: Mapping[str, Any], path: str) -> list[Problem]:
    """`ValidateResourceRequirements`: not negative, requests at most their limits."""
    found = []
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    for kind, values in (("limits", limits), ("requests", requests)):
        for name, value in values.items():
            amount = parsed(value)
            if amount is not None and amount < 0:
                where = f"{path}.{kind}[{name}]"
                found.append(
                    Problem(
                        "Invalid", where, canonical(value), "must be greater than or equal to 0"
                    )
                )
    for name, value in requests.items():
        amount, limit = parsed(value), parsed(limits.get(name, "")) if name in limits else None
        if amount is not None and limit is not None and amount > limit:
            found.append(
                Problem(
                    "Invalid",
                    f"{path}.requests",
                    canonical(value),
                    f"must be less than or equal to {name} limit of {canonical(limits[name])}",
                )
            )
    return found


def _env_name(name: str) -> list[str]:
    """`IsRelaxedEnvVarName` (RelaxedEnvironmentVariableValidation, on since 1.34)."""
    if not name:
        return ["environment variable name must be non-empty"]
    if any(ord(c) > 126 or ord(c) < 32 or c == "=" for c in name):
        return [
            "a valid environment variable name must consist only of printable ASCII "
            "characters other than '='"
        ]
    return []


def _container(
    container: Mapping[str, Any], path: str, volumes: set[str], seen: set[str]
) -> list[Problem]:
    found = []
    name = str(container.get("name") or "")
    if not name:
        found.append(Problem("Required", f"{path}.name"))
    else:
        found += [Problem("Invalid", f"{path}.name", name, e) for e in dns_label(name)]
        if name in seen:
            found.append(Problem("Duplicate", f"{path}.name", name))
        seen.add(name)
    if not container.get("image"):
        found.append(Problem("Required", f"{path}.image"))
    found += _resources(container.get("resources") or {}, f"{path}.resources")
    for i, variable in enumerate(container.get("env") or []):
        where = f"{path}.env[{i}].name"
        found += [
            Problem("Invalid", where, variable.get("name", ""), e)
            for e in _env_name(str(variable.get("name") or ""))
        ]
    for i, mount in enumerate(container.get("volumeMounts") or []):
        where = f"{path}.volumeMounts[{i}]"
        if not mount.get("name"):
            found.append(Problem("Required", f"{where}.name"))
        elif mount["name"] not in volumes:
            found.append(Problem("NotFound", f"{where}.name", mount["name"]))
        if not mount.get("mountPath"):
            found.append(Problem("Required", f"{where}.mountPath"))
    return found


def _tolerations(tolerations: Any, path: str) -> list[Problem]:
    """`ValidateTolerations` (a value that is no label value is reported at `operator`, as
    upstream does)."""
    found = []
    for i, toleration in enumerate(tolerations or []):
        where = f"{path}[{i}]"
        key, operator = toleration.get("key") or "", toleration.get("operator") or ""
        value = toleration.get("value") or ""
        if key:
            found += [Problem("Invalid", f"{where}.key", key, e) for e in label_key(key)]
        elif operator != "Exists":
            found.append(
                Problem(
                    "Invalid",
                    f"{where}.operator",
                    operator,
                    'operator must be Exists when `key` is empty, which means "match all '
                    'values and all keys"',
                )
            )
        if (
            toleration.get("tolerationSeconds") is not None
            and toleration.get("effect") != "NoExecute"
        ):
            found.append(
                Problem(
                    "Invalid",
                    f"{where}.effect",
                    toleration.get("effect") or "",
                    "effect must be 'NoExecute' when `tolerationSeconds` is set",
                )
            )
        if operator in ("Equal", ""):
            errors = label_value(value)
            if errors:
                found.append(Problem("Invalid", f"{where}.operator", value, ";".join(errors)))
        elif operator == "Exists":
            if value:
                found.append(
                    Problem(
                        "Invalid",
                        f"{where}.operator",
                        toleration,
                        "value must be empty when `operator` is 'Exists'",
                    )
                )
        else:
            found.append(
                Problem(
                    "NotSupported", f"{where}.operator", operator, supported(("Equal", "Exists"))
                )
            )
        effect = toleration.get("effect")
        if effect and effect not in TAINT_EFFECTS:
            found.append(
                Problem("NotSupported", f"{where}.effect", effect, supported(TAINT_EFFECTS))
            )
    return found


def pod_spec(spec: Mapping[str, Any], path: str) -> list[Problem]:
    """`ValidatePodSpec`, the parts a run's pods use."""
    found = []
    volumes: set[str] = set()
    for i, volume in enumerate(spec.get("volumes") or []):
        name = str(volume.get("name") or "")
        where = f"{path}.volumes[{i}].name"
        if not name:
            found.append(Problem("Required", where))
            continue
        found += [Problem("Invalid", where, name, e) for e in dns_label(name)]
        if name in volumes:
            found.append(Problem("Duplicate", where, name))
        volumes.add(name)
    seen: set[str] = set()
    if not spec.get("containers"):
        found.append(Problem("Required", f"{path}.containers"))
    for key in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(key) or []):
            found += _container(container, f"{path}.{key}[{i}]", volumes, seen)
    policy = spec.get("restartPolicy")
    if policy is not None and policy not in RESTART_POLICIES:
        found.append(
            Problem("NotSupported", f"{path}.restartPolicy", policy, supported(RESTART_POLICIES))
        )
    found += labels(spec.get("nodeSelector"), f"{path}.nodeSelector")
    found += _tolerations(spec.get("tolerations"), f"{path}.tolerations")
    grace = spec.get("terminationGracePeriodSeconds")
    if isinstance(grace, int) and grace < 0:
        found.append(
            Problem(
                "Invalid",
                f"{path}.terminationGracePeriodSeconds",
                grace,
                "must be greater than or equal to 0",
            )
        )
    return found


POD_UPDATE = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
    "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be "
    "set to 1 if it was previously negative)"
)


def _mutable_masked(spec: Mapping[str, Any]) -> dict[str, Any]:
    masked = {
        k: v
        for k, v in spec.items()
        if k not in ("activeDeadlineSeconds", "terminationGracePeriodSeconds")
    }
    for key in ("initContainers", "containers"):
        masked[key] = [{k: v for k, v in c.items() if k != "image"} for c in spec.get(key) or []]
    masked.pop("tolerations", None)
    return masked


def pod_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Problem]:
    """`ValidatePodUpdate`: the spec is fixed but for images, deadlines and added
    tolerations."""
    before, after = old.get("spec") or {}, new.get("spec") or {}
    kept = before.get("tolerations") or []
    now = after.get("tolerations") or []
    if _mutable_masked(before) != _mutable_masked(after) or now[: len(kept)] != kept:
        return [Problem("Forbidden", "spec", detail=POD_UPDATE)]
    return []
