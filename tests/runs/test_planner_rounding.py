"""Cores in whole millicores whatever the float noise of a node's or a task's cores.

Gaps found by mutation testing (docs/testing.md): no value of the property tests reaches the
branch where a node's cores times 1000 rounds up to the next millicore, nor a task whose
cores per process times 1000 lands just above a whole millicore.
"""

from __future__ import annotations

import math

import pytest

from runs.planner import PlanRefused, plan_task
from runs.plans import Node, ResolvedResources, TaskPlan

# 0.117 as a float is just above 0.117; the float just below it times 1000 rounds up to 117
BELOW = math.nextafter(0.117, 0)


def plan(cores: float, per_process: float, memory_gb: float = 4, per_worker: float = 1) -> TaskPlan:
    need = ResolvedResources(
        cores_per_process=per_process,
        memory_base_gb=0,
        memory_per_worker_gb=per_worker,
        scratch_gb=0,
        gpus=0,
    )
    node = Node("n", cores, memory_gb)
    return plan_task(units=1, resources=need, nodes=[node], split="none", tier="person")


def test_a_node_just_below_a_millicore_offers_the_millicore_below() -> None:
    """A node of 0.11699…9 cores offers 116 millicores: a pod of 117 does not fit it."""
    assert BELOW * 1000 == 117 and BELOW < 0.117
    with pytest.raises(PlanRefused):
        plan(BELOW, 0.117)
    assert plan(BELOW, 0.116).shape.cores == 0.116


def test_a_task_asks_for_the_millicores_its_cores_per_process_make() -> None:
    """0.1 + 0.2 cores per process (0.30000000000000004) is 300 millicores, not 301 for the
    float noise above it; even none asks for one millicore."""
    assert plan(0.3, 0.1 + 0.2).shape.cores == 0.3
    assert plan(1, 0.0).shape.cores == 0.001


def test_a_node_with_no_cores_or_no_memory_left_holds_no_pod() -> None:
    """A node whose capacity runs have taken whole offers nothing, not one millicore or one
    1/32 GiB: even the smallest pod is refused there."""
    assert plan(1, 0.001, memory_gb=1 / 32, per_worker=1 / 32).shape.cores == 0.001
    with pytest.raises(PlanRefused):
        plan(0, 0.001, memory_gb=1 / 32, per_worker=1 / 32)
    with pytest.raises(PlanRefused):
        plan(1, 0.001, memory_gb=0, per_worker=1 / 32)
