"""Estimates: median unit time of past runs times the rounds of units over all processes (S5)."""

from __future__ import annotations

import json
from dataclasses import replace

from runs.estimates import TaskEstimate, estimate, rounds, unit_seconds
from runs.plans import ObservationValue, PodShape, TaskPlan
from tests import builders

PLAN = TaskPlan(
    pods=2,
    shape=PodShape(cores=4, memory_gb=4.5, processes=4, per_worker_gb=1.0, memory_base_gb=0.5),
    base_priority="simrun-person",
    extra_priority="simrun-person-extra",
    nodes=("a", "b"),
)


def attempt(run: str | None, seconds: float | None, units: int = 10) -> ObservationValue:
    return ObservationValue(run_id=run, units_done=units, unit_seconds_median=seconds)


HISTORY = [
    attempt("r1", 2.0),
    attempt("r1", 4.0),  # r1: median 3
    attempt("r2", 5.0),
    attempt("r3", 10.0),
    attempt("r3", 10.0),
    attempt("r3", 10.0),
]


def test_the_estimate_is_the_median_unit_time_of_past_runs_times_the_rounds() -> None:
    """S5: 20 units over 2 pods of 4 processes are 3 rounds of the median run's 5 s."""
    assert unit_seconds(HISTORY) == 5.0
    assert rounds(units=20, plan=PLAN) == 3
    assert estimate(units=20, plan=PLAN, history=HISTORY) == 15.0


def test_a_run_with_many_attempts_counts_once() -> None:
    """S5: r3's three attempts do not outvote r1 and r2."""
    assert unit_seconds([attempt("r1", 1.0), *[attempt("r2", 9.0)] * 5]) == 5.0


def test_units_that_fit_one_round_take_one_unit_time() -> None:
    assert estimate(units=8, plan=PLAN, history=HISTORY) == 5.0


def test_there_is_no_estimate_without_history() -> None:
    """S5: none without history."""
    assert estimate(units=20, plan=PLAN, history=[]) is None


def test_attempts_that_did_no_unit_teach_nothing() -> None:
    assert estimate(units=20, plan=PLAN, history=[attempt("r1", 7.0, units=0)]) is None
    assert estimate(units=20, plan=PLAN, history=[attempt("r1", None)]) is None


def test_there_is_no_estimate_without_units_or_for_an_unsplit_task() -> None:
    assert estimate(units=None, plan=PLAN, history=HISTORY) is None
    assert estimate(units=20, plan=PLAN, history=HISTORY, splittable=False) is None


def test_attempts_of_deleted_runs_count_as_runs_of_their_own() -> None:
    assert unit_seconds([attempt(None, 2.0), attempt(None, 4.0), attempt(None, 9.0)]) == 4.0


def test_a_task_estimate_round_trips_through_json() -> None:
    resources = replace(builders.resources(), source={"gpus": "hint"})
    value = TaskEstimate(resources=resources, plan=PLAN, seconds=15.0)
    assert TaskEstimate.from_json(json.loads(json.dumps(value.to_json()))) == value
