"""The workflow spec: tasks of registered types, wired by their inputs into a DAG.

Read from YAML or JSON by `runs.workflow_text` (within limits). Structure is checked by
pydantic; everything beyond structure (types, settings, ports, cycles) by `runs.validation`,
which reports every error at once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

TASK_ID = r"^[a-z0-9]([a-z0-9_-]{0,38}[a-z0-9])?$"
PORT = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
TaskId = Annotated[str, StringConstraints(pattern=TASK_ID)]
SplitMode = Literal["auto", "none"] | Annotated[int, Field(ge=1, le=1000)]


class ResourceOverrides(BaseModel):
    """Resources a workflow sets for a task; they win over the hint and over history."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cores_per_process: float | None = Field(None, gt=0, le=512)
    processes: int | None = Field(None, ge=1, le=1024)
    memory_base_gb: float | None = Field(None, ge=0, le=4096)
    memory_per_worker_gb: float | None = Field(None, gt=0, le=4096)
    scratch_gb: float | None = Field(None, ge=0, le=100_000)
    gpus: int | None = Field(None, ge=0, le=64)


class TaskSpec(BaseModel):
    """One task: its id, type, settings, inputs (port → `<task>` or `<task>.<path>`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: TaskId
    type: Annotated[str, StringConstraints(min_length=1, max_length=128)]
    settings: dict[str, Any] = Field(default_factory=dict)
    inputs: dict[Annotated[str, StringConstraints(pattern=PORT)], str] = Field(default_factory=dict)
    split: SplitMode | None = None
    coordinator_merges: bool | None = None
    resources: ResourceOverrides = Field(default_factory=ResourceOverrides)

    def dependencies(self) -> list[str]:
        """The tasks this one reads from, in the order of its inputs, each once."""
        seen: list[str] = []
        for ref in self.inputs.values():
            task = input_task(ref)
            if task not in seen:
                seen.append(task)
        return seen


class WorkflowDefaults(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    split: SplitMode = "auto"
    reserve: str | None = Field(None, min_length=1, max_length=253)


class Workflow(BaseModel):
    """A named DAG of tasks."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, StringConstraints(min_length=1, max_length=128)]
    description: str = ""
    defaults: WorkflowDefaults = Field(default_factory=WorkflowDefaults)
    tasks: list[TaskSpec] = Field(min_length=1, max_length=500)

    def task(self, task_id: str) -> TaskSpec:
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise KeyError(task_id)

    def order(self) -> list[TaskSpec]:
        """The tasks in a topological order, stable: ties keep the order of the file."""
        by_id = {t.id: t for t in self.tasks}
        sorter: TopologicalSorter[str] = TopologicalSorter()
        for task in self.tasks:
            sorter.add(task.id, *[d for d in task.dependencies() if d in by_id])
        sorter.prepare()
        position = {t.id: i for i, t in enumerate(self.tasks)}
        ordered: list[TaskSpec] = []
        while sorter.is_active():
            ready = sorted(sorter.get_ready(), key=position.__getitem__)
            ordered.extend(by_id[r] for r in ready)
            sorter.done(*ready)
        return ordered

    def split_of(self, task: TaskSpec) -> SplitMode:
        return task.split if task.split is not None else self.defaults.split


def input_task(ref: str) -> str:
    """The task an input reference reads from: `scan` and `scan.table` both read `scan`."""
    return ref.split(".", 1)[0]


def input_path(ref: str) -> str:
    """The path below the task's output an input reads: '' for the whole output."""
    _, _, sub = ref.partition(".")
    return sub


def input_location(ref: str) -> str:
    """Where an input reads, relative to its run's directory: its task's output, or a path
    below it (`scan.table` reads `tasks/scan/out/table`)."""
    sub = input_path(ref)
    return f"tasks/{input_task(ref)}/out" + (f"/{sub}" if sub else "")


def find_cycle(workflow: Workflow) -> list[str] | None:
    """The task ids of a cycle, closed (first == last), or None when the graph is a DAG."""
    ids = {t.id for t in workflow.tasks}
    sorter: TopologicalSorter[str] = TopologicalSorter()
    for task in workflow.tasks:
        sorter.add(task.id, *[d for d in task.dependencies() if d in ids])
    try:
        sorter.prepare()
    except CycleError as exc:
        # graphlib lists each node before the ones reading it (the data flow); start the
        # ring at the task that comes first in the file, so the message is stable.
        ring = list(exc.args[1])[:-1]
        position = {t.id: i for i, t in enumerate(workflow.tasks)}
        start = min(range(len(ring)), key=lambda i: position.get(ring[i], 0))
        ring = ring[start:] + ring[:start]
        return [*ring, ring[0]]
    return None


@dataclass(frozen=True)
class WorkflowError:
    """One problem of a workflow: where (dotted location, line when known) and what."""

    loc: str
    message: str
    task: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        prefix = f"task {self.task!r}: " if self.task is not None else ""
        where = f"{self.loc}: " if self.loc else ""
        return f"{prefix}{where}{self.message}"


class WorkflowInvalid(ValueError):
    """A workflow that cannot be run, with every error found."""

    def __init__(self, errors: list[WorkflowError]) -> None:
        super().__init__("\n".join(str(e) for e in errors))
        self.errors = errors


class Lines:
    """The line (1-based) of a location in the workflow's text, found from its YAML nodes.

    Walks the node tree along the location on demand (no index of every node is kept, so an
    expanded alias costs nothing); empty for a workflow that arrived as an object."""

    def __init__(self, root: yaml.Node | None = None) -> None:
        self.root = root

    def at(self, path: tuple[str | int, ...]) -> int | None:
        """The line of the deepest prefix of `path` the text has (a key's line for a value)."""
        node = self.root
        if node is None:
            return None
        line = node.start_mark.line + 1
        for part in path:
            child = _child(node, part)
            if child is None:
                break
            line, node = child
        return line


def _child(node: yaml.Node, part: str | int) -> tuple[int, yaml.Node] | None:
    if isinstance(node, yaml.MappingNode):
        for key, value in reversed(node.value):
            if str(key.value) == str(part):
                return key.start_mark.line + 1, value
    elif (
        isinstance(node, yaml.SequenceNode)
        and isinstance(part, int)
        and 0 <= part < len(node.value)
    ):
        item = node.value[part]
        return item.start_mark.line + 1, item
    return None


def line_of(lines: Lines, path: tuple[str | int, ...]) -> int | None:
    """The line of the deepest known prefix of `path`."""
    return lines.at(path)


def dotted(path: tuple[str | int, ...] | list[str | int]) -> str:
    """A pydantic location as `tasks[0].settings.n_points`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def structure_errors(exc: ValidationError, data: Any, lines: Lines) -> list[WorkflowError]:
    """pydantic's errors of the structure, one WorkflowError each, named by task where known."""
    errors = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        task = _task_id_at(data, loc)
        rel = loc[2:] if task is not None else loc
        message = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
        errors.append(WorkflowError(dotted(rel), message, task, line_of(lines, loc)))
    return errors


def _task_id_at(data: Any, loc: tuple[Any, ...]) -> str | None:
    if len(loc) >= 2 and loc[0] == "tasks" and isinstance(loc[1], int) and isinstance(data, dict):
        tasks = data.get("tasks")
        if isinstance(tasks, list) and loc[1] < len(tasks) and isinstance(tasks[loc[1]], dict):
            task_id = tasks[loc[1]].get("id")
            return str(task_id) if task_id is not None else f"#{loc[1]}"
    return None


def dumps(workflow: Workflow) -> str:
    """The canonical JSON of a workflow (what a run stores)."""
    return json.dumps(workflow.model_dump(mode="json", exclude_defaults=False), sort_keys=True)
