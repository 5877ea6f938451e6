"""The process pool that runs units (and merges and unsplit runs) of a task type.

A small pool of forked processes, one pipe each, instead of `multiprocessing.Pool` (which
silently replaces a killed process and hangs) or `ProcessPoolExecutor` (which cannot say
which job a dead process held). The parent waits on the pipes, the processes' sentinels and
the signal wake-up pipe at once, so a result, a death and a SIGTERM are all seen at once.

The processes are forked before the parent starts any thread; they inherit the loaded task
type and its settings, ignore SIGTERM/SIGINT (the parent decides when they stop) and die
with their parent (PR_SET_PDEATHSIG) so a killed worker leaves no orphan computing.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import multiprocessing
import os
import selectors
import shutil
import signal
import sys
import time
import traceback
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Literal

from simrun_harness.memory import own_peak_rss_bytes
from simrun_harness.plugin import (
    SettingsError,
    SplitTaskType,
    TaskContext,
    TaskType,
    UnsplitTaskType,
)

JobKind = Literal["unit", "merge", "run"]
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Job:
    """One piece of work for a pool process."""

    kind: JobKind
    name: str | None = None
    value: Any = None
    out: str | None = None
    unit_dirs: tuple[str, ...] = ()


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


@dataclass(frozen=True)
class Death:
    """A pool process ended without being asked to: the pool is broken."""

    pid: int
    exitcode: int | None
    job: Job | None


PoolEvent = JobResult | Death
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
            self.task_type.merge(self.context, [Path(p) for p in job.unit_dirs], out)
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
        final = os.path.join(self.units_dir, name)
        if os.path.isdir(final):
            return True
        tmp = self.units_dir / f".{name}.{self.token}.{os.getpid()}"
        try:
            os.mkdir(tmp)
        except FileExistsError:  # left by a killed run of this process id
            shutil.rmtree(tmp)
            os.mkdir(tmp)
        try:
            task_type.run_unit(self.context, value, tmp)
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


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass


def _outcome(runner: JobRunner, job: Job) -> Outcome:
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


def _child_main(conn: Connection, runner: JobRunner, index: int, parent: int) -> None:
    _die_with_parent()
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.set_wakeup_fd(-1)
    runner.setup(index)
    while True:
        try:
            batch = conn.recv()
        except (EOFError, OSError):
            return
        if batch is None:
            return
        for job in batch:  # one outcome per job, sent at once: a death names its own job
            conn.send(_outcome(runner, job))


@dataclass
class Slot:
    """One pool process and the jobs sent to it, oldest first."""

    index: int
    process: BaseProcess
    conn: Connection
    outstanding: deque[Job] = field(default_factory=deque)
    ended: bool = False

    @property
    def pid(self) -> int:
        assert self.process.pid is not None
        return self.process.pid


class ProcessPool:
    """`processes` forked processes running jobs through a `JobRunner`."""

    def __init__(self, runner: JobRunner, processes: int) -> None:
        self.runner = runner
        self.processes = processes
        self.slots: list[Slot] = []
        # One selector for the pool's life: `multiprocessing.connection.wait` and
        # `Connection.poll` build and fill a new one on every call, three per unit.
        self._selector: selectors.BaseSelector | None = None
        self._wake: set[int] = set()

    def start(self) -> None:
        context = multiprocessing.get_context("fork")
        for index in range(self.processes):
            parent_end, child_end = context.Pipe(duplex=True)
            process = context.Process(
                target=_child_main,
                args=(child_end, self.runner, index, os.getpid()),
                name=f"simrun-unit-{index}",
                daemon=True,
            )
            process.start()
            child_end.close()
            self.slots.append(Slot(index, process, parent_end))
        self._selector = selectors.DefaultSelector()  # after the forks: not inherited
        for slot in self.slots:
            self._selector.register(slot.conn.fileno(), selectors.EVENT_READ, slot)
            self._selector.register(slot.process.sentinel, selectors.EVENT_READ, slot)

    def _forget(self, slot: Slot) -> None:
        """Stop watching an ended process's pipe and sentinel."""
        if self._selector is None:
            return
        for fd in (slot.conn.fileno(), slot.process.sentinel):
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.unregister(fd)

    @property
    def busy(self) -> int:
        return sum(len(slot.outstanding) for slot in self.slots)

    def pids(self) -> list[int]:
        return [slot.pid for slot in self.slots if not slot.ended]

    def free_slot(self, depth: int) -> Slot | None:
        """The live process with the fewest outstanding jobs, if it has fewer than `depth`."""
        live = [slot for slot in self.slots if not slot.ended]
        if not live:
            return None
        slot = min(live, key=lambda s: len(s.outstanding))
        return slot if len(slot.outstanding) < depth else None

    def submit(self, slot: Slot, *jobs: Job) -> None:
        """Send jobs to a process in one message; it runs them in order."""
        slot.outstanding.extend(jobs)
        with contextlib.suppress(OSError):  # a dead process: its sentinel reports the death
            slot.conn.send(jobs)

    def held_jobs(self) -> list[Job]:
        return [job for slot in self.slots for job in slot.outstanding]

    def wait(self, timeout: float, wake: Sequence[int] = ()) -> list[PoolEvent]:
        """Results and deaths, waiting up to `timeout` s or until a `wake` fd is readable.

        One result is read per ready pipe and call; a pipe holding more stays ready, so the
        next call returns at once with it.
        """
        assert self._selector is not None, "the pool is not started"
        for fd in set(wake) - self._wake:
            self._selector.register(fd, selectors.EVENT_READ, None)
            self._wake.add(fd)
        ready = self._selector.select(max(0.0, timeout))
        readable = {key.fd for key, _ in ready}
        events: list[PoolEvent] = []
        for slot in self.slots:
            if slot.ended:
                continue
            died = slot.process.sentinel in readable
            if died:
                events += self._drain(slot)
            elif slot.conn.fileno() in readable:
                try:
                    events.append(self._received(slot, slot.conn.recv()))
                except (EOFError, OSError):
                    died = True
            if died:
                slot.process.join(0.5)
                slot.ended = True
                self._forget(slot)
                job = slot.outstanding[0] if slot.outstanding else None
                slot.outstanding.clear()
                events.append(Death(slot.pid, slot.process.exitcode, job))
        return events

    def _received(self, slot: Slot, outcome: Outcome) -> JobResult:
        return JobResult(slot.outstanding.popleft(), *outcome)

    def _drain(self, slot: Slot) -> list[PoolEvent]:
        """The results a process sent before it died."""
        found: list[PoolEvent] = []
        with contextlib.suppress(EOFError, OSError):
            while slot.conn.poll():
                found.append(self._received(slot, slot.conn.recv()))
        return found

    def kill(self, pid: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    def shutdown(self, *, kill: bool) -> None:
        """Stop every process: ask them (after their jobs), or kill them at once."""
        for slot in self.slots:
            if slot.ended:
                continue
            if kill:
                self.kill(slot.pid)
            else:
                with contextlib.suppress(OSError):
                    slot.conn.send(None)
        for slot in self.slots:
            if slot.ended:
                continue
            slot.process.join(None if kill else 5.0)
            if slot.process.exitcode is None:
                self.kill(slot.pid)
                slot.process.join()
            slot.ended = True
            self._forget(slot)
            slot.conn.close()
        if self._selector is not None and all(slot.ended for slot in self.slots):
            self._selector.close()
            self._selector = None
            self._wake.clear()
