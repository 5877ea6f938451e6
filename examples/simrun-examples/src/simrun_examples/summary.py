"""`summary`: statistics per grid point of a scan's output (an unsplit task).

Reads `scan.nc` of its input port `scan` and writes `summary.csv` (one row per point and
species: the parameters, final value, mean, min, max, amplitude and period over the tail of
the time course) and `summary.json` (how many points oscillate, per species).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from simrun_examples.scan import NETCDF_ENGINE
from simrun_harness.plugin import ResourceHint, SettingsError, TaskContext, UnsplitTaskType

if TYPE_CHECKING:
    import numpy as np  # imported where it computes: listing types stays fast


class SummarySettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tail_fraction: float = Field(
        0.5, gt=0, le=1, description="Fraction of the time course, from its end, measured."
    )
    threshold: float = Field(
        1.0, ge=0, le=1e12, description="Amplitude above which a species counts as oscillating."
    )
    species: list[str] | None = Field(None, description="Species to summarise (default all).")


def period(times: np.ndarray, values: np.ndarray) -> float | None:
    """Mean time between upward crossings of the mean, None with fewer than two."""
    import numpy as np

    centred = values - values.mean()
    ups = np.nonzero((centred[:-1] < 0) & (centred[1:] >= 0))[0]
    if len(ups) < 2:
        return None
    return float(np.diff(times[ups]).mean())


def _number(value: float | None) -> float | None:
    return None if value is None else round(float(value), 10)


class Summary(UnsplitTaskType):
    """Statistics of every time course of a scan."""

    name: ClassVar[str] = "summary"
    description: ClassVar[str] = "Per-point statistics of a scan's time courses."
    settings_model: ClassVar[type[BaseModel]] = SummarySettings
    ports: ClassVar[tuple[str, ...]] = ("scan",)
    hint: ClassVar[ResourceHint] = ResourceHint(memory_base_gb=0.5, memory_per_worker_gb=0.5)

    def run(self, ctx: TaskContext, out: Path) -> None:
        settings = ctx.settings
        assert isinstance(settings, SummarySettings)
        source = ctx.inputs.get("scan")
        if source is None or not (source / "scan.nc").is_file():
            raise SettingsError("summary needs the input port 'scan' with a scan.nc")
        import xarray as xr  # here, not at the top: listing and validating stay fast

        with xr.open_dataset(source / "scan.nc", engine=NETCDF_ENGINE) as opened:
            scan = opened.load()
        species = settings.species or [str(v) for v in scan.data_vars]
        missing = sorted(set(species) - {str(v) for v in scan.data_vars})
        if missing:
            raise SettingsError(f"species {missing} are not in the scan")
        parameters = [str(c) for c in scan.coords if c not in ("point", "time")]
        times = scan["time"].values
        tail = times >= times[-1] - settings.tail_fraction * (times[-1] - times[0])
        rows: list[dict[str, Any]] = []
        oscillating = dict.fromkeys(species, 0)
        for index, point in enumerate(scan["point"].values):
            for name in species:
                values = scan[name].values[index][tail]
                amplitude = float(values.max() - values.min())
                if amplitude > settings.threshold:
                    oscillating[name] += 1
                row: dict[str, Any] = {"point": int(point)}
                row.update({p: float(scan[p].values[index]) for p in parameters})
                row.update(
                    species=name,
                    final=_number(values[-1]),
                    mean=_number(values.mean()),
                    min=_number(values.min()),
                    max=_number(values.max()),
                    amplitude=_number(amplitude),
                    period=_number(period(times[tail], values)),
                )
                rows.append(row)
        with (out / "summary.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]) if rows else ["point"])
            writer.writeheader()
            writer.writerows(rows)
        points = int(scan.sizes["point"])
        overview = {
            "points": points,
            "parameters": parameters,
            "species": species,
            "oscillating": oscillating,
            "oscillating_fraction": {
                k: v / points if points else 0.0 for k, v in oscillating.items()
            },
        }
        (out / "summary.json").write_text(json.dumps(overview, indent=2) + "\n")
