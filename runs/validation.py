"""Validation beyond structure: every error of a workflow at once, one line each.

`task 'scan': settings.n_points: Input should be greater than 0` — the task, the location
(dotted, relative to the task) and what is wrong; with the line in the file where known.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from runs.task_types import TypeInfo, Types, as_types
from runs.type_refusals import SettingsInvalid, TypeUnavailable
from runs.workflow import (
    Lines,
    TaskSpec,
    Workflow,
    WorkflowError,
    WorkflowInvalid,
    dotted,
    find_cycle,
    input_path,
    input_task,
    line_of,
    structure_errors,
)
from runs.workflow_limits import check_data
from runs.workflow_text import parse_text


def load(text: str, *, types: Mapping[str, Any] | None = None) -> Workflow:
    """A valid workflow from YAML or JSON text; WorkflowInvalid with every error otherwise
    (WorkflowRefused, its kind, for text past a limit of `runs.workflow_text`)."""
    data, lines = parse_text(text)
    return _validated(data, types=types, lines=lines)


def load_data(data: Any, *, types: Mapping[str, Any] | None = None) -> Workflow:
    """A valid workflow from an object (checked against the same limits as text);
    WorkflowInvalid with every error otherwise."""
    check_data(data)
    return _validated(data, types=types, lines=Lines())


def _validated(data: Any, *, types: Mapping[str, Any] | None, lines: Lines) -> Workflow:
    if not isinstance(data, dict):
        raise WorkflowInvalid([WorkflowError("", "a workflow is a mapping with name and tasks")])
    try:
        workflow = Workflow.model_validate(data)
    except ValidationError as exc:
        raise WorkflowInvalid(structure_errors(exc, data, lines)) from None
    errors = semantic_errors(workflow, types=as_types(types), lines=lines)
    if errors:
        raise WorkflowInvalid(errors)
    return workflow


def errors_of(text: str, *, types: Mapping[str, Any] | None = None) -> list[WorkflowError]:
    """Every error of a workflow text; empty when it is valid."""
    try:
        load(text, types=types)
    except WorkflowInvalid as exc:
        return exc.errors
    return []


def semantic_errors(
    workflow: Workflow, *, types: Types, lines: Lines | None = None
) -> list[WorkflowError]:
    """Types, settings, inputs, ports, duplicates and cycles of a structurally valid workflow.

    The settings are checked by each type's own model, in its plugin's environment (a plugin
    host, `runs.task_types`): the service imports no plugin."""
    lines = lines or Lines()
    errors: list[WorkflowError] = []
    counts = Counter(t.id for t in workflow.tasks)
    by_id = {t.id: t for t in workflow.tasks}
    for index, task in enumerate(workflow.tasks):
        at = ("tasks", index)

        def err(
            loc: tuple[str | int, ...], message: str, task_id: str = task.id, at: tuple = at
        ) -> None:
            errors.append(WorkflowError(dotted(loc), message, task_id, line_of(lines, at + loc)))

        if counts[task.id] > 1 and index != _first(workflow, task.id):
            err(("id",), f"duplicate task id (the first is task #{_first(workflow, task.id)})")
        try:
            info: TypeInfo | None = types[task.type]
        except TypeUnavailable as exc:  # unknown, or its plugin failed to load
            info = None
            err(("type",), str(exc))
        if info is not None:
            for loc, message in settings_problems(types, task.type, task.settings):
                err(("settings", *loc), message)
            _port_errors(task, info, types, by_id, err)
            if not info.splittable and task.split not in (None, "none", "auto", 1):
                err(("split",), f"type {task.type!r} runs once; split must be none, auto or 1")
        if task.id in task.dependencies():
            err(("inputs",), "a task cannot read its own output")
    cycle = find_cycle(workflow)
    if cycle:
        errors.append(
            WorkflowError("tasks", f"cycle: {' -> '.join(cycle)}", None, line_of(lines, ("tasks",)))
        )
    return errors


def settings_problems(
    types: Types, type_name: str, settings: dict[str, Any]
) -> list[tuple[tuple, str]]:
    """(location, message) for every unknown and every invalid setting of a task; none when
    the type's model takes them."""
    try:
        types.check(type_name, settings)
    except SettingsInvalid as exc:
        return [(tuple(loc), message) for loc, message in exc.problems]
    except TypeUnavailable as exc:  # its host failed while checking
        return [((), str(exc))]
    return []


def _port_errors(
    task: TaskSpec, info: TypeInfo, types: Mapping[str, TypeInfo], by_id: dict, err: Any
) -> None:
    for port, ref in task.inputs.items():
        if not info.any_port and port not in info.ports:
            takes = ", ".join(info.ports) or "no inputs"
            err(("inputs", port), f"type {task.type!r} has no input port {port!r} (takes: {takes})")
        source = by_id.get(input_task(ref))
        if source is None:
            err(("inputs", port), f"reads from task {input_task(ref)!r}, which does not exist")
            continue
        sub = input_path(ref)
        source_info = types.get(source.type)
        if sub and source_info is not None and source_info.outputs:
            part = sub.split("/", 1)[0]
            if part not in source_info.outputs:
                outs = ", ".join(source_info.outputs)
                err(("inputs", port), f"task {source.id!r} has no output {part!r} (has: {outs})")
        if ".." in sub.split("/") or sub.startswith("/"):
            err(("inputs", port), f"output path {sub!r} must stay inside the task's output")
    if not info.any_port:
        for port in info.ports:
            if port not in task.inputs:
                err(("inputs",), f"input port {port!r} is missing (type {task.type!r} needs it)")


def _first(workflow: Workflow, task_id: str) -> int:
    return next(i for i, t in enumerate(workflow.tasks) if t.id == task_id)
