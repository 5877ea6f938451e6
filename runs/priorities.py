"""The six priority classes of simrun: the one place that names them and gives their values.

The identity behind a token decides the tier of its runs: the owner, a person or an agent.
Every tier has a *base* class (coordinators, merges, unsplit tasks) and an *extra* class (the
extra workers of a split task). Every base class ranks above every extra class, so extra
workers only use servers nobody else needs and Kueue gives them back at once:

    simrun-owner > simrun-person > simrun-agent
        > simrun-owner-extra > simrun-person-extra > simrun-agent-extra

Each class exists twice on a cluster with the same value: as a Kueue WorkloadPriorityClass
(admission and preemption order) and as a Kubernetes PriorityClass (the scheduler's order).
The manifests of the pods and the deploy files both take names and values from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Tier = Literal["owner", "person", "agent"]
TIERS: tuple[Tier, ...] = ("owner", "person", "agent")
"""The tiers, highest first."""

PREFIX = "simrun"
KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta2"
SCHEDULING_API_VERSION = "scheduling.k8s.io/v1"

_BASE_VALUES: dict[Tier, int] = {"owner": 30000, "person": 20000, "agent": 10000}
_EXTRA_VALUES: dict[Tier, int] = {"owner": 3000, "person": 2000, "agent": 1000}


@dataclass(frozen=True)
class PriorityClass:
    """One class: its name, value, tier and whether it is for extra workers."""

    name: str
    value: int
    tier: Tier
    extra: bool

    @property
    def description(self) -> str:
        role = "extra workers" if self.extra else "coordinators, merges and unsplit tasks"
        return f"simrun: {role} of runs by {_WHO[self.tier]}"


_WHO: dict[Tier, str] = {"owner": "the owner", "person": "a person", "agent": "an agent"}


def base_class(tier: str) -> str:
    """The name of the base class of a tier, e.g. `simrun-person`."""
    return f"{PREFIX}-{_tier(tier)}"


def extra_class(tier: str) -> str:
    """The name of the extra class of a tier, e.g. `simrun-person-extra`."""
    return f"{PREFIX}-{_tier(tier)}-extra"


def tier_of(kind: str) -> Tier:
    """S2: the tier of an identity of `kind` (owner, person or agent); ValueError otherwise.

    An agent's runs are agent runs, below every person's, whoever it acts for.
    """
    return _tier(kind)


def _tier(value: str) -> Tier:
    for tier in TIERS:
        if value == tier:
            return tier
    raise ValueError(f"unknown tier {value!r}: expected one of {', '.join(TIERS)}")


def classes() -> list[PriorityClass]:
    """The six classes, highest value first."""
    found = [PriorityClass(base_class(t), _BASE_VALUES[t], t, False) for t in TIERS]
    found += [PriorityClass(extra_class(t), _EXTRA_VALUES[t], t, True) for t in TIERS]
    return sorted(found, key=lambda c: -c.value)


def value_of(name: str) -> int:
    """The value of a class by name; KeyError for a name that is not one of the six."""
    for found in classes():
        if found.name == name:
            return found.value
    raise KeyError(name)


def manifests() -> list[dict[str, Any]]:
    """The twelve objects a cluster needs: per class a Kueue WorkloadPriorityClass and a
    Kubernetes PriorityClass of the same name and value, as plain dicts ready for YAML.

    None is the global default: a pod without a class is no pod of simrun's.
    """
    objects: list[dict[str, Any]] = []
    for found in classes():
        labels = {"app.kubernetes.io/part-of": "simrun", "simrun/tier": found.tier}
        objects.append(
            {
                "apiVersion": KUEUE_API_VERSION,
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": found.name, "labels": dict(labels)},
                "value": found.value,
                "description": found.description,
            }
        )
        objects.append(
            {
                "apiVersion": SCHEDULING_API_VERSION,
                "kind": "PriorityClass",
                "metadata": {"name": found.name, "labels": dict(labels)},
                "value": found.value,
                "globalDefault": False,
                "preemptionPolicy": "PreemptLowerPriority",
                "description": found.description,
            }
        )
    return objects
