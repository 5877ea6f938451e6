"""Finished runs to export, made as the controller leaves them (rows and store files), without
running pods: the example scan's two tasks, its model snapshot, outputs, logs and reports."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from runs.models import Identity, ResourceObservation, Run, Snapshot, Task
from runs.snapshots import snapshot_directory
from runs.store import store, task_paths
from tests import factories

ROOT = Path(__file__).resolve().parents[3]
MODEL = ROOT / "examples" / "models" / "repressilator"
SCAN_SETTINGS = {
    "parameters": {"alpha": {"start": 100, "stop": 300, "num": 3}, "n": [1.5, 2.0]},
    "t_end": 20,
    "n_points": 21,
    "chunk": 3,
}
WORKFLOW = {
    "name": "repressilator-ode-scan",
    "description": "ODE scan of the repressilator, then per-point statistics.",
    "tasks": [
        {"id": "scan", "type": "ode_scan", "settings": SCAN_SETTINGS},
        {"id": "summary", "type": "summary", "inputs": {"scan": "scan"}, "settings": {}},
    ],
}
START = datetime(2026, 11, 2, 9, 30, tzinfo=UTC)


def model_snapshot(by: Identity) -> str:
    info = snapshot_directory(store(), MODEL)
    Snapshot.objects.get_or_create(
        digest=info.digest,
        defaults={
            "name": "repressilator",
            "files": info.files,
            "bytes": info.bytes,
            "created_by": by,
        },
    )
    return info.digest


def finished_scan(
    *, by: Identity | None = None, state: str = "succeeded", model: bool = True, **fields: object
) -> Run:
    """A run of the example scan and its summary as it is once it succeeded; without `model`,
    a run of no sources (in simrun's own environment)."""
    by = by or factories.person()
    sources = [model_snapshot(by)] if model else []
    run = Run(
        name=WORKFLOW["name"],
        owner=by,
        principal=by.principal,
        tier=by.kind,
        workflow=WORKFLOW,
        sources=sources,
        state=state,
        environment={"ref": "f" * 64 if model else "service"},
        created_at=START,
        started_at=START + timedelta(seconds=2),
        ended_at=START + timedelta(seconds=40),
        message="" if state == "succeeded" else "task 'summary' failed: exit 3",
        **fields,
    )
    run.workflow_name = f"simrun-{run.id}"
    run.save()
    for position, (task_id, task_type, splittable) in enumerate(
        [("scan", "ode_scan", True), ("summary", "summary", False)]
    ):
        spec = WORKFLOW["tasks"][position]
        Task.objects.create(
            run=run,
            task_id=task_id,
            position=position,
            type=task_type,
            splittable=splittable,
            settings=spec["settings"],
            inputs=spec.get("inputs", {}),
            dependencies=list(spec.get("inputs", {}).values()),
            state="done",
            units_total=2 if splittable else None,
            started_at=START + timedelta(seconds=3 + 10 * position),
            ended_at=START + timedelta(seconds=12 + 10 * position),
        )
        paths = task_paths(run.pk, task_id)
        paths.out.mkdir(parents=True)
        (paths.out / f"{task_id}.json").write_text(json.dumps({"task": task_id, "points": 6}))
        (paths.out / ".simrun-merged").write_text("{}")
        paths.logs.mkdir(parents=True)
        (paths.logs / f"{task_id}-w0-0.log").write_text(f"{task_id}: 6 points\n")
        ResourceObservation.objects.create(
            task_type=task_type,
            run=run,
            task_id=task_id,
            worker=f"{task_id}-w0",
            peak_memory_gb=0.25,
            unit_seconds_median=0.5,
        )
    return run
