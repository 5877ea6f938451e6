"""The report every attempt of a worker, merge or exec writes at its end.

`reports/<worker>-<attempt>.json` in the task directory. The service reads it with
`read_report` and turns it into a resource observation; `oom_kills` above zero is evidence of
a kill for memory (counted by the cgroup's `memory.events`, or by the harness itself when it
killed a unit process over its memory per worker).
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from simrun_harness import store_reads
from simrun_harness.layout import TaskPaths

ReportRole = Literal["base", "extra", "merge", "exec"]


class UnitSeconds(BaseModel):
    """Wall seconds of the units this attempt completed."""

    model_config = ConfigDict(extra="ignore")

    count: int = 0
    median: float | None = None
    max: float | None = None

    @classmethod
    def of(cls, seconds: Sequence[float]) -> UnitSeconds:
        if not seconds:
            return cls()
        return cls(count=len(seconds), median=statistics.median(seconds), max=max(seconds))


class ReportError(BaseModel):
    """Why the attempt failed: the unit (None for a merge or run), message and traceback."""

    model_config = ConfigDict(extra="ignore")

    unit: str | None = None
    value: Any = None
    message: str
    traceback: str | None = None


class WorkerReport(BaseModel):
    """One attempt of one worker (or merge, or exec) of a task."""

    model_config = ConfigDict(extra="ignore")

    task: str
    worker: str
    role: ReportRole
    attempt: int = Field(ge=0)
    node: str
    processes: int = Field(ge=0)
    units_done: int = Field(0, ge=0)
    unit_seconds: UnitSeconds = Field(default_factory=UnitSeconds)
    peak_memory_per_process_gb: float | None = None
    """Peak resident memory of the largest unit process."""
    peak_memory_gb: float | None = None
    """Peak of the pod: anonymous memory of the cgroup, else the RSS of the process tree."""
    memory_source: Literal["cgroup", "processes"] = "processes"
    memory_limit_gb: float | None = None
    memory_per_worker_gb: float | None = None
    oom_kills: int = Field(0, ge=0)
    """Kills for memory: the cgroup's oom_kill count during the attempt plus harness kills."""
    harness_oom_kills: int = Field(0, ge=0)
    """The part of `oom_kills` the harness did itself (a unit process over its memory)."""
    claims_lost: int = Field(0, ge=0)
    """Units finished after their claim had been taken back (not counted)."""
    claims_returned: int = Field(0, ge=0)
    cpu_seconds: float | None = None
    """CPU seconds of the attempt: its main process from the attempt's start (a standby's
    imports before are not the attempt's) and the processes it ran and saw end."""
    main_cpu_seconds: float | None = None
    """The main process's part of `cpu_seconds` (claims, commits, progress: the harness's
    own cost besides the pool's)."""
    exit_code: int
    started_at: datetime
    ended_at: datetime
    error: ReportError | None = None


def write_report(path: Path, report: WorkerReport) -> None:
    """Write a report atomically (temporary name, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(report.model_dump(mode="json"), indent=2) + "\n")
    os.replace(tmp, path)


def read_report(path: Path) -> WorkerReport:
    """Read a report the harness wrote itself (raises OSError or pydantic.ValidationError)."""
    return WorkerReport.model_validate_json(path.read_text())


REPORT_MAX_BYTES = 1024 * 1024
"""A report is a few kilobytes; a larger file is not one."""


def task_report(paths: TaskPaths, name: str) -> WorkerReport:
    """The report `reports/<name>` of a task, read as the service reads a run's files: no
    link followed, at most REPORT_MAX_BYTES (raises OSError or ValueError)."""
    data = store_reads.read_bytes(paths.store_root, paths.reports / name, limit=REPORT_MAX_BYTES)
    return WorkerReport.model_validate_json(data)


def report_names(paths: TaskPaths) -> list[str]:
    """The names of a task's report files, sorted; none without a reports directory."""
    try:
        names = store_reads.names(paths.store_root, paths.reports)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if n.endswith(".json") and not n.startswith("."))


def task_reports(paths: TaskPaths) -> list[tuple[str, WorkerReport]]:
    """Every readable report of a task with its file name; unreadable ones are left out."""
    found = []
    for name in report_names(paths):
        try:
            found.append((name, task_report(paths, name)))
        except (OSError, ValueError):
            continue
    return found
