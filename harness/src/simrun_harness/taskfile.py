"""The task a pod runs: `task.json` in the task directory, its type and its context.

The service writes `task.json` before any pod starts. Anything wrong with it (unreadable,
an unknown type, invalid settings, an input outside the run) is a configuration error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from simrun_harness.config import CommonConfig, ConfigError
from simrun_harness.layout import TaskPaths, check_name
from simrun_harness.plugin import TaskContext, TaskType, load_task_type


class TaskFile(BaseModel):
    """The content of `task.json`; fields the harness does not know are ignored."""

    model_config = ConfigDict(extra="ignore")

    task: str
    type: str
    settings: dict[str, Any] = Field(default_factory=dict)
    inputs: dict[str, str] = Field(default_factory=dict)
    model: str | None = None


@dataclass(frozen=True)
class LoadedTask:
    """A task ready to run: its file, its type (an instance) and its context."""

    file: TaskFile
    task_type: TaskType
    context: TaskContext
    paths: TaskPaths


def _relative(text: str, what: str) -> PurePosixPath:
    """A relative path that stays below its root (no absolute path, no `..`)."""
    path = PurePosixPath(text)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise ConfigError(f"task.json: {what} {text!r} must be a relative path inside its root")
    return path


def read_task_file(paths: TaskPaths) -> TaskFile:
    """Parse `task.json` (raises ConfigError naming the file and the problem)."""
    try:
        raw = json.loads(paths.task_file.read_text())
    except OSError as exc:
        raise ConfigError(f"task.json cannot be read at {paths.task_file}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"task.json at {paths.task_file} is not JSON: {exc}") from None
    try:
        return TaskFile.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"task.json at {paths.task_file} is invalid: {exc}") from None


def load_task(config: CommonConfig) -> LoadedTask:
    """Read `task.json`, load its type and build the context of the task.

    Raises:
        ConfigError: anything about the task file, its type, settings, inputs or model.
    """
    paths = TaskPaths(config.task_dir)
    file = read_task_file(paths)
    try:
        check_name(file.task, what="task id")
        cls = load_task_type(file.type)
    except (ValueError, LookupError, TypeError, ImportError) as exc:
        raise ConfigError(f"task.json: {exc}") from None
    task_type = cls()
    try:
        settings = task_type.parse_settings(file.settings)
    except ValidationError as exc:
        lines = [
            f"settings.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        ]
        raise ConfigError(f"task {file.task!r}: " + "; ".join(lines)) from None
    inputs: dict[str, Path] = {}
    for port, relative in file.inputs.items():
        if port not in task_type.ports:
            raise ConfigError(f"task {file.task!r}: {port!r} is no input port of {file.type}")
        path = config.run_dir / _relative(relative, f"input {port!r}")
        if not path.exists():
            raise ConfigError(f"task {file.task!r}: input {port!r} ({relative}) does not exist")
        inputs[port] = path
    model_dir = None
    if file.model is not None:
        if config.snapshots_dir is None:
            raise ConfigError("SIMRUN_SNAPSHOTS_DIR is not set, but the task has a model")
        model_dir = config.snapshots_dir / _relative(file.model, "model")
        if not model_dir.is_dir():
            raise ConfigError(f"task {file.task!r}: model {file.model!r} is not a directory")
    context = TaskContext(
        task_id=file.task,
        settings=settings,
        inputs=inputs,
        model_dir=model_dir,
        scratch=config.scratch,
    )
    return LoadedTask(file=file, task_type=task_type, context=context, paths=paths)
