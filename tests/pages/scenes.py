"""Runs as the pages show them: records from the factories, files written into the store.

A *scan run* has a split task `scan` (6 units, two workers, four units done, one claimed)
and an unsplit `summary` reading it; its store holds the ledger, progress lines, a report
with memory figures, a kept log and an output file, as the harness and controller write them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from runs.models import Identity, Run, Task
from runs.store import task_paths
from simrun_harness.ledger import Holder, Ledger
from simrun_harness.ledger_creation import create_ledger
from simrun_harness.progress import ProgressWriter
from simrun_harness.report import UnitSeconds, WorkerReport, write_report
from tests import factories

SCAN_UNITS = 6
LOG_LINE = "worker scan-w0 computed unit u000003"


def scan_run(*, by: Identity | None = None, state: str = "running", **fields: Any) -> Run:
    """A run of `scan` (split, running) → `summary` (waiting), with its files in the store."""
    by = by or factories.person()
    workflow = {
        "name": "scan-study",
        "tasks": [
            {"id": "scan", "type": "sleep", "settings": {"units": SCAN_UNITS, "seconds": 0.1}},
            {
                "id": "summary",
                "type": "command",
                "settings": {"args": ["true"]},
                "inputs": {"scan": "scan"},
            },
        ],
    }
    run = Run(
        name="scan-study",
        owner=by,
        principal=by.principal,
        tier=by.kind,
        workflow=workflow,
        state=state,
        group=fields.pop("group", "study-a"),
        pods={
            "scan-w0": {"phase": "running", "attempts": 1, "node": "local", "exit_code": None},
            "scan-w1": {"phase": "running", "attempts": 2, "node": "local", "exit_code": None},
        },
        **fields,
    )
    run.workflow_name = f"simrun-{run.id}"
    run.save()
    Task.objects.create(
        run=run,
        task_id="scan",
        position=0,
        type="sleep",
        splittable=True,
        settings={"units": SCAN_UNITS, "seconds": 0.1},
        units_total=SCAN_UNITS,
        state="running" if state == "running" else "done",
    )
    Task.objects.create(
        run=run,
        task_id="summary",
        position=1,
        type="command",
        settings={"args": ["true"]},
        inputs={"scan": "scan"},
        dependencies=["scan"],
        state="waiting" if state == "running" else "done",
    )
    _write_scan_files(run)
    return run


def _write_scan_files(run: Run) -> None:
    paths = task_paths(run.id, "scan")
    create_ledger(paths, list(range(SCAN_UNITS)), Holder("scan-w0", 0))
    for worker, attempt, take in (("scan-w0", 0, 2), ("scan-w1", 1, 2)):
        ledger = Ledger(paths, Holder(worker, attempt))
        writer = ProgressWriter(paths.progress, worker)
        for _ in range(take):
            unit = ledger.claim()
            assert unit is not None
            ledger.commit(unit)
            writer.unit_done(unit, 0.1, 0.05)
        writer.close()
    assert Ledger(paths, Holder("scan-w1", 1)).claim() is not None  # one held now
    start = datetime.now(UTC) - timedelta(minutes=2)
    write_report(
        paths.report("scan-w0", 0),
        WorkerReport(
            task="scan",
            worker="scan-w0",
            role="base",
            attempt=0,
            node="local",
            processes=2,
            units_done=2,
            unit_seconds=UnitSeconds.of([0.1, 0.1]),
            peak_memory_gb=0.75,
            memory_limit_gb=1.5,
            exit_code=0,
            started_at=start,
            ended_at=start + timedelta(minutes=1),
        ),
    )
    paths.logs.mkdir(parents=True, exist_ok=True)
    (paths.logs / "scan-w0-0.log").write_text(f"starting\n{LOG_LINE}\n")
    paths.out.mkdir(parents=True, exist_ok=True)
    (paths.out / "table.csv").write_text("point,value\n0,1.5\n")


def one_more_unit_done(run: Run, worker: str = "scan-w0", *, peak_gb: float = 0.05) -> None:
    """`worker` computes the pending unit of a scan run's `scan`, as the harness does."""
    paths = task_paths(run.id, "scan")
    ledger = Ledger(paths, Holder(worker, 0))
    unit = ledger.claim()
    assert unit is not None, "no unit is pending"
    ledger.commit(unit)
    writer = ProgressWriter(paths.progress, worker)
    writer.unit_done(unit, 0.1, peak_gb)
    writer.close()
