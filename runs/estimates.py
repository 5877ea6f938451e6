"""How long a split task will take, from how long units took in earlier runs (S5).

seconds = median unit time of past runs * rounds, where rounds = ceil(units / processes of
all the planned pods). A past run's unit time is the median over its attempts of their
median unit time, so a run with many attempts counts once. None without history, without a
known number of units, or for an unsplit task.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from runs.plans import ObservationValue, ResolvedResources, TaskPlan


@dataclass(frozen=True)
class TaskEstimate:
    """What a submission answers per task: resources, plan and expected seconds."""

    resources: ResolvedResources
    plan: TaskPlan
    seconds: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "resources": self.resources.to_json(),
            "plan": self.plan.to_json(),
            "seconds": self.seconds,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TaskEstimate:
        return cls(
            resources=ResolvedResources.from_json(data["resources"]),
            plan=TaskPlan.from_json(data["plan"]),
            seconds=data.get("seconds"),
        )


def unit_seconds(history: Sequence[ObservationValue]) -> float | None:
    """The median over past runs of each run's median unit time; None without any."""
    by_run: dict[str, list[float]] = {}
    for index, observation in enumerate(history):
        if observation.unit_seconds_median is None or observation.units_done <= 0:
            continue
        key = observation.run_id if observation.run_id is not None else f"#{index}"
        by_run.setdefault(key, []).append(observation.unit_seconds_median)
    if not by_run:
        return None
    return statistics.median(statistics.median(times) for times in by_run.values())


def rounds(*, units: int, plan: TaskPlan) -> int:
    """How many units each process of the planned pods computes, at most."""
    return math.ceil(units / max(1, plan.processes))


def estimate(
    *,
    units: int | None,
    plan: TaskPlan,
    history: Sequence[ObservationValue],
    splittable: bool = True,
) -> float | None:
    """S5: the expected seconds of a split task's units, None without history or units."""
    if not splittable or units is None or units <= 0:
        return None
    per_unit = unit_seconds(history)
    if per_unit is None:
        return None
    return per_unit * rounds(units=units, plan=plan)
