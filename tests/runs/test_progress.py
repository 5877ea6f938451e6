"""A run's progress from its tasks' states and ledgers (S7), as plain values."""

from __future__ import annotations

from pathlib import Path

import pytest

from runs.models import Task
from runs.selectors.progress import UNFINISHED_TASK_MAX, TaskProgress, run_progress, task_progress
from runs.store import task_paths
from simrun_harness.ledger import Holder
from simrun_harness.ledger_creation import create_ledger
from simrun_harness.ledger_reads import LedgerCounts
from tests import factories


def task(state: str, done: int | None = None, total: int = 4) -> TaskProgress:
    ledger = None if done is None else LedgerCounts(total - done, 0, done, total)
    return TaskProgress(task_id="t", state=state, counts=ledger, first=None, last=None)


def test_a_live_task_whose_every_unit_is_done_stays_below_one() -> None:
    """S7: a task with a ledger counts its share of units done, capped below 1 while it is
    not over (its merge may still be running)."""
    assert task("running", done=2).fraction == 0.5
    assert task("running", done=4).fraction == UNFINISHED_TASK_MAX < 1
    assert run_progress([task("running", done=4)]) < 1


def test_an_ended_task_counts_whole_and_others_nothing() -> None:
    """S7: a task done or skipped counts 1, one without a ledger (or an empty one) 0."""
    assert task("done").fraction == 1.0
    assert task("skipped", done=1).fraction == 1.0
    assert task("running").fraction == 0.0
    assert task("queued", done=0, total=0).fraction == 0.0


def test_a_runs_progress_is_the_mean_over_its_tasks_and_one_only_when_all_are_over() -> None:
    """S7: the mean over tasks; 1 only once every task is over; 0 for no task."""
    assert run_progress([task("done"), task("running", done=1), task("waiting")]) == 1.25 / 3
    assert run_progress([task("done"), task("running", done=4)]) < 1
    assert run_progress([task("done"), task("skipped")]) == 1.0
    assert run_progress([]) == 0.0


@pytest.mark.django_db
def test_a_split_task_before_its_ledger_counts_the_units_planned_at_submission(
    store: Path,
) -> None:
    """S6: a running split task whose coordinator has not made the ledger yet reads 0 of the
    units planned at submission (0/25, not 0/1); once the ledger exists, its counts."""
    run = factories.run()
    row = Task.objects.create(
        run=run, task_id="scan", position=0, type="sleep", splittable=True, units_total=25
    )
    assert task_progress(row).counts == LedgerCounts(pending=25, claimed=0, done=0, total=25)
    create_ledger(task_paths(run.id, "scan"), list(range(3)), Holder("scan-w0", 0))
    assert task_progress(row).counts == LedgerCounts(pending=3, claimed=0, done=0, total=3)
