"""A run as a crate records it (runs/crates/record.py): rows of the database, files of the store.

Files are listed without following links (`simrun_harness.store_reads`): a link a task made is
not in the crate, nor what it points at. No token, password or service setting is read.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from django.conf import settings

from runs import environments, kept_environment
from runs.crates.record import (
    EnvironmentRecord,
    MadeFile,
    RunRecord,
    SnapshotRecord,
    StoredFile,
    TaskRecord,
    Tool,
    Who,
)
from runs.models import ResourceObservation, Run, Snapshot, Task
from runs.refusals import RunConflict
from runs.reuse_plans import stored_parts
from runs.store import local_package_rules
from runs.task_types import COMMAND, plugin_identity, registry
from simrun_harness.layout import MERGE_MARKER
from simrun_harness.store_walks import WalkLimits, walk_files

WORKFLOW_FILE = "workflow.json"


class RunNotExportable(RunConflict):
    """A run that cannot be exported yet (still live); the message says why."""


LIMIT_SETTINGS = {
    "entries": "SIMRUN_EXPORT_MAX_ENTRIES",
    "depth": "SIMRUN_EXPORT_MAX_DEPTH",
    "time": "SIMRUN_EXPORT_MAX_S",
}


def listing() -> WalkLimits:
    """How far the files of a crate are listed (SIMRUN_EXPORT_MAX_*): a crate holds every
    file or none."""
    return WalkLimits(
        entries=settings.SIMRUN_EXPORT_MAX_ENTRIES,
        depth=settings.SIMRUN_EXPORT_MAX_DEPTH,
        seconds=settings.SIMRUN_EXPORT_MAX_S,
    )


def _stored(
    prefix: str, store_dir: str, store_root: Path, skip: frozenset[str] = frozenset()
) -> list[StoredFile]:
    walk = walk_files(store_root, store_dir, listing())
    if walk.cut is not None:
        setting = LIMIT_SETTINGS.get(walk.cut, "SIMRUN_EXPORT_MAX_*")
        raise RunNotExportable(
            f"{store_dir}: more files than a crate lists (the listing stopped at its limit of "
            f"{walk.cut}, {setting}); a crate holds every file of a run or none"
        )
    return [
        StoredFile(f"{prefix}/{found.path}", f"{store_dir}/{found.path}", found.size)
        for found in walk.files
        if found.path not in skip
    ]


def _snapshot(digest: str, store_root: Path) -> SnapshotRecord:
    row = Snapshot.objects.filter(digest=digest).first()
    return SnapshotRecord(
        digest=digest,
        name=row.name if row else "",
        git_remote=row.git_remote if row else "",
        git_commit=row.git_commit if row else "",
        git_dirty=row.git_dirty if row else None,
        files=_stored(f"snapshots/{digest}", f"snapshots/{digest}", store_root),
    )


def _usage(task: Task) -> dict[str, float]:
    rows = list(ResourceObservation.objects.filter(run_id=task.run_id, task_id=task.task_id))
    usage: dict[str, float] = {}
    if not rows:
        return usage
    peaks = [r.peak_memory_gb for r in rows if r.peak_memory_gb is not None]
    times = [r.unit_seconds_median for r in rows if r.unit_seconds_median is not None]
    if peaks:
        usage["peak_memory_gb"] = round(max(peaks), 4)
    if times:
        usage["unit_seconds_median"] = round(statistics.median(times), 4)
    usage["attempts"] = float(len(rows))
    usage["oom_kills"] = float(sum(1 for r in rows if r.oom_killed))
    return usage


def _task(task: Task, run_dir: str, store_root: Path) -> TaskRecord:
    base = f"{run_dir}/tasks/{task.task_id}"
    return TaskRecord(
        task_id=task.task_id,
        position=task.position,
        type=task.type,
        splittable=task.splittable,
        settings=dict(task.settings),
        inputs=dict(task.inputs),
        dependencies=list(task.dependencies),
        state=task.state,
        message=task.message,
        started_at=task.started_at,
        ended_at=task.ended_at,
        units_total=task.units_total,
        reused={run: list(units) for run, units in (task.reused or {}).items()},
        resources=dict(task.resources or {}),
        usage=_usage(task),
        outputs=_stored(
            f"tasks/{task.task_id}/out", f"{base}/out", store_root, frozenset({MERGE_MARKER})
        ),
        logs=_stored(f"tasks/{task.task_id}/logs", f"{base}/logs", store_root),
    )


def _environment(run: Run, store_root: Path) -> EnvironmentRecord:
    ref = str((run.environment or {}).get("ref", "")) or environments.SERVICE_ENVIRONMENT
    context = kept_environment.kept_files(run.pk)
    if not context and run.sources and ref != environments.SERVICE_ENVIRONMENT:
        # a run submitted before runs kept their environment's files: as it would be built now
        model = store_root / "snapshots" / run.sources[0]
        context = {}
        if model.is_dir():
            context = environments.environment_context(model, local_rules=local_package_rules())
    files = [
        MadeFile(f"environment/{name}", context[name])
        for name in environments.KEPT_FILES
        if name in context
    ]
    return EnvironmentRecord(
        ref=ref,
        python=environments.python_version(),
        harness=environments.harness_identity(),
        files=files,
        local_packages=list((run.environment or {}).get("local_packages", [])),
    )


def _used_plugins(run: Run, tasks: list[Task]) -> dict[str, str]:
    """Each plugin type's version and code digest as the run used them (`<version>+<digest>`):
    what its tasks' keys digest, written at submission in the environment the pods ran in
    (`key.json`, runs/reuse_plans.py)."""
    found: dict[str, str] = {}
    for task in tasks:
        if task.type in found or task.type == COMMAND:
            continue
        parts = stored_parts(run.pk, task.task_id) or {}
        version = parts.get("version")
        if isinstance(version, str) and "+" in version:
            found[task.type] = version
    return found


def _tools(run: Run, tasks: list[Task]) -> dict[str, Tool]:
    """The run's task types: their plugin's package as installed here, its version and code
    digest as the run used them (as installed here for a run that kept no keys: one refused
    before its keys were made)."""
    found = {}
    known = registry()
    used = _used_plugins(run, tasks)
    for name in sorted({t.type for t in tasks}):
        package, version, digest = plugin_identity(name)
        recorded = used.get(name)
        if recorded is not None:
            version, _, digest = recorded.rpartition("+")
        cls = known.get(name)
        description = str(getattr(cls, "description", "") or "") if cls is not None else ""
        if name == COMMAND:
            description = description or "simrun's built-in command task"
        found[name] = Tool(
            name, package, version, digest, description, as_used=recorded is not None
        )
    return found


def run_record(run: Run) -> RunRecord:
    """What the crate of `run` records; RunNotExportable while the run is live."""
    if not run.ended:
        raise RunNotExportable(
            f"run {run.pk} is {run.state}: a crate records an ended run; export it once it ends"
        )
    store_root = Path(settings.SIMRUN_STORE)
    tasks = list(run.tasks.order_by("position"))
    workflow = json.dumps(run.workflow, indent=2, sort_keys=True).encode() + b"\n"
    who = run.owner
    return RunRecord(
        id=run.pk,
        name=run.name,
        description=str((run.workflow or {}).get("description", "")),
        state=run.state,
        message=run.message,
        group=run.group,
        created_at=run.created_at,
        started_at=run.started_at or run.submitted_at,
        ended_at=run.ended_at,
        who=Who(who.name, who.kind, who.acts_for.name if who.acts_for else ""),
        workflow=MadeFile(WORKFLOW_FILE, workflow),
        snapshots=[_snapshot(d, store_root) for d in run.sources],
        tasks=[_task(t, f"runs/{run.pk}", store_root) for t in tasks],
        tools=_tools(run, tasks),
        environment=_environment(run, store_root),
        simrun_version=plugin_identity(COMMAND)[1],
        from_crate=run.from_crate,
        resume_from=run.resume_from,
    )
