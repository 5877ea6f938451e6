"""One attempt of a harness process: what it did, turned into its report at the end.

It also watches the pod's memory (`watch`) and enforces the rule of `simrun_harness.memory`:
when the pod nears its limit the largest unit process is killed, a kill for memory like the
kernel's (exit 137, counted in the report's `oom_kills` and `harness_oom_kills`).
"""

from __future__ import annotations

import logging
import resource
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from simrun_harness.cgroup import Cgroup, own_cgroup_dir
from simrun_harness.config import CommonConfig
from simrun_harness.exits import (
    EXIT_ANALYSIS,
    EXIT_CONFIGURATION,
    EXIT_OK,
    EXIT_POOL_BROKEN,
    EXIT_TERMINATED,
)
from simrun_harness.jobs import Job, JobResult
from simrun_harness.layout import TaskPaths
from simrun_harness.memory import GB, MemoryMeter, largest, pod_over_limit, to_gb
from simrun_harness.pool import Death, ProcessPool
from simrun_harness.report import (
    ReportError,
    ReportRole,
    UnitSeconds,
    WorkerReport,
    write_report,
)
from simrun_harness.termination import StopSignal

log = logging.getLogger("simrun")

MEMORY_SAMPLE_S = 0.2
"""How often the pod and its unit processes are measured (and checked against the limit)."""


@dataclass
class Attempt:
    """Counters of an attempt; `finish` writes the report and returns the exit code."""

    config: CommonConfig
    task_id: str
    worker: str
    role: ReportRole
    memory_per_worker_gb: float | None = None
    processes: int = 0
    units_done: int = 0
    unit_seconds: list[float] = field(default_factory=list)
    claims_lost: int = 0
    claims_returned: int = 0
    harness_oom_kills: int = 0
    error: ReportError | None = None
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    meter: MemoryMeter = field(init=False)
    killed_for_memory: dict[int, str] = field(default_factory=dict)
    """Unit processes the harness killed for memory, and why."""
    memory_killed_unit: str | None = None
    """The unit whose process was killed for memory (by the harness or the kernel)."""
    _next_sample: float = 0.0
    _limit_bytes: float | None = None
    _cpu_at_start: tuple[float, float] = field(default_factory=lambda: _cpu_used())

    def __post_init__(self) -> None:
        root = self.config.cgroup_root or own_cgroup_dir()
        self.meter = MemoryMeter(Cgroup(root), self.config.memory_limit_gb)
        limit_gb = self.meter.limit_gb(self.config.memory_limit_gb)
        self._limit_bytes = None if limit_gb is None else limit_gb * GB

    @property
    def report_path(self) -> Path:
        return TaskPaths(self.config.task_dir).report(self.worker, self.config.attempt)

    def watch(self, pool: ProcessPool, *, enforce: bool = True) -> float:
        """Measure memory when due; with `enforce`, kill a unit process for memory.

        The pod's limit is enforced: when the pod nears it (`memory.pod_over_limit`) its
        largest unit process is killed. Only without a known pod limit is a process over its
        memory per worker killed instead. Returns the seconds until the next measurement.
        """
        now = time.monotonic()
        if now < self._next_sample:
            return self._next_sample - now
        self._next_sample = now + MEMORY_SAMPLE_S
        sample = self.meter.sample(pool.pids())
        if not enforce or self.killed_for_memory:
            return MEMORY_SAMPLE_S  # one kill breaks the pool: the attempt is ending
        if self._limit_bytes is not None:
            if pod_over_limit(sample.total, self._limit_bytes):
                pid = largest(sample.processes)
                if pid is not None:
                    self._kill(
                        pool,
                        pid,
                        f"the largest unit process ({sample.processes[pid] / GB:.3f} GB) of a pod"
                        f" at {sample.total / GB:.3f} GB of its {self._limit_bytes / GB:.3f} GB"
                        " limit",
                    )
        elif self.memory_per_worker_gb is not None:
            per_worker = self.memory_per_worker_gb * GB
            over = {pid: used for pid, used in sample.processes.items() if used > per_worker}
            pid = largest(over)
            if pid is not None:
                self._kill(
                    pool,
                    pid,
                    f"a unit process at {over[pid] / GB:.3f} GB, above its"
                    f" {self.memory_per_worker_gb:.3f} GB per worker (no pod limit known)",
                )
        return MEMORY_SAMPLE_S

    def _kill(self, pool: ProcessPool, pid: int, why: str) -> None:
        log.error("pool process %d killed for memory: %s", pid, why)
        self.killed_for_memory[pid] = why
        self.harness_oom_kills += 1
        pool.kill(pid)

    def run_job(self, pool: ProcessPool, job: Job, stop: StopSignal, *, enforce: bool) -> int:
        """Run one job (a merge, an unsplit run) on the pool; the exit code it comes to."""
        slot = pool.free_slot(depth=1)
        assert slot is not None, "run_job needs an idle pool"
        pool.submit(slot, job)
        while True:
            if stop.requested:
                log.warning(
                    "%s: stopped by signal %s during the %s", self.worker, stop.signum, job.kind
                )
                pool.shutdown(kill=True)
                return EXIT_TERMINATED
            timeout = self.watch(pool, enforce=enforce)
            for event in pool.wait(timeout, wake=[stop.fileno()]):
                if isinstance(event, Death):
                    self.broken_by(event)
                    pool.shutdown(kill=True)
                    return EXIT_POOL_BROKEN
                self.record_result(event)
                if not event.ok:
                    log.error("%s: the %s raised:\n%s", self.worker, job.kind, event.traceback)
                    return self.fail_with(event)
                return EXIT_OK
            stop.drain()

    def record_result(self, result: JobResult) -> None:
        self.meter.note_process_peak(result.peak_rss_bytes)

    def fail_with(self, result: JobResult) -> int:
        """A job raised: the analysis failed (3), or its settings cannot work (4)."""
        self.error = ReportError(
            unit=result.job.name,
            value=result.job.value,
            message=result.message or "the job raised",
            traceback=result.traceback,
        )
        return EXIT_CONFIGURATION if result.settings_error else EXIT_ANALYSIS

    def broken_by(self, death: Death) -> None:
        """A pool process died: name it, its job, and whether it was killed for memory.

        Killed for memory: by the harness (`watch`), or by the kernel (the cgroup's oom_kill
        count rose). The unit it held is then `memory_killed_unit`.
        """
        harness = self.killed_for_memory.get(death.pid)
        kernel = harness is None and self.meter.cgroup_oom_kills() > 0
        if harness is not None:
            why = f"killed for memory by the harness: {harness}"
        elif kernel:
            why = "killed by the out-of-memory killer"
        else:
            why = "died"
        if (harness is not None or kernel) and death.job is not None:
            self.memory_killed_unit = death.job.name
        code = death.exitcode
        self.error = ReportError(
            unit=death.job.name if death.job else None,
            value=death.job.value if death.job else None,
            message=f"pool process {death.pid} {why} (exit code {code})",
        )

    def finish(self, exit_code: int) -> int:
        """Write the report of this attempt; returns `exit_code`."""
        meter = self.meter
        per_process = to_gb(meter.peak_process) if meter.peak_process else None
        main_start, children_start = self._cpu_at_start
        main_now, children_now = _cpu_used()
        report = WorkerReport(
            task=self.task_id,
            worker=self.worker,
            role=self.role,
            attempt=self.config.attempt,
            node=self.config.node,
            processes=self.processes,
            units_done=self.units_done,
            unit_seconds=UnitSeconds.of(self.unit_seconds),
            peak_memory_per_process_gb=per_process,
            peak_memory_gb=to_gb(meter.peak_total) if meter.peak_total else None,
            memory_source=meter.source,
            memory_limit_gb=meter.limit_gb(self.config.memory_limit_gb),
            memory_per_worker_gb=self.memory_per_worker_gb,
            oom_kills=meter.cgroup_oom_kills() + self.harness_oom_kills,
            harness_oom_kills=self.harness_oom_kills,
            claims_lost=self.claims_lost,
            claims_returned=self.claims_returned,
            cpu_seconds=round(main_now - main_start + children_now - children_start, 3),
            main_cpu_seconds=round(main_now - main_start, 3),
            exit_code=exit_code,
            started_at=self.started_at,
            ended_at=datetime.now(UTC),
            error=self.error,
        )
        try:
            write_report(self.report_path, report)
        except OSError as exc:
            log.error("cannot write the report %s: %s", self.report_path, exc)
        log.info(
            "%s exits %d: %d units done, peak %.3f GB per process",
            self.worker,
            exit_code,
            self.units_done,
            per_process or 0.0,
        )
        return exit_code


def _cpu_used() -> tuple[float, float]:
    """CPU seconds (user and system) of this process, and of its children that ended."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    ended = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, ended.ru_utime + ended.ru_stime
