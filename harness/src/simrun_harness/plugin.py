"""The plugin contract: what a task type is, and how simrun finds the installed ones.

A plugin package declares its types as entry points in the group `simrun.task_types`; each
entry point names a subclass of `SplitTaskType` or `UnsplitTaskType`. See docs/plugins.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from simrun_harness import sources

ENTRY_POINT_GROUP = sources.ENTRY_POINT_GROUP


class ResourceHint(BaseModel):
    """What one pod of a type needs, before any history is known."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cores_per_process: float = Field(1.0, gt=0)
    memory_base_gb: float = Field(0.25, ge=0)
    memory_per_worker_gb: float = Field(0.5, gt=0)
    scratch_gb: float = Field(0.0, ge=0)
    gpus: int = Field(0, ge=0)


class NoSettings(BaseModel):
    """Settings of a type that takes none; any key is an error."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class TaskContext:
    """What a running task sees: its settings, its inputs, the model and a scratch dir."""

    task_id: str
    settings: BaseModel
    inputs: dict[str, Path] = field(default_factory=dict)
    model_dir: Path | None = None
    scratch: Path = Path("/tmp")


class SettingsError(ValueError):
    """Raised by a type when its settings, inputs or model cannot work (a missing model file,
    a parameter the model does not have). The harness exits with the configuration code (4),
    which is never retried, instead of the analysis code (3)."""


class TaskType:
    """Base of every task type. Subclasses set the class attributes below."""

    name: ClassVar[str]
    settings_model: ClassVar[type[BaseModel]] = NoSettings
    hint: ClassVar[ResourceHint] = ResourceHint()
    ports: ClassVar[tuple[str, ...]] = ()  # input ports, all required
    outputs: ClassVar[tuple[str, ...]] = ()  # named parts of out/ others may read; () = any
    splittable: ClassVar[bool] = False
    description: ClassVar[str] = ""

    def parse_settings(self, raw: dict[str, Any]) -> BaseModel:
        """The validated settings (raises pydantic.ValidationError)."""
        return self.settings_model.model_validate(raw)

    @classmethod
    def settings_schema(cls) -> dict[str, Any]:
        """The JSON Schema of the settings, for editors and the API."""
        return cls.settings_model.model_json_schema()


class SplitTaskType(TaskType):
    """A type whose work is many independent units, shared by any number of workers."""

    splittable: ClassVar[bool] = True

    def units(self, ctx: TaskContext) -> Sequence[Any]:
        """The units of the task, each a JSON-serialisable value; their order is their id."""
        raise NotImplementedError

    def run_unit(self, ctx: TaskContext, unit: Any, out: Path) -> None:
        """Compute one unit into the (empty, private) directory `out`."""
        raise NotImplementedError

    def merge(self, ctx: TaskContext, units: Sequence[Path], out: Path) -> None:
        """Merge the unit outputs (in unit order) into the task output directory `out`."""
        raise NotImplementedError


class UnsplitTaskType(TaskType):
    """A type that runs once."""

    def run(self, ctx: TaskContext, out: Path) -> None:
        """Compute the task into its output directory `out`."""
        raise NotImplementedError


def load_task_types() -> dict[str, type[TaskType]]:
    """The installed task types by name, from the entry points of `simrun.task_types`."""
    sources.install(sources.project_dirs())  # a plugin's own files: never stale bytecode
    found: dict[str, type[TaskType]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        cls = ep.load()
        if not (isinstance(cls, type) and issubclass(cls, TaskType)):
            raise TypeError(f"entry point {ep.name!r} ({ep.value}) is not a TaskType subclass")
        found[ep.name] = cls
    return found


def load_task_type(name: str) -> type[TaskType]:
    """The installed type `name`, loading only its own entry point.

    Loading one entry point instead of all keeps a pod from importing every plugin (and
    their heavy dependencies) of its environment. Raises LookupError for an unknown name.
    """
    sources.install(sources.project_dirs())  # a plugin's own files: never stale bytecode
    for ep in entry_points(group=ENTRY_POINT_GROUP, name=name):
        cls = ep.load()
        if not (isinstance(cls, type) and issubclass(cls, TaskType)):
            raise TypeError(f"entry point {ep.name!r} ({ep.value}) is not a TaskType subclass")
        return cls
    known = sorted(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))
    raise LookupError(f"unknown task type {name!r} (installed: {', '.join(known) or 'none'})")
