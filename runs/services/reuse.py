"""Deciding, at submission, which units of a run reuse the outputs of earlier runs.

Once the environment is known (`submit_run`), every task gets its key (`runs.reuse`) made in
the model's environment (the settings as its type's model keys them, the plugin's digest),
a split task's units their keys (`unit-keys.txt` in the task directory, one a line: the
store's index of what a unit is), and the tasks whose key an earlier task of the store shares
find there the units already done (its ledger's `done/`, whose outputs are in place) with the
same unit key. What is found is written to the task's `reuse.json` for the harness, which
links the outputs before any unit is claimed, and recorded in the task's row (`Task.reused`:
run → ranges of units; `Task.reuse_note`: why not more, `runs.reuse_plans.explain`).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from django.db import transaction

from runs.models import Run, Task
from runs.planned_tasks import max_units, types_for_model
from runs.plugin_metadata import environment_at, plugins_of, service_environment
from runs.ports import Backend
from runs.refusals import SubmissionRefused
from runs.reuse_plans import (
    KEY_PARTS_FILE,
    TaskReuse,
    TaskToKey,
    explain,
    key_tasks,
    list_units,
    match_output,
    reuse_split_task,
)
from runs.services.image_units import ImageTypes
from runs.store import store, task_paths
from runs.task_types import (
    COMMAND,
    SettingsInvalid,
    Types,
    TypeUnavailable,
    plugin_identity,
    registry,
    units_question,
)
from runs.workflow import WorkflowInvalid
from simrun_harness.reuse import REUSE_FILE, UNITS_LIST_FILE, digest

log = logging.getLogger(__name__)


def check_resume(*, reuse: bool, resume_from: str | None) -> None:
    """SubmissionRefused unless `resume_from` (if given) names a run and reuse is on."""
    if not resume_from:
        return
    if not reuse:
        raise SubmissionRefused(
            "resume_from: a resumed run reuses done units; it cannot be combined with no reuse"
            " (--resume with --no-reuse)"
        )
    if not Run.objects.filter(pk=resume_from).exists():
        raise SubmissionRefused(f"resume_from: no run {resume_from!r} (--resume RUN)")


def _write_json(path: Path, value: Any) -> None:
    """Write through a temporary name, so a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, path)


def types_of_run(run: Run, environment: str, backend: Backend | None = None) -> Types:
    """The types of the environment the run's pods run in: its virtual environment here once
    built; an image on a cluster, asked through `backend` (runs/services/image_units.py);
    else (the service's environment, or no backend to ask) the service's own."""
    if environment == "service" or not run.sources:
        return registry()
    built = environment_at(store().environments, environment)
    if built is not None:
        return registry(built)
    if backend is not None:
        return ImageTypes(backend, environment)
    return types_for_model(run.sources[0])


def _ask_image_first(run: Run, tasks: list[Task], types: ImageTypes) -> None:
    """Every question of the run to the image in one pod: its types' code, its units."""
    model_dir = store().snapshot(run.sources[0])  # an image is a model's: the run has one
    questions = []
    for task in tasks:
        if task.splittable and task.type != COMMAND:
            out = task_paths(run.id, task.task_id).root / UNITS_LIST_FILE  # made by create_run
            questions.append(
                units_question(task.type, task.settings, task.task_id, model_dir, max_units(), out)
            )
    try:
        types.prepare({task.type for task in tasks}, questions)
    except TypeUnavailable as exc:
        raise SubmissionRefused(str(exc)) from None


def copies_differ(
    types: Types, names: set[str], local_packages: Sequence[Mapping[str, str]] = ()
) -> dict[str, str]:
    """Per type, a note when the service's own copy of its plugin is not the code the run's
    environment has (the service checked the settings with its copy before the environment
    was built, or on a cluster, where the environment is an image: then its copy is compared
    with the image's as the image's plugin host named it, `ImageTypes`, or, with no backend
    to ask, with the model's local package of that name, `local_packages`, by their files'
    digests)."""
    if isinstance(types, ImageTypes):
        return types.copies_differ(names)
    if types.env.name == "service":
        return _image_copies_differ(names, local_packages)
    service = plugins_of(service_environment())
    notes = {}
    for name in names - {COMMAND}:
        theirs = service.get(name)
        mine = types.plugins().get(name)
        if theirs and mine and theirs[0].digest != mine[0].digest:
            notes[name] = (
                f"the service's copy of {mine[0].label()} ({theirs[0].short_digest()}) differs "
                f"from the model environment's ({mine[0].short_digest()}): the settings were "
                "checked and the units listed again with the model environment's"
            )
    return notes


def _image_copies_differ(
    names: set[str], local_packages: Sequence[Mapping[str, str]]
) -> dict[str, str]:
    """The notes of `copies_differ` where the model's environment is not here to ask (an
    image): the service's copy of a plugin installed from a directory against the model's
    local package of the same name."""
    # each as `LocalPackage.identity` names it: both keys always there
    in_model = {_canonical(p["name"]): p["digest"] for p in local_packages}
    notes = {}
    for name in names - {COMMAND}:
        package, _, mine = plugin_identity(name)
        theirs = in_model.get(_canonical(package), "")
        if mine and theirs and mine != theirs:
            label = registry().origin(name)
            notes[name] = (
                f"the service's copy of {label} ({mine[:12]}) differs from the model "
                f"environment's ({theirs[:12]}): the settings were checked and the units "
                "listed with the service's copy, the pods run the model environment's"
            )
    return notes


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _task_to_key(task: Task) -> TaskToKey:
    return TaskToKey(
        task_id=task.task_id,
        type=task.type,
        splittable=task.splittable,
        settings=task.settings,
        inputs=task.inputs,
    )


def _refused(task_id: str, message: str) -> SubmissionRefused:
    return SubmissionRefused(f"task {task_id!r}: {message} (in the model's environment)")


def plan_reuse(
    *,
    run_id: str,
    environment: str,
    local_packages: Sequence[Mapping[str, str]] = (),
    backend: Backend | None = None,
) -> None:
    """Key every task and unit of a run in its environment and write what it reuses; once (a
    resumed submission finds the keys recorded and leaves them, as the pods may already read
    them). An environment that is not here (an image) is asked through `backend`.
    SubmissionRefused when the model's environment refuses a task's settings or units, or its
    plugin host gave no answers."""
    run = Run.objects.get(pk=run_id)
    tasks = list(run.tasks.order_by("position"))
    if any(task.key for task in tasks):
        return
    types = types_of_run(run, environment, backend)
    if isinstance(types, ImageTypes):
        _ask_image_first(run, tasks, types)
    keying = [_task_to_key(task) for task in tasks]
    try:
        parts = key_tasks(
            types=types,
            environment=environment,
            sources=list(run.sources),
            tasks=keying,
            unique=run.id,
        )
    except SettingsInvalid as exc:
        raise SubmissionRefused(f"settings: {exc} (in the model's environment)") from None
    except TypeUnavailable as exc:
        raise SubmissionRefused(str(exc)) from None
    notes = copies_differ(types, {t.type for t in tasks}, local_packages)
    results = {}
    for task, to_key in zip(tasks, keying, strict=True):
        results[task.pk] = _task_reuse(run, task, to_key, types, parts[task.task_id])
        if task.type in notes:
            results[task.pk].note["copies"] = notes[task.type]
    with transaction.atomic():
        for task in tasks:
            found = results[task.pk]
            values: dict[str, Any] = {
                "key": found.key,
                "reused": found.reused,
                "reuse_note": found.note,
            }
            if task.splittable and found.units != task.units_total:
                values["units_total"] = found.units
            Task.objects.filter(pk=task.pk).update(**values)


def _task_reuse(
    run: Run, task: Task, to_key: TaskToKey, types: Types, parts: dict[str, Any]
) -> TaskReuse:
    """Key one task (its units too), find what it reuses, write its files."""
    key = digest(parts)
    paths = task_paths(run.id, task.task_id)
    paths.root.mkdir(parents=True, exist_ok=True)
    _write_json(paths.root / KEY_PARTS_FILE, parts)
    result = TaskReuse(task_id=task.task_id, key=key, parts=parts, units=1)
    if task.splittable:
        model = run.sources[0] if run.sources else None
        try:
            units_file, _ = list_units(types, to_key, model, paths.root)
        except WorkflowInvalid as exc:
            raise _refused(task.task_id, exc.errors[0].message) from None
        result.units, result.plan, result.reused = reuse_split_task(
            run_id=run.id,
            resume_from=run.resume_from,
            key=key,
            units_file=units_file,
            directory=paths.root,
            reuse=run.reuse,
        )
    elif run.reuse and task.type != COMMAND:
        result.plan, result.reused = match_output(
            run_id=run.id, resume_from=run.resume_from, key=key
        )
    if result.plan:
        _write_json(paths.root / REUSE_FILE, result.plan)
    result.note = explain(
        run=run, task=to_key, mine=parts, reused=result.reused, units=result.units
    )
    return result
