"""Runs in the states the API shows: split tasks with ledgers, progress lines and reports.

Written with the harness's own ledger, progress writer and report writer, the same code the
pods run, so the API reads exactly what pods leave in the store.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from runs.models import Identity, Run, Task
from runs.store import task_paths
from simrun_harness.ledger import Holder, Ledger
from simrun_harness.ledger_creation import create_ledger
from simrun_harness.progress import ProgressWriter
from simrun_harness.report import WorkerReport, write_report
from tests import factories

SCAN = "scan"


def split_run(*, by: Identity, units: int = 6, state: str = "running", **fields: Any) -> Run:
    """A run whose one task `scan` (type sleep) splits into `units` units."""
    workflow = {
        "name": "sweep",
        "tasks": [{"id": SCAN, "type": "sleep", "settings": {"units": units}}],
    }
    run = factories.run(by=by, state=state, name="sweep", workflow=workflow, **fields)
    Task.objects.filter(run=run).delete()
    Task.objects.create(
        run=run,
        task_id=SCAN,
        position=0,
        type="sleep",
        splittable=True,
        settings={"units": units},
        units_total=units,
        state={"running": "running", "queued": "queued", "submitting": "waiting"}.get(
            state, "done"
        ),
    )
    create_ledger(task_paths(run.id, SCAN), list(range(units)), Holder(f"{SCAN}-w0", 0))
    return run


def work(run: Run, worker: str, *, attempt: int = 0, done: int = 0, hold: int = 0) -> list[str]:
    """`worker` computes `done` units (a progress line each), then claims `hold` more."""
    paths = task_paths(run.id, SCAN)
    ledger = Ledger(paths, Holder(worker, attempt))
    ledger.heartbeat()
    progress = ProgressWriter(paths.progress, worker)
    finished = []
    try:
        for _ in range(done):
            unit = ledger.claim()
            assert unit is not None
            assert ledger.commit(unit)
            progress.unit_done(unit, 0.5, 0.1)
            finished.append(unit)
        for _ in range(hold):
            assert ledger.claim() is not None
    finally:
        progress.close()
    return finished


def report(run: Run, worker: str, *, attempt: int = 0, **fields: Any) -> WorkerReport:
    """Write the report of one attempt of a worker of `scan`."""
    now = datetime.now(UTC)
    values: dict[str, Any] = {
        "task": SCAN,
        "worker": worker,
        "role": "base" if worker.endswith("-w0") else "extra",
        "attempt": attempt,
        "node": "node-a",
        "processes": 2,
        "units_done": 0,
        "peak_memory_gb": 0.75,
        "memory_limit_gb": 1.5,
        "exit_code": 0,
        "started_at": now,
        "ended_at": now,
    }
    values.update(fields)
    written = WorkerReport(**values)
    write_report(task_paths(run.id, SCAN).report(worker, attempt), written)
    return written
