"""`simrun-worker`: one worker of a split task, the coordinator (role base) or an extra.

The coordinator creates the ledger, computes units, returns stale claims to pending and
exits once every unit is done (merging first when SIMRUN_COORDINATOR_MERGES=1). An extra
waits for the ledger, computes units and exits when nothing is pending. Both heartbeat,
give their claims back on SIGTERM (exit 143), fail the task when a unit raises (exit 3) and
exit 137 when a process of their pool is killed. The main loop is single-threaded: it waits
on the pool's pipes, its processes and the signal pipe at once, with a timeout for the
heartbeat, the stale check and the memory watch.

Memory: the pod's limit is enforced, not one per process (`simrun_harness.memory`): when the
pod nears its limit its largest unit process is killed and the attempt exits 137, a kill
for memory. The unit that process held is marked in the ledger before its claim goes back,
so only an attempt with more memory per worker (the pod's retry after the kill) claims it
again; the coordinator runs it alone as a last resort if nobody does (`ledger`).
"""

from __future__ import annotations

import logging
import select
import time
import traceback
from collections import defaultdict
from typing import Any, NoReturn

from simrun_harness.attempt import Attempt
from simrun_harness.batching import queue_depth, results_may_wait, ring_at
from simrun_harness.config import (
    ConfigError,
    WorkerConfig,
    available_cores,
    resolve_processes,
    worker_config,
)
from simrun_harness.console import run_console
from simrun_harness.exits import (
    EXIT_ANALYSIS,
    EXIT_CONFIGURATION,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_POOL_BROKEN,
    EXIT_STORE,
    EXIT_TERMINATED,
)
from simrun_harness.jobs import Job, JobResult, JobRunner
from simrun_harness.ledger import Holder, Ledger, ledger_exists, unit_index, unit_names
from simrun_harness.ledger_creation import create_ledger
from simrun_harness.ledger_reads import read_total, read_units
from simrun_harness.merge import merge_output
from simrun_harness.plugin import SettingsError, SplitTaskType
from simrun_harness.pool import Death, ProcessPool
from simrun_harness.progress import ProgressWriter
from simrun_harness.report import ReportError
from simrun_harness.reuse import link_units, store_root_of
from simrun_harness.single_job import load_or_report
from simrun_harness.store_access import as_store_failure
from simrun_harness.taskfile import LoadedTask
from simrun_harness.termination import StopSignal

log = logging.getLogger("simrun")

LEDGER_POLL_S = 0.2


class Worker:
    """One attempt of one worker."""

    def __init__(self, config: WorkerConfig, stop: StopSignal) -> None:
        self.config = config
        self.stop = stop
        common = config.common
        self.holder = Holder(config.worker, common.attempt)
        self.attempt = Attempt(
            common, common.task_dir.name, config.worker, config.role, config.memory_per_worker_gb
        )
        self.base = config.role == "base"
        self.poll_s = min(1.0, config.heartbeat_s)
        self.held: set[str] = set()
        self._mean_s: float | None = None
        self._low = 1
        self._units: list[Any] = []
        self._exhausted = False
        self._next_beat = self._next_poll = self._next_sweep = 0.0

    def run(self) -> int:
        task = load_or_report(self.attempt)
        task_type = task.task_type
        if not isinstance(task_type, SplitTaskType):
            return self._config_error(f"type {task.file.type!r} is not splittable")
        common = self.config.common
        processes = resolve_processes(
            explicit=self.config.processes,
            cores=available_cores(self.config.cores, self.attempt.meter.cgroup.cpu_cores()),
            cores_per_process=task_type.hint.cores_per_process,
            memory_limit_gb=self.attempt.meter.limit_gb(common.memory_limit_gb),
            memory_base_gb=task_type.hint.memory_base_gb,
            memory_per_worker_gb=self.config.memory_per_worker_gb,
        )
        self.attempt.processes = processes
        early = self._ensure_ledger(task, task_type) if self.base else self._wait_for_ledger(task)
        if early is not None:
            return self.attempt.finish(early)
        ledger = Ledger(task.paths, self.holder, self.config.memory_per_worker_gb)
        runner = JobRunner(task_type, task.context, task.paths.units, self.holder.token)
        pool = ProcessPool(runner, processes)
        pool.start()
        progress = ProgressWriter(task.paths.progress, self.config.worker)
        ledger.heartbeat()
        log.info("%s (%s) runs %d processes", self.config.worker, self.config.role, processes)
        code = EXIT_FAILED
        try:
            self._log_returned(ledger.return_earlier_attempts(), progress)
            code = self._loop(task, ledger, pool, progress)
        except Exception as exc:  # a harness bug (exit 1) or a store that refused a write (5)
            failure = as_store_failure(exc, self.config.common.run_dir.resolve())
            if failure is not None:
                log.error("%s: %s", self.holder.token, failure)
                self.attempt.error = ReportError(message=str(failure))
                code = EXIT_STORE
            else:
                log.exception("%s: unexpected error", self.holder.token)
                self.attempt.error = ReportError(
                    message=f"harness error: {type(exc).__name__}: {exc}",
                    traceback=traceback.format_exc(),
                )
        finally:
            if code != EXIT_OK:
                pool.shutdown(kill=True)
                self._mark_memory_kill(ledger)
                self.attempt.claims_returned += ledger.give_back(sorted(self.held))
            pool.shutdown(kill=False)
            ledger.remove_heartbeat()
            progress.close()
        return self.attempt.finish(code)

    def _config_error(self, message: str) -> int:
        self.attempt.error = ReportError(message=message)
        self.attempt.finish(EXIT_CONFIGURATION)
        raise ConfigError(message)

    def _ensure_ledger(self, task: LoadedTask, task_type: SplitTaskType) -> int | None:
        """Create the ledger if it does not exist yet; an exit code if the units cannot be had."""
        if ledger_exists(task.paths):
            return None
        try:
            units = list(task_type.units(task.context))
        except SettingsError as exc:
            self._config_error(f"task {task.file.task!r}: {exc}")
        except Exception as exc:
            self.attempt.error = ReportError(
                message=f"listing the units raised {type(exc).__name__}: {exc}",
                traceback=traceback.format_exc(),
            )
            # in the pod's log too: `simrun logs` and the run page show the traceback
            log.error(
                "%s: listing the units raised:\n%s", self.holder.token, traceback.format_exc()
            )
            return EXIT_ANALYSIS
        reused = link_units(
            task.paths, store_root_of(self.config.common.run_dir), unit_names(len(units))
        )
        created = create_ledger(task.paths, units, self.holder, done=reused)
        log.info(
            "%s: ledger %s with %d units (%d reused)",
            self.config.worker,
            "created" if created else "found",
            len(units),
            len(reused),
        )
        return None

    def _wait_for_ledger(self, task: LoadedTask) -> int | None:
        """Extras may start before the coordinator: wait for its ledger (or a stop)."""
        waited = False
        while not ledger_exists(task.paths):
            if not waited:
                log.info("%s: waiting for the ledger of %s", self.config.worker, task.file.task)
                waited = True
            if self.stop.requested:
                return EXIT_TERMINATED
            select.select([self.stop.fileno()], [], [], LEDGER_POLL_S)
        return None

    def _loop(
        self, task: LoadedTask, ledger: Ledger, pool: ProcessPool, progress: ProgressWriter
    ) -> int:
        """Claim, dispatch and commit units until the worker's part is over; its exit code."""
        self._units = read_units(task.paths)
        total = read_total(task.paths)
        now = time.monotonic()
        self._next_beat = now + self.config.heartbeat_s
        self._next_poll = now + self.poll_s
        self._next_sweep = now + self.config.stale_s
        while True:
            if self.stop.requested:
                log.warning(
                    "%s: signal %s, giving back %d claims",
                    self.holder.token,
                    self.stop.signum,
                    len(self.held),
                )
                return EXIT_TERMINATED
            polled = self._periodic(ledger, progress)
            self._dispatch(ledger, pool)
            if pool.busy == 0 and self._exhausted:
                code = self._idle(task, ledger, pool, total, polled=polled)
                if code is not None:
                    return code
            code = self._collect(ledger, pool, progress)
            progress.flush()  # the lines of this wake's units, in one write
            if code is not None:
                return code

    def _periodic(self, ledger: Ledger, progress: ProgressWriter) -> bool:
        """Heartbeat, and on every poll the coordinator's stale check; whether it polled."""
        now = time.monotonic()
        if now >= self._next_beat:
            ledger.heartbeat()
            self._next_beat = now + self.config.heartbeat_s
        if now < self._next_poll:
            return False
        self._next_poll = now + self.poll_s
        self._exhausted = False
        if self.base:
            self._log_returned(ledger.reclaim_stale(self.config.stale_s), progress)
            if now >= self._next_sweep:  # a listing of every unit output: not every poll
                self._sweep(ledger)
                self._next_sweep = now + self.config.stale_s
        return True

    def _dispatch(self, ledger: Ledger, pool: ProcessPool) -> None:
        """Claim units for processes whose queue ran low, and send each its batch at once.

        A process is topped up to its depth once half of it is left (never while a long unit
        runs: the depth is then 1), or once it rang, whatever half is by then, so short units
        go out in batches of claims, one message per batch rather than per unit. Near the end
        no process queues more than its share of what is left, so none idles while another
        works through a long queue; a process that rang but holds that share already has its
        ring let go (`ProcessPool.unring`): its results are read as they come until it is low.
        """
        low, depth = queue_depth(
            self._mean_s, left=ledger.candidates_left(), processes=pool.processes
        )
        self._low = low
        while not self._exhausted and (slot := pool.due_slot(low)) is not None:
            batch: list[Job] = []
            while len(slot.outstanding) + len(batch) < depth:
                name = ledger.claim()
                if name is None:
                    self._exhausted = True
                    break
                self.held.add(name)
                batch.append(Job("unit", name, self._units[unit_index(name)]))
            if batch:
                pool.submit(slot, *batch, ring_at=ring_at(low))
            elif not self._exhausted:  # it rang, but the depth fell below what it holds
                pool.unring(slot)

    def _idle(
        self, task: LoadedTask, ledger: Ledger, pool: ProcessPool, total: int, *, polled: bool
    ) -> int | None:
        """Nothing to claim and nothing running: exit, or (the coordinator) the last resort."""
        if not self.base:
            return EXIT_OK
        if ledger.done_count() >= total:
            self._sweep(ledger)
            return self._complete(task, pool)
        if polled and (name := ledger.claim_memory_killed(self.config.stale_s)):
            log.warning(
                "%s: nobody at more memory took %s, which was killed for memory: running it alone",
                self.holder.token,
                name,
            )
            self.held.add(name)
            idle = pool.free_slot(1)
            assert idle is not None, "an idle pool has a free process"
            pool.submit(idle, Job("unit", name, self._units[unit_index(name)]))
        return None

    def _collect(self, ledger: Ledger, pool: ProcessPool, progress: ProgressWriter) -> int | None:
        """Wait for results (or a signal, or the next timer) and commit them; an exit code
        when a unit raised or a pool process died.

        While every process has enough queued, results wait unread until one runs low and
        rings (`results_may_wait`): the worker wakes once for a batch of them, not once per
        unit; a death or a signal still wakes it at once. Their progress lines go out in one
        write per wake (`_loop`).
        """
        timeout = min(self._next_beat, self._next_poll) - time.monotonic()
        timeout = min(timeout, self.attempt.watch(pool))
        linger = results_may_wait(pool.queues(), low=self._low)
        for event in pool.wait(timeout, wake=[self.stop.fileno()], linger=linger):
            if isinstance(event, Death):
                self.attempt.broken_by(event)
                error = self.attempt.error
                log.error("%s: %s", self.holder.token, error.message if error else "")
                return EXIT_POOL_BROKEN
            self.attempt.record_result(event)
            if not event.ok:
                log.error(
                    "%s: unit %s raised:\n%s", self.holder.token, event.job.name, event.traceback
                )
                return self.attempt.fail_with(event)
            self._commit(ledger, progress, event)
        return None

    def _sweep(self, ledger: Ledger) -> None:
        """Remove the half-written outputs of units done elsewhere by holders that are gone."""
        removed = ledger.sweep_partials(self.config.stale_s)
        if removed:
            log.info("%s: removed abandoned partial outputs %s", self.holder.token, removed)

    def _mark_memory_kill(self, ledger: Ledger) -> None:
        """Mark the unit whose process was killed for memory, before its claim is given back."""
        name = self.attempt.memory_killed_unit
        if name is None or name not in self.held:
            return
        try:
            ledger.mark_memory_kill(
                name,
                memory_per_worker_gb=self.config.memory_per_worker_gb,
                memory_limit_gb=self.attempt.meter.limit_gb(self.config.common.memory_limit_gb),
            )
        except OSError as exc:  # the claim still goes back; the unit is merely unmarked
            log.error("%s: cannot mark %s killed for memory: %s", self.holder.token, name, exc)
            return
        log.warning(
            "%s: %s was killed for memory at %g GB per worker: only an attempt with more"
            " memory per worker claims it again",
            self.holder.token,
            name,
            self.config.memory_per_worker_gb,
        )

    def _commit(self, ledger: Ledger, progress: ProgressWriter, result: JobResult) -> None:
        name = result.job.name
        assert name is not None
        self.held.discard(name)
        if not ledger.commit(name):
            self.attempt.claims_lost += 1
            log.warning(
                "%s: the claim of %s was taken back meanwhile; not counted", self.holder.token, name
            )
            return
        self.attempt.units_done += 1
        self.attempt.unit_seconds.append(result.seconds)
        self._mean_s = (
            result.seconds if self._mean_s is None else 0.8 * self._mean_s + 0.2 * result.seconds
        )
        progress.unit_done(name, result.seconds, result.peak_rss_bytes / 1024**3)

    def _log_returned(self, returned: list[tuple[str, str]], progress: ProgressWriter) -> None:
        """Record claims taken back (from stale holders, or from our own earlier attempts)."""
        by_holder: dict[str, list[str]] = defaultdict(list)
        for name, token in returned:
            by_holder[token].append(name)
        for token, names in by_holder.items():
            log.warning("%s: took back the claims of %s: %s", self.holder.token, token, names)
            progress.claims_returned(names, token)

    def _complete(self, task: LoadedTask, pool: ProcessPool) -> int:
        """Every unit is done: the coordinator exits, merging first if it is to."""
        log.info("%s: every unit is done", self.config.worker)
        if not self.config.coordinator_merges:
            return EXIT_OK
        return merge_output(task, pool, self.stop, self.attempt, self.holder.token)


def _main() -> int:
    stop = StopSignal()
    return Worker(worker_config(), stop).run()


def main() -> NoReturn:
    """Console script `simrun-worker`."""
    run_console("simrun-worker", _main)
