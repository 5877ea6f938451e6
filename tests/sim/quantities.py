"""Resource quantities and what a pod requests, as the scheduler and Kueue count it.

`pod_requests` follows `PodRequests` of `k8s.io/component-helpers/resource`: the containers
together, or an init container alone when it requests more, where a sidecar (an init
container with `restartPolicy: Always`) counts with the containers and with every init
container after it; plus the pod's overhead (seed 000, B11; seed 003, K5).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from kubernetes.utils.quantity import parse_quantity

Amounts = dict[str, Decimal]


@functools.lru_cache(maxsize=4096)
def quantity(value: str | int | float) -> Decimal:
    """A Kubernetes quantity (`500m`, `3Gi`, `2.5Gi`, 4) as a Decimal in base units."""
    return Decimal(parse_quantity(value))


def amounts(values: Mapping[str, str | int | float] | None) -> Amounts:
    """A map of resource names to quantities, parsed."""
    return {name: quantity(v) for name, v in (values or {}).items()}


def add(left: Mapping[str, Decimal], right: Mapping[str, Decimal]) -> Amounts:
    """The sum per resource."""
    out = dict(left)
    for name, value in right.items():
        out[name] = out.get(name, Decimal(0)) + value
    return out


def subtract(left: Mapping[str, Decimal], right: Mapping[str, Decimal]) -> Amounts:
    """`left` less `right`, per resource of `left`."""
    return {name: value - right.get(name, Decimal(0)) for name, value in left.items()}


def maximum(left: Mapping[str, Decimal], right: Mapping[str, Decimal]) -> Amounts:
    """The larger amount per resource."""
    out = dict(left)
    for name, value in right.items():
        out[name] = max(out.get(name, Decimal(0)), value)
    return out


def total(items: Iterable[Mapping[str, Decimal]]) -> Amounts:
    """The sum of many amounts."""
    out: Amounts = {}
    for item in items:
        out = add(out, item)
    return out


def fits(need: Mapping[str, Decimal], free: Mapping[str, Decimal]) -> bool:
    """Whether every requested amount is available (an unlisted resource has none)."""
    return all(value <= free.get(name, Decimal(0)) for name, value in need.items() if value > 0)


def short_of(need: Mapping[str, Decimal], free: Mapping[str, Decimal]) -> list[str]:
    """The resources of which `free` has less than `need`."""
    return [n for n, v in need.items() if v > 0 and v > free.get(n, Decimal(0))]


def container_requests(container: Mapping[str, Any]) -> Amounts:
    """A container's requests (the API server copies limits into missing requests)."""
    resources = container.get("resources") or {}
    return amounts({**(resources.get("limits") or {}), **(resources.get("requests") or {})})


_REQUESTS: dict[tuple[str, str], Amounts] = {}


def pod_requests(pod: Mapping[str, Any]) -> Amounts:
    """What a pod requests, as the scheduler counts it (see the module docstring)."""
    metadata = pod.get("metadata") or {}
    key = (metadata.get("uid", ""), metadata.get("resourceVersion", ""))
    if key[0] and key in _REQUESTS:
        return _REQUESTS[key]
    if len(_REQUESTS) > 20_000:
        _REQUESTS.clear()
    requests = _compute_requests(pod.get("spec") or {})
    if key[0]:
        _REQUESTS[key] = requests
    return requests


def _compute_requests(spec: Mapping[str, Any]) -> Amounts:
    requests = total(container_requests(c) for c in spec.get("containers") or [])
    sidecars: Amounts = {}
    init_max: Amounts = {}
    for container in spec.get("initContainers") or []:
        own = container_requests(container)
        if container.get("restartPolicy") == "Always":
            sidecars = add(sidecars, own)
            requests = add(requests, own)
            counted = sidecars
        else:
            counted = add(own, sidecars)
        init_max = maximum(init_max, counted)
    requests = maximum(requests, init_max)
    return add(requests, amounts(spec.get("overhead")))


def memory_limit(container: Mapping[str, Any]) -> int | None:
    """A container's memory limit in bytes, None without one."""
    limits = (container.get("resources") or {}).get("limits") or {}
    if "memory" not in limits:
        return None
    return int(quantity(limits["memory"]))


def render(value: Decimal) -> str:
    """A quantity for a status field: whole numbers plainly, fractions in milli-units."""
    if value == value.to_integral_value():
        return str(int(value))
    return f"{int(value * 1000)}m"
