"""What a workflow would reuse if submitted now, and why not more, without submitting it.

The keys are made as the submission will make them (`runs.reuse_plans`): the environment the
model's snapshot names, the plugin's digest, the settings as the type's model keys them, the
units the plugin lists. The units and their keys are written to a temporary directory of the
store, removed before the answer; nothing else is written.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.utils import timezone

from runs.environments import model_environment
from runs.local_packages import LocalPackageRefused
from runs.models import Identity, Run, Snapshot
from runs.planned_tasks import types_for_model
from runs.plugin_metadata import SERVICE_ENVIRONMENT
from runs.refusals import SubmissionRefused
from runs.reuse_plans import (
    TaskToKey,
    count_reused,
    explain,
    key_tasks,
    list_units,
    match_output,
    reuse_split_task,
)
from runs.store import local_package_rules, store
from runs.task_types import COMMAND, Types
from runs.type_refusals import SettingsInvalid, TypeUnavailable
from runs.validation import load, load_data
from runs.workflow import Workflow, WorkflowError, WorkflowInvalid
from simrun_harness.reuse import digest


@dataclass(frozen=True)
class TaskReusePreview:
    task_id: str
    type: str
    key: str
    units: int
    reused: int
    sources: dict[str, int]
    note: dict[str, Any]


@dataclass(frozen=True)
class ReusePreview:
    tasks: list[TaskReusePreview] = field(default_factory=list)

    @property
    def reused(self) -> int:
        return sum(t.reused for t in self.tasks)

    @property
    def units(self) -> int:
        return sum(t.units for t in self.tasks)

    @property
    def text(self) -> str:
        return f"would reuse {self.reused} of {self.units} units"


def preview_reuse(
    *,
    identity: Identity,
    workflow: str | dict[str, Any] | Workflow,
    sources: list[str],
    reuse: bool = True,
    resume_from: str | None = None,
) -> ReusePreview:
    """Per task: its key, its units, how many a submission now would reuse (from which
    runs) and why not more. Raises WorkflowInvalid and SubmissionRefused as a submission
    would."""
    model = _model_of(sources, resume_from)
    types, environment = _types_and_environment(model)
    if isinstance(workflow, str):
        spec = load(workflow, types=types)
    elif isinstance(workflow, Workflow):
        spec = workflow
    else:
        spec = load_data(workflow, types=types)
    tasks = [
        TaskToKey(
            task_id=t.id,
            type=t.type,
            splittable=types[t.type].splittable,
            settings=t.settings,
            inputs=dict(t.inputs),
        )
        for t in spec.order()
    ]
    try:
        parts = key_tasks(
            types=types, environment=environment, sources=sources, tasks=tasks, unique="preview"
        )
    except (SettingsInvalid, TypeUnavailable) as exc:
        raise WorkflowInvalid([WorkflowError("settings", str(exc))]) from None
    run = Run(
        id="(preview)",
        name=spec.name,
        reuse=reuse,
        resume_from=resume_from or "",
        created_at=timezone.now(),
    )
    store().root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".reuse-preview-", dir=store().root) as tmp:
        return ReusePreview(
            [
                _task_preview(run, task, parts[task.task_id], types, model, Path(tmp))
                for task in tasks
            ]
        )


def _model_of(sources: list[str], resume_from: str | None) -> str | None:
    """The model's snapshot digest (the first source); SubmissionRefused for an unknown
    snapshot or an unknown run to resume."""
    known = set(Snapshot.objects.filter(digest__in=sources).values_list("digest", flat=True))
    missing = [d for d in sources if d not in known]
    if missing:
        raise SubmissionRefused(f"sources: unknown snapshot(s) {', '.join(missing)}")
    if resume_from and not Run.objects.filter(pk=resume_from).exists():
        raise SubmissionRefused(f"resume_from: no run {resume_from!r} (--resume RUN)")
    return sources[0] if sources else None


def _types_and_environment(model: str | None) -> tuple[Types, str]:
    """The types a run of `model` is checked with and its environment; SubmissionRefused
    for a model whose local packages cannot be installed, as a submission is refused."""
    if not model:
        return types_for_model(None), SERVICE_ENVIRONMENT
    try:
        types = types_for_model(model)
        ref, _ = model_environment(store().snapshot(model), local_rules=local_package_rules())
    except LocalPackageRefused as exc:
        raise SubmissionRefused(f"sources: the model's {exc}") from None
    return types, ref


def _task_preview(
    run: Run, task: TaskToKey, parts: dict[str, Any], types: Types, model: str | None, tmp: Path
) -> TaskReusePreview:
    """One task's preview; its units and their keys written under `tmp`."""
    key = digest(parts)
    units: int = 1
    reused: dict[str, Any] = {}
    if task.splittable:
        directory = tmp / task.task_id
        units_file, _ = list_units(types, task, model, directory)
        units, _, reused = reuse_split_task(
            run_id=run.id,
            resume_from=run.resume_from,
            key=key,
            units_file=units_file,
            directory=directory,
            reuse=run.reuse,
        )
    elif run.reuse and task.type != COMMAND:
        _, reused = match_output(run_id=run.id, resume_from=run.resume_from, key=key)
    note = explain(run=run, task=task, mine=parts, reused=reused, units=units)
    counts = {source: count_reused(value) for source, value in reused.items()}
    return TaskReusePreview(
        task_id=task.task_id,
        type=task.type,
        key=key,
        units=units,
        reused=sum(counts.values()),
        sources=counts,
        note=note,
    )
