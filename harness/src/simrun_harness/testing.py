"""Run a task type in one process, as its pods would, for a plugin's own tests.

`run_task` validates the settings with the type's model, lists the units, runs each into its
own empty directory and merges them in unit order (a split type), or runs it once (an unsplit
type). Errors are the plugin's own: a bad setting raises pydantic's ValidationError, a
`SettingsError` from `units()` or `run()` propagates, so a test can expect either.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simrun_harness.plugin import SplitTaskType, TaskContext, TaskType, UnsplitTaskType


def run_task(
    task_type: type[TaskType],
    settings: dict[str, Any],
    *,
    out: Path,
    inputs: dict[str, Path] | None = None,
    model_dir: Path | None = None,
    task_id: str = "task",
) -> Path:
    """Run the type with `settings` into the (new) directory `out`; return `out`."""
    instance = task_type()
    scratch = out.parent / f".{out.name}-scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    ctx = TaskContext(
        task_id=task_id,
        settings=instance.parse_settings(settings),
        inputs=dict(inputs or {}),
        model_dir=model_dir,
        scratch=scratch,
    )
    out.mkdir(parents=True)
    if isinstance(instance, SplitTaskType):
        units = list(instance.units(ctx))
        unit_dirs = []
        for index, unit in enumerate(units):
            unit_out = out.parent / f".{out.name}-units" / f"{index:06d}"
            unit_out.mkdir(parents=True)
            instance.run_unit(ctx, unit, unit_out)
            unit_dirs.append(unit_out)
        instance.merge(ctx, unit_dirs, out)
    elif isinstance(instance, UnsplitTaskType):
        instance.run(ctx, out)
    else:
        raise TypeError(f"{task_type.__name__} is neither a SplitTaskType nor an UnsplitTaskType")
    return out
