"""A job of a pool process, and how a pool process runs it (`JobRunner`, `run_job`).

A unit is computed into a private directory and renamed into place, so its output is
either whole or absent; what a process sends back per job is a plain tuple (`Outcome`).
"""

from __future__ import annotations

import errno
import os
import shutil
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from simrun_harness.ledger_reads import UnitDirs
from simrun_harness.memory import own_peak_rss_bytes
from simrun_harness.plugin import (
    SettingsError,
    SplitTaskType,
    TaskContext,
    TaskType,
    UnsplitTaskType,
)

JobKind = Literal["unit", "merge", "run"]


@dataclass(frozen=True)
class Job:
    """One piece of work for a pool process."""

    kind: JobKind
    name: str | None = None
    value: Any = None
    out: str | None = None
    units: str | None = None  # a merge's: the directory of the unit outputs
    unit_count: int = 0  # a merge's: how many units it merges


@dataclass(frozen=True)
class JobResult:
    """What a pool process sends back after a job."""

    job: Job
    ok: bool
    seconds: float
    peak_rss_bytes: int
    duplicate: bool = False
    message: str | None = None
    traceback: str | None = None
    settings_error: bool = False
    """The job raised `SettingsError`: a configuration error, not a failed analysis."""


Outcome = tuple[bool, float, int, bool, str | None, str | None, bool]
"""A job's result as a pool process sends it: the fields of `JobResult` after `job`, which
the parent takes from the jobs it sent (less to pickle both ways, per unit)."""


class JobRunner:
    """Runs jobs of one task type inside a pool process."""

    def __init__(self, task_type: TaskType, context: TaskContext, units_dir: Path, token: str):
        self.task_type = task_type
        self.context = context
        self.units_dir = units_dir
        self.token = token
        self._units = str(units_dir) + os.sep  # plain strings on the hot path (per unit)

    def setup(self, index: int) -> None:
        """Give this process a scratch directory of its own."""
        scratch = self.context.scratch / f"p{index}"
        scratch.mkdir(parents=True, exist_ok=True)
        self.context = replace(self.context, scratch=scratch)

    def run(self, job: Job) -> bool:
        """Run a job; returns True when a unit's output was already in place (a duplicate)."""
        if job.kind == "unit":
            assert isinstance(self.task_type, SplitTaskType) and job.name is not None
            return self._unit(self.task_type, job.name, job.value)
        assert job.out is not None
        out = Path(job.out)
        if job.kind == "merge":
            assert isinstance(self.task_type, SplitTaskType)
            assert job.units is not None
            self.task_type.merge(self.context, UnitDirs(Path(job.units), job.unit_count), out)
        else:
            assert isinstance(self.task_type, UnsplitTaskType)
            self.task_type.run(self.context, out)
        return False

    def _unit(self, task_type: SplitTaskType, name: str, value: Any) -> bool:
        """Compute a unit into a private directory, then rename it into place.

        A unit whose output is already in place (its earlier holder was killed between the
        rename and the commit) is not computed again. A holder that was late (its claim taken
        back, its private directory swept as abandoned: `Ledger.sweep_partials`) and finds
        the unit done meanwhile counts it as a duplicate, not as a failure of the unit.
        """
        final = self._units + name
        if os.path.isdir(final):
            return True
        tmp = f"{self._units}.{name}.{self.token}.{os.getpid()}"
        try:
            os.mkdir(tmp)
        except FileExistsError:  # left by a killed run of this process id
            shutil.rmtree(tmp)
            os.mkdir(tmp)
        try:
            task_type.run_unit(self.context, value, Path(tmp))
        except Exception:
            if not os.path.isdir(tmp) and os.path.isdir(final):
                return True  # swept while we were late: the unit was done elsewhere
            raise
        try:
            os.rename(tmp, final)
        except OSError as exc:
            if exc.errno == errno.ENOENT and os.path.isdir(final):
                return True  # swept while we were late: the unit was done elsewhere
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # an earlier holder's output won
            return True
        return False


def run_job(runner: JobRunner, job: Job) -> Outcome:
    """Run one job; what the parent needs to know of it (the job itself it knows already)."""
    start = time.perf_counter()
    try:
        duplicate = runner.run(job)
    except BaseException as exc:  # a unit may raise anything, SystemExit included
        return (
            False,
            time.perf_counter() - start,
            own_peak_rss_bytes(),
            False,
            f"{type(exc).__name__}: {exc}",
            traceback.format_exc(),
            isinstance(exc, SettingsError),
        )
    return (True, time.perf_counter() - start, own_peak_rss_bytes(), duplicate, None, None, False)
