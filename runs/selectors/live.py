"""What the pages' streams read at each poll (runs/pages/live.py): a run's key of change, a
run with its details, a run and one of its tasks."""

from __future__ import annotations

from runs.models import Run, Task
from runs.selectors.runs_list import runs_with_details
from runs.store import task_paths
from simrun_harness.ledger_reads import counts


def run_key(run_id: str) -> tuple[int, int] | None:
    """The run's version and the units done over its ledgers: what changes when the run page
    shows something new; None once the run is deleted."""
    version = Run.objects.filter(pk=run_id).values_list("version", flat=True).first()
    if version is None:
        return None
    done = 0
    split = Task.objects.filter(run_id=run_id, splittable=True)
    for task_id in split.values_list("task_id", flat=True):
        ledger = counts(task_paths(run_id, task_id))
        done += ledger.done if ledger is not None else 0
    return version, done


def run_or_none(run_id: str) -> Run | None:
    """The run with its identities and tasks; None once it is deleted."""
    return runs_with_details().filter(pk=run_id).first()


def run_and_task(run_id: str, task_id: str) -> tuple[Run, Task] | None:
    """The run and its task; None once either is gone."""
    run = Run.objects.filter(pk=run_id).first()
    task = Task.objects.filter(run_id=run_id, task_id=task_id).first()
    return None if run is None or task is None else (run, task)
