"""Running a scan type in this process, the way the harness runs it, for plugin tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import xarray as xr

from simrun_harness.plugin import SplitTaskType, TaskContext


def run_in_process(
    task_type: SplitTaskType,
    settings: dict[str, Any],
    work: Path,
    *,
    model_dir: Path | None = None,
    order: list[int] | None = None,
) -> Path:
    """List the units, run them (in `order` if given) and merge; returns the output dir."""
    ctx = TaskContext(
        task_id="scan",
        settings=task_type.parse_settings(settings),
        model_dir=model_dir,
        scratch=work / "scratch",
    )
    units = list(task_type.units(ctx))
    unit_dirs = [work / "units" / f"u{i:06d}" for i in range(len(units))]
    for i in order if order is not None else range(len(units)):
        unit_dirs[i].mkdir(parents=True)
        task_type.run_unit(ctx, units[i], unit_dirs[i])
    out = work / "out"
    out.mkdir(parents=True)
    task_type.merge(ctx, unit_dirs, out)
    return out


def open_scan(out: Path) -> xr.Dataset:
    with xr.open_dataset(out / "scan.nc", engine="scipy") as opened:
        return opened.load()
