"""Parameter scans of an ODE model: a grid of parameter points, one time course per point.

Units are chunks of consecutive grid points. A unit writes `points.nc`, a labelled dataset
(xarray, netCDF through scipy) of its points; the merge concatenates them along `point` into
`out/scan.nc`. Every point starts from the model's initial state, so the merged values equal
a serial run's whatever the chunking and whichever worker computed which unit.

`ode_scan` integrates the repressilator with scipy's `odeint` (no SBML tooling needed);
`sbml_scan` simulates an SBML or Antimony file of the model snapshot with libroadrunner.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from simrun_examples.repressilator import PARAMETERS, SPECIES, initial_state, power, rhs
from simrun_harness.plugin import ResourceHint, SettingsError, SplitTaskType, TaskContext

NETCDF_ENGINE: Literal["scipy"] = "scipy"


if TYPE_CHECKING:
    import numpy as np  # imported where it computes: listing types stays fast


MAX_VALUE = 1e12
"""The largest magnitude of a parameter value (a model's parameters are far smaller)."""
Value = Annotated[float, Field(ge=-MAX_VALUE, le=MAX_VALUE)]


class Range(BaseModel):
    """Evenly spaced values from `start` to `stop` (both included), linear or logarithmic."""

    model_config = ConfigDict(extra="forbid")

    start: float = Field(ge=-MAX_VALUE, le=MAX_VALUE)
    stop: float = Field(ge=-MAX_VALUE, le=MAX_VALUE)
    num: int = Field(ge=1, le=100_000)
    scale: Literal["linear", "log"] = "linear"

    def check(self) -> None:
        """ValueError for a range that has no values (a log range through zero)."""
        if self.scale == "log" and (self.start <= 0 or self.stop <= 0):
            raise ValueError("a log range needs positive start and stop")

    def values(self) -> list[float]:
        import numpy as np

        self.check()
        if self.scale == "log":  # np.geomspace without its CPU-dependent log10 and power
            logs = np.linspace(math.log10(self.start), math.log10(self.stop), self.num)
            values = [power(10.0, float(v)) for v in logs]
            values[0] = self.start
            if self.num > 1:
                values[-1] = self.stop
            return values
        return [float(v) for v in np.linspace(self.start, self.stop, self.num)]


MAX_UNITS = 100_000  # a ledger of files each; the service lists them when it plans the task
MAX_POINTS_PER_UNIT = 50_000_000
"""Time points a unit holds in memory (chunk times n_points, per species): about 400 MB each."""


class ScanSettings(BaseModel):
    """A grid over parameters (the product of their values, in the order given)."""

    model_config = ConfigDict(extra="forbid")

    parameters: dict[str, list[Value] | Range] = Field(
        min_length=1, description="Values per parameter: a list or a range."
    )
    t_end: float = Field(200.0, gt=0, le=1e6, description="End of every time course.")
    n_points: int = Field(401, ge=2, le=1_000_000, description="Time points per course.")
    chunk: int = Field(40, ge=1, le=MAX_UNITS, description="Grid points per unit.")

    @field_validator("parameters")
    @classmethod
    def _not_empty(cls, value: dict[str, list[float] | Range]) -> dict[str, list[float] | Range]:
        for name, values in value.items():
            if isinstance(values, list) and not values:
                raise ValueError(f"parameter {name!r} has no values")
            if isinstance(values, Range):
                values.check()  # a bad log range is an error now, not in a unit
        return value

    @model_validator(mode="after")
    def _bounded(self) -> ScanSettings:
        """A grid is never built to be counted, and makes at most MAX_UNITS units: two ranges
        of 100,000 values would be ten billion points, which no service should try to list."""
        if self.chunk * self.n_points > MAX_POINTS_PER_UNIT:
            raise ValueError(
                f"a unit of {self.chunk} grid points of {self.n_points} time points holds "
                f"{self.chunk * self.n_points:,} points; at most {MAX_POINTS_PER_UNIT:,} "
                "(lower chunk or n_points)"
            )
        units = -(-grid_size(self) // self.chunk)
        if units > MAX_UNITS:
            raise ValueError(
                f"the scan has {grid_size(self):,} points in {units:,} units of {self.chunk}; "
                f"at most {MAX_UNITS:,} units (raise chunk or scan fewer points)"
            )
        return self


class OdeScanSettings(ScanSettings):
    @field_validator("parameters")
    @classmethod
    def _known(cls, value: dict[str, list[float] | Range]) -> dict[str, list[float] | Range]:
        unknown = sorted(set(value) - set(PARAMETERS))
        if unknown:
            raise ValueError(f"unknown parameters {unknown}; the model has {list(PARAMETERS)}")
        return value


class SbmlScanSettings(ScanSettings):
    model: str = Field(
        "repressilator.ant", description="The model file in the model snapshot (.ant or SBML)."
    )


def grid_size(settings: ScanSettings) -> int:
    """How many points the grid has, without building it."""
    return math.prod(
        v.num if isinstance(v, Range) else len(v) for v in settings.parameters.values()
    )


def grid(settings: ScanSettings) -> list[dict[str, float]]:
    """Every parameter point of the scan, in scan order."""
    names = list(settings.parameters)
    axes = [v.values() if isinstance(v, Range) else list(v) for v in settings.parameters.values()]
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*axes)]


class _Scan(SplitTaskType):
    """Shared by the scans: units, the dataset of a unit, the merge."""

    ports: ClassVar[tuple[str, ...]] = ()
    hint: ClassVar[ResourceHint] = ResourceHint(memory_base_gb=0.5, memory_per_worker_gb=0.5)

    def __init__(self) -> None:
        self._grid: list[dict[str, float]] | None = None

    def _points(self, ctx: TaskContext) -> list[dict[str, float]]:
        if self._grid is None:
            assert isinstance(ctx.settings, ScanSettings)
            self._grid = grid(ctx.settings)
        return self._grid

    def species(self, ctx: TaskContext) -> list[str]:
        raise NotImplementedError

    def simulate(self, ctx: TaskContext, point: dict[str, float], times: np.ndarray) -> np.ndarray:
        """One time course: an array (time, species) in the order of `species`."""
        raise NotImplementedError

    def units(self, ctx: TaskContext) -> Sequence[Any]:
        settings = ctx.settings
        assert isinstance(settings, ScanSettings)
        total = grid_size(settings)
        return [
            {"start": start, "stop": min(start + settings.chunk, total)}
            for start in range(0, total, settings.chunk)
        ]

    def run_unit(self, ctx: TaskContext, unit: Any, out: Path) -> None:
        import numpy as np

        settings = ctx.settings
        assert isinstance(settings, ScanSettings)
        start, stop = int(unit["start"]), int(unit["stop"])
        points = self._points(ctx)[start:stop]
        times = np.linspace(0.0, settings.t_end, settings.n_points)
        species = self.species(ctx)
        courses = np.stack([self.simulate(ctx, point, times) for point in points])
        coords: dict[str, Any] = {"point": np.arange(start, stop, dtype=np.int32), "time": times}
        for name in settings.parameters:
            coords[name] = ("point", np.array([p[name] for p in points]))
        data = {s: (("point", "time"), courses[:, :, i]) for i, s in enumerate(species)}
        import xarray as xr  # here, not at the top: listing and validating stay fast

        dataset = xr.Dataset(data, coords=coords)
        dataset.to_netcdf(out / "points.nc", engine=NETCDF_ENGINE)

    def merge(self, ctx: TaskContext, units: Sequence[Path], out: Path) -> None:
        import xarray as xr

        parts = []
        for unit_dir in units:
            with xr.open_dataset(unit_dir / "points.nc", engine=NETCDF_ENGINE) as part:
                parts.append(part.load())
        merged = xr.concat(parts, dim="point").sortby("point")
        merged.attrs["task"] = ctx.task_id
        merged.attrs["type"] = self.name
        merged.attrs["settings"] = ctx.settings.model_dump_json()
        merged.to_netcdf(out / "scan.nc", engine=NETCDF_ENGINE)
        (out / "grid.json").write_text(json.dumps(self._points(ctx)))


def same_bits_on_every_cpu() -> None:
    """Pin the BLAS kernels scipy's `odeint` calls, before scipy loads them: OpenBLAS picks
    them by the CPU it runs on, and its AVX-512 ones (SkylakeX) sum in another order than
    the others, so an integration on such a CPU ended a few values a bit apart and a run
    again on another machine wrote other bytes. `Prescott` (SSE3) runs on every x86-64 CPU
    and rounds as the Haswell, Zen and Sandybridge kernels do; for a system of six
    equations its speed does not matter. Set by whoever sets it already, it is left."""
    if platform.machine().lower() in ("x86_64", "amd64"):
        os.environ.setdefault("OPENBLAS_CORETYPE", "Prescott")


class OdeScan(_Scan):
    """The repressilator integrated with scipy's odeint."""

    name: ClassVar[str] = "ode_scan"
    description: ClassVar[str] = "Parameter scan of the repressilator ODEs (scipy odeint)."
    settings_model: ClassVar[type[BaseModel]] = OdeScanSettings

    def species(self, ctx: TaskContext) -> list[str]:
        return list(SPECIES)

    def simulate(self, ctx: TaskContext, point: dict[str, float], times: np.ndarray) -> np.ndarray:
        same_bits_on_every_cpu()
        from scipy.integrate import odeint  # here: the service only validates and counts

        values = {**PARAMETERS, **point}
        args = tuple(values[name] for name in PARAMETERS)
        result: np.ndarray = odeint(rhs, initial_state(), times, args=args, rtol=1e-8, atol=1e-10)
        return result


class SbmlScan(_Scan):
    """An SBML (or Antimony) model of the snapshot simulated with libroadrunner."""

    name: ClassVar[str] = "sbml_scan"
    description: ClassVar[str] = "Parameter scan of an SBML/Antimony model (libroadrunner)."
    settings_model: ClassVar[type[BaseModel]] = SbmlScanSettings

    def __init__(self) -> None:
        super().__init__()
        self._runner: Any = None
        self._runner_pid = 0

    def _model(self, ctx: TaskContext) -> Any:
        """The model loaded once per process (compiling it is the slow part).

        A process forked after the parent loaded it loads its own: the compiled model is not
        shared across a fork.
        """
        if self._runner is not None and self._runner_pid == os.getpid():
            return self._runner
        settings = ctx.settings
        assert isinstance(settings, SbmlScanSettings)
        if ctx.model_dir is None:
            raise SettingsError("sbml_scan needs a model snapshot (the workflow's model)")
        path = ctx.model_dir / settings.model
        if not path.is_file():
            raise SettingsError(f"model file {settings.model!r} is not in the model snapshot")
        try:
            import roadrunner
        except ImportError as exc:  # an environment without the sbml extra
            raise SettingsError("sbml_scan needs libroadrunner (simrun-examples[sbml])") from exc
        self._runner = roadrunner.RoadRunner(_sbml_text(path))
        self._runner_pid = os.getpid()
        return self._runner

    def units(self, ctx: TaskContext) -> Sequence[Any]:
        runner = self._model(ctx)
        known = set(runner.model.getGlobalParameterIds())
        settings = ctx.settings
        assert isinstance(settings, SbmlScanSettings)
        unknown = sorted(set(settings.parameters) - known)
        if unknown:
            raise SettingsError(f"unknown parameters {unknown}; the model has {sorted(known)}")
        return super().units(ctx)

    def species(self, ctx: TaskContext) -> list[str]:
        return list(self._model(ctx).model.getFloatingSpeciesIds())

    def simulate(self, ctx: TaskContext, point: dict[str, float], times: np.ndarray) -> np.ndarray:
        import numpy as np

        runner = self._model(ctx)
        runner.resetAll()
        for name, value in point.items():
            runner[name] = value
        runner.timeCourseSelections = self.species(ctx)
        return np.array(runner.simulate(float(times[0]), float(times[-1]), len(times)))


def _sbml_text(path: Path) -> str:
    """SBML of a model file: Antimony (.ant, .txt) is converted, anything else read as SBML."""
    text = path.read_text()
    if path.suffix not in {".ant", ".antimony", ".txt"}:
        return text
    import antimony

    antimony.clearPreviousLoads()
    if antimony.loadAntimonyString(text) < 0:
        raise SettingsError(f"{path.name}: {antimony.getLastError()}")
    sbml: str = antimony.getSBMLString(antimony.getMainModuleName())
    return sbml
