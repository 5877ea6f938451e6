"""Task types for testing the harness and the service: sleep, spin, allocate, fail.

They import nothing heavy, so a pod running them starts fast. Every unit writes
`unit.json` ({"unit": <index>}); the merge writes one `unit-<index>.json` per unit (pausing
`merge_seconds` in total between them, so a test can kill a merge half way) and `units.json`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from simrun_harness.plugin import ResourceHint, SplitTaskType, TaskContext

_SMALL = ResourceHint(memory_base_gb=0.1, memory_per_worker_gb=0.2)
DAY_S = 86_400.0
"""The longest any of these units (or merges) may sleep, spin or hold memory."""
MAX_MB = 64 * 1024
"""The most memory (MiB) a unit of `allocate` may ask for: 64 GiB."""


class _Units(BaseModel):
    model_config = ConfigDict(extra="forbid")

    units: int = Field(4, ge=1, le=1_000_000, description="How many units.")
    merge_seconds: float = Field(0.0, ge=0, le=DAY_S, description="Seconds the merge takes in all.")


class _Counting(SplitTaskType):
    """Units are 0 … units-1; outputs and merge as described in the module."""

    settings_model: ClassVar[type[BaseModel]] = _Units
    hint: ClassVar[ResourceHint] = _SMALL

    def units(self, ctx: TaskContext) -> Sequence[Any]:
        settings = ctx.settings
        assert isinstance(settings, _Units)
        return list(range(settings.units))

    def work(self, ctx: TaskContext, unit: int) -> None:
        """The unit's work, before its output is written."""

    def run_unit(self, ctx: TaskContext, unit: Any, out: Path) -> None:
        self.work(ctx, int(unit))
        (out / "unit.json").write_text(json.dumps({"unit": unit}))

    def merge(self, ctx: TaskContext, units: Sequence[Path], out: Path) -> None:
        settings = ctx.settings
        assert isinstance(settings, _Units)
        pause = settings.merge_seconds / max(1, len(units))
        indices = []
        for unit_dir in units:
            record = json.loads((unit_dir / "unit.json").read_text())
            (out / f"unit-{record['unit']}.json").write_text(json.dumps(record))
            indices.append(record["unit"])
            if pause:
                time.sleep(pause)
        (out / "units.json").write_text(json.dumps(indices))


class SleepSettings(_Units):
    seconds: float = Field(0.1, ge=0, le=DAY_S, description="Seconds each unit sleeps.")


class Sleep(_Counting):
    """Units that sleep: wall time without CPU."""

    name: ClassVar[str] = "sleep"
    description: ClassVar[str] = "Units that sleep for a while (tests)."
    settings_model: ClassVar[type[BaseModel]] = SleepSettings

    def work(self, ctx: TaskContext, unit: int) -> None:
        settings = ctx.settings
        assert isinstance(settings, SleepSettings)
        time.sleep(settings.seconds)


class SpinSettings(_Units):
    seconds: float = Field(0.005, ge=0, le=DAY_S, description="CPU seconds each unit burns.")


def spin(seconds: float) -> int:
    """Burn `seconds` of this process's CPU time; returns the loop count."""
    end = time.process_time() + seconds
    count = 0
    while time.process_time() < end:
        count += 1
    return count


class Spin(_Counting):
    """Units that burn CPU and write nothing (benchmarks: the harness's cost alone).

    A unit's output is its empty directory; the merge lists the units that have one.
    """

    name: ClassVar[str] = "spin"
    description: ClassVar[str] = "Units that burn a fixed amount of CPU time (benchmarks)."
    settings_model: ClassVar[type[BaseModel]] = SpinSettings

    def run_unit(self, ctx: TaskContext, unit: Any, out: Path) -> None:
        settings = ctx.settings
        assert isinstance(settings, SpinSettings)
        spin(settings.seconds)

    def merge(self, ctx: TaskContext, units: Sequence[Path], out: Path) -> None:
        done = [i for i, unit_dir in enumerate(units) if unit_dir.is_dir()]
        (out / "units.json").write_text(json.dumps(done))


class AllocateSettings(_Units):
    mb: int = Field(100, ge=1, le=MAX_MB, description="MiB each unit allocates (and touches).")
    hold_seconds: float = Field(2.0, ge=0, le=DAY_S, description="Seconds it holds the memory.")


class Allocate(_Counting):
    """Units that allocate memory and hold it (kills for memory)."""

    name: ClassVar[str] = "allocate"
    description: ClassVar[str] = "Units that allocate and hold memory (tests)."
    settings_model: ClassVar[type[BaseModel]] = AllocateSettings

    def work(self, ctx: TaskContext, unit: int) -> None:
        settings = ctx.settings
        assert isinstance(settings, AllocateSettings)
        block = bytearray(b"\x01") * (settings.mb * 1024 * 1024)  # every page written
        time.sleep(settings.hold_seconds)
        del block


class FailSettings(_Units):
    fail_unit: int = Field(0, ge=0, le=1_000_000, description="The index of the unit that raises.")
    seconds: float = Field(0.0, ge=0, le=DAY_S, description="Seconds each unit sleeps first.")
    in_pods: bool = Field(
        False, description="Listing the units raises in the pods (not at submission)."
    )


class Fail(_Counting):
    """One unit raises (a failed analysis); or listing the units raises in the pods."""

    name: ClassVar[str] = "fail"
    description: ClassVar[str] = "Units of which one raises (tests)."
    settings_model: ClassVar[type[BaseModel]] = FailSettings

    def units(self, ctx: TaskContext) -> Sequence[Any]:
        settings = ctx.settings
        assert isinstance(settings, FailSettings)
        if settings.in_pods and os.environ.get("SIMRUN_WORKER"):  # a pod has one
            raise RuntimeError("listing the units fails on purpose")
        return super().units(ctx)

    def work(self, ctx: TaskContext, unit: int) -> None:
        settings = ctx.settings
        assert isinstance(settings, FailSettings)
        time.sleep(settings.seconds)
        if unit == settings.fail_unit:
            raise RuntimeError(f"unit {unit} fails on purpose")
