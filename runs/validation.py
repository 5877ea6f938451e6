"""Validation beyond structure: every error of a workflow at once, one line each.

`task 'scan': settings.n_points: Input should be greater than 0` — the task, the location
(dotted, relative to the task) and what is wrong; with the line in the file where known.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from runs.task_types import TypeUnavailable, origin, registry, takes_any_port
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
from simrun_harness.plugin import TaskType


def load(text: str, *, types: Mapping[str, type[TaskType]] | None = None) -> Workflow:
    """A valid workflow from YAML or JSON text; WorkflowInvalid with every error otherwise
    (WorkflowRefused, its kind, for text past a limit of `runs.workflow_text`)."""
    data, lines = parse_text(text)
    return _validated(data, types=types, lines=lines)


def load_data(data: Any, *, types: Mapping[str, type[TaskType]] | None = None) -> Workflow:
    """A valid workflow from an object (checked against the same limits as text);
    WorkflowInvalid with every error otherwise."""
    check_data(data)
    return _validated(data, types=types, lines=Lines())


def _validated(data: Any, *, types: Mapping[str, type[TaskType]] | None, lines: Lines) -> Workflow:
    if not isinstance(data, dict):
        raise WorkflowInvalid([WorkflowError("", "a workflow is a mapping with name and tasks")])
    try:
        workflow = Workflow.model_validate(data)
    except ValidationError as exc:
        raise WorkflowInvalid(structure_errors(exc, data, lines)) from None
    errors = semantic_errors(
        workflow, types=types if types is not None else registry(), lines=lines
    )
    if errors:
        raise WorkflowInvalid(errors)
    return workflow


def errors_of(
    text: str, *, types: Mapping[str, type[TaskType]] | None = None
) -> list[WorkflowError]:
    """Every error of a workflow text; empty when it is valid."""
    try:
        load(text, types=types)
    except WorkflowInvalid as exc:
        return exc.errors
    return []


def semantic_errors(
    workflow: Workflow, *, types: Mapping[str, type[TaskType]], lines: Lines | None = None
) -> list[WorkflowError]:
    """Types, settings, inputs, ports, duplicates and cycles of a structurally valid workflow."""
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
            cls: type[TaskType] | None = types[task.type]
        except TypeUnavailable as exc:  # unknown, or its plugin failed to import
            cls = None
            err(("type",), str(exc))
        except KeyError:
            cls = None
            err(("type",), f"unknown task type {task.type!r} (known: {', '.join(sorted(types))})")
        if cls is not None:
            for loc, message in settings_errors(cls.settings_model, task.settings, task.type):
                err(("settings", *loc), message)
            _port_errors(task, cls, types, by_id, err)
            if not cls.splittable and task.split not in (None, "none", "auto", 1):
                err(("split",), f"type {task.type!r} runs once; split must be none, auto or 1")
        if task.id in task.dependencies():
            err(("inputs",), "a task cannot read its own output")
    cycle = find_cycle(workflow)
    if cycle:
        errors.append(
            WorkflowError("tasks", f"cycle: {' -> '.join(cycle)}", None, line_of(lines, ("tasks",)))
        )
    return errors


def settings_errors(
    model: type[BaseModel], settings: dict[str, Any], type_name: str = ""
) -> list[tuple[tuple, str]]:
    """(location, message) for every unknown and every invalid setting; an exception the
    settings model raises that is no validation error is one message naming its plugin."""
    problems: list[tuple[tuple, str]] = []
    unknown = unknown_settings(model, settings)
    for key in unknown:
        allowed = ", ".join(sorted(model.model_fields)) or "none"
        problems.append(((key,), f"unknown setting (allowed: {allowed})"))
    try:
        model.model_validate(settings)
    except ValidationError as exc:
        for e in exc.errors():
            if e["type"] == "extra_forbidden" and e["loc"] and e["loc"][0] in unknown:
                continue
            problems.append((tuple(e["loc"]), e["msg"]))
    except Exception as exc:  # a plugin's validator may raise anything: named, not raised
        problems.append(((), f"{type(exc).__name__}: {exc} (raised by {origin(type_name)})"))
    return problems


def unknown_settings(model: type[BaseModel], settings: dict[str, Any]) -> list[str]:
    """Keys that are no field of the model (by name or alias); none if it allows extras."""
    if model.model_config.get("extra") == "allow":
        return []
    names: set[str] = set()
    for name, field in model.model_fields.items():
        names.add(name)
        if field.alias:
            names.add(field.alias)
        if isinstance(field.validation_alias, str):
            names.add(field.validation_alias)
    return sorted(k for k in settings if k not in names)


def _port_errors(
    task: TaskSpec, cls: type[TaskType], types: Mapping, by_id: dict, err: Any
) -> None:
    for port, ref in task.inputs.items():
        if not takes_any_port(cls) and port not in cls.ports:
            takes = ", ".join(cls.ports) or "no inputs"
            err(("inputs", port), f"type {task.type!r} has no input port {port!r} (takes: {takes})")
        source = by_id.get(input_task(ref))
        if source is None:
            err(("inputs", port), f"reads from task {input_task(ref)!r}, which does not exist")
            continue
        sub = input_path(ref)
        source_cls = types.get(source.type)
        if sub and source_cls is not None and source_cls.outputs:
            part = sub.split("/", 1)[0]
            if part not in source_cls.outputs:
                outs = ", ".join(source_cls.outputs)
                err(("inputs", port), f"task {source.id!r} has no output {part!r} (has: {outs})")
        if ".." in sub.split("/") or sub.startswith("/"):
            err(("inputs", port), f"output path {sub!r} must stay inside the task's output")
    if not takes_any_port(cls):
        for port in cls.ports:
            if port not in task.inputs:
                err(("inputs",), f"input port {port!r} is missing (type {task.type!r} needs it)")


def _first(workflow: Workflow, task_id: str) -> int:
    return next(i for i, t in enumerate(workflow.tasks) if t.id == task_id)
