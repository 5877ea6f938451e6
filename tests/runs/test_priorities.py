"""The six priority classes: names, order, the tier of an identity, the cluster objects."""

from __future__ import annotations

import pytest

from runs import priorities
from runs.models import IdentityKind

ORDER = [
    "simrun-owner",
    "simrun-person",
    "simrun-agent",
    "simrun-owner-extra",
    "simrun-person-extra",
    "simrun-agent-extra",
]


def test_the_six_classes_rank_owner_person_agent_and_every_base_above_every_extra() -> None:
    values = {c.name: c.value for c in priorities.classes()}
    assert sorted(values, key=lambda name: -values[name]) == ORDER
    assert len(set(values.values())) == 6


@pytest.mark.parametrize(
    ("kind", "base", "extra"),
    [
        (IdentityKind.OWNER, "simrun-owner", "simrun-owner-extra"),
        (IdentityKind.PERSON, "simrun-person", "simrun-person-extra"),
        (IdentityKind.AGENT, "simrun-agent", "simrun-agent-extra"),
    ],
)
def test_the_kind_of_an_identity_decides_its_tier_and_classes(
    kind: str, base: str, extra: str
) -> None:
    """S2: the token's identity decides the priority of its runs."""
    tier = priorities.tier_of(kind)
    assert (priorities.base_class(tier), priorities.extra_class(tier)) == (base, extra)


def test_an_unknown_kind_is_no_tier() -> None:
    with pytest.raises(ValueError, match="unknown tier 'robot'"):
        priorities.tier_of("robot")


def test_every_class_is_a_workload_priority_class_and_a_priority_class_of_one_value() -> None:
    objects = priorities.manifests()
    kueue = {
        o["metadata"]["name"]: o["value"] for o in objects if o["kind"] == "WorkloadPriorityClass"
    }
    kube = {o["metadata"]["name"]: o["value"] for o in objects if o["kind"] == "PriorityClass"}
    assert kueue == kube == {c.name: c.value for c in priorities.classes()}
    assert len(objects) == 12
    assert {o["apiVersion"] for o in objects} == {
        priorities.KUEUE_API_VERSION,
        priorities.SCHEDULING_API_VERSION,
    }
    assert not any(o.get("globalDefault") for o in objects)


def test_priority_values_fit_a_user_priority_class() -> None:
    # Kubernetes reserves values above one billion for system classes.
    assert all(0 < c.value <= 1_000_000_000 for c in priorities.classes())


def test_the_value_of_a_class_is_found_by_name() -> None:
    assert priorities.value_of("simrun-agent") > priorities.value_of("simrun-owner-extra")
    with pytest.raises(KeyError):
        priorities.value_of("simrun-nobody")
