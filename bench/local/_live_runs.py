"""The live runs of the tick benchmark (`reconcile_tick.py`): cloned from one run the real
submission made, in the database and in the local backend's files.

Each is what a running split scan looks like to the controller: a Run row (`running`) with its
Task row (`running`, the real planner's plan: coordinator, one extra worker, a merge), and in
the run store the launch, the workflow's index entry and a running attempt of the
coordinator and of the extra worker whose supervisor and pod are the benchmark's one
long-sleeping process, the merge waiting.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Template:
    """What the live runs are cloned from: one run as the real submission made it."""

    run: dict[str, Any]
    task: dict[str, Any]
    launch: Any


def template_run() -> Template:
    """One run made by the real submission path (its Celery message goes to a dead queue),
    kept as plain values; the run itself is deleted, so only the clones are live."""
    from runs.backends import backend
    from runs.services.identities import create_identity
    from runs.services.submission import create_run, run_launch

    identity = create_identity(name="bench", kind="person", password="bench-pw-123")
    task = {"id": "scan", "type": "spin", "settings": {"units": 200, "seconds": 0.01}, "split": 2}
    run, _ = create_run(
        identity=identity,
        workflow={"name": "tick", "tasks": [task]},
        sources=[],
        nodes=backend().nodes(),
    )
    row = run.tasks.get()
    template = Template(
        run={
            "name": run.name,
            "owner": run.owner,
            "principal": run.principal,
            "tier": run.tier,
            "workflow": run.workflow,
        },
        task={
            k: getattr(row, k)
            for k in ("task_id", "type", "splittable", "settings", "resources", "plan")
        }
        | {"units_total": row.units_total},
        launch=run_launch(run, environment="service"),
    )
    run.delete()
    return template


def create_live_runs(template: Template, count: int, sleeper: Any) -> list[str]:
    """`count` running runs like `template`, in the database and in the backend's files."""
    from django.utils import timezone

    from cluster.local.atomic_files import create_json, write_json
    from cluster.local.attempts import ATTEMPT_FILE, CHILD_FILE, SUPERVISOR_FILE
    from cluster.local.run_files import RunFiles
    from runs.models import Run, Task
    from runs.models.run import new_run_id
    from runs.store import store

    now = timezone.now()
    launch = template.launch
    ids: set[str] = set()
    while len(ids) < count:
        ids.add(new_run_id())
    runs = [
        Run(
            id=run_id,
            **template.run,
            workflow_name=f"simrun-{run_id}",
            state="running",
            environment={"ref": "service"},
            submitted_at=now,
            started_at=now,
        )
        for run_id in sorted(ids)
    ]
    Run.objects.bulk_create(runs)
    Task.objects.bulk_create(
        Task(run=run, position=0, state="running", started_at=now, **template.task) for run in runs
    )
    state = store().root / "local"
    shape = template.task["plan"]["shape"]
    for run in runs:
        files = RunFiles(store().run(run.id))
        files.create(_replace(launch, run_id=run.id, workflow_name=run.workflow_name))
        create_json(state / "workflows" / f"{run.workflow_name}.json", {"run_id": run.id})
        store().run(run.id).task("scan").root.mkdir(parents=True, exist_ok=True)
        for pod in ("scan-w0", "scan-w1"):
            folder = files.pods / pod / "0"
            spec = {
                "attempt": 0,
                "args": ["simrun-worker"],
                "env": {},
                "cwd": str(folder),
                "cores": shape["cores"],
                "memory_limit_gb": shape["memory_gb"],
                "kill_after_s": 60,
                "poll_s": 0.1,
                "created": time.time(),
            }
            write_json(folder / ATTEMPT_FILE, spec)
            write_json(folder / SUPERVISOR_FILE, sleeper.to_json())
            write_json(folder / CHILD_FILE, sleeper.to_json())
    return [run.id for run in runs]


def _replace(launch: Any, **changes: Any) -> Any:
    import dataclasses

    return dataclasses.replace(launch, **changes)


def rewrite_records(ids: list[str]) -> None:
    """Every record written by another writer (its pods forgotten, its version bumped): the
    next tick derives and writes each again, as if its status had changed."""
    from django.db.models import F

    from runs.models import Run

    Run.objects.filter(pk__in=ids).update(pods={}, derived_from="", version=F("version") + 1)


def remove_runs(ids: list[str]) -> None:
    import shutil

    from runs.models import Run
    from runs.store import store

    Run.objects.filter(pk__in=ids).delete()
    for run_id in ids:
        name = f"simrun-{run_id}"
        (store().root / "local" / "workflows" / f"{name}.json").unlink(missing_ok=True)
        shutil.rmtree(store().run(run_id).root, ignore_errors=True)


def run_states() -> dict[str, Any]:
    """How many runs and tasks are in each state (the live runs stay running)."""
    from django.db.models import Count

    from runs.models import Run, Task

    runs = Run.objects.values_list("state").annotate(n=Count("pk"))
    tasks = Task.objects.values_list("state").annotate(n=Count("pk"))
    found = {f"run {s}": n for s, n in runs} | {f"task {s}": n for s, n in tasks}
    failed = Run.objects.filter(state="failed").values_list("message", flat=True).first()
    return found | ({"a failed run's message": failed} if failed else {})
