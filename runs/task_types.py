"""The task types simrun knows: the plugins' (entry points) and the built-in `command`.

Plugin types run inside model environments through the harness; `command` is run by the
backend itself (an image and its args on the cluster, the args as a process locally).
"""

from __future__ import annotations

from functools import cache
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from simrun_harness.plugin import ResourceHint, TaskType, UnsplitTaskType, load_task_types

COMMAND = "command"


class CommandSettings(BaseModel):
    """Settings of the built-in `command` type."""

    model_config = ConfigDict(extra="forbid")

    image: str | None = Field(
        None, description="Image to run on the cluster; locally the args run as a process."
    )
    args: list[str] = Field(min_length=1, description="The command and its arguments.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment.")


class CommandType(UnsplitTaskType):
    """Run an image's command once; each input is in SIMRUN_INPUT_<PORT>, a path relative to
    SIMRUN_RUN_DIR (e.g. `tasks/scan/out`)."""

    name: ClassVar[str] = COMMAND
    settings_model: ClassVar[type[BaseModel]] = CommandSettings
    hint: ClassVar[ResourceHint] = ResourceHint(memory_base_gb=0.5, memory_per_worker_gb=0.5)
    description: ClassVar[str] = "An image and its args, run once."
    any_port: ClassVar[bool] = True


@cache
def registry() -> dict[str, type[TaskType]]:
    """Every type by name: the built-in ones, then the installed plugins'."""
    types: dict[str, type[TaskType]] = {COMMAND: CommandType}
    for name, cls in load_task_types().items():
        if name in types:
            raise RuntimeError(f"task type {name!r} is defined twice (a plugin shadows it)")
        types[name] = cls
    return types


def takes_any_port(cls: type[TaskType]) -> bool:
    return bool(getattr(cls, "any_port", False))


def describe(name: str, cls: type[TaskType]) -> dict[str, Any]:
    """What the API and the pages show of a type."""
    return {
        "name": name,
        "description": cls.description or (cls.__doc__ or "").strip().split("\n")[0],
        "splittable": cls.splittable,
        "ports": list(cls.ports),
        "outputs": list(cls.outputs),
        "any_port": takes_any_port(cls),
        "hint": cls.hint.model_dump(),
        "settings_schema": cls.settings_schema(),
    }
