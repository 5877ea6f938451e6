"""The process pool that runs units (and merges and unsplit runs) of a task type.

A small pool of forked processes, one pipe each, instead of `multiprocessing.Pool` (which
silently replaces a killed process and hangs) or `ProcessPoolExecutor` (which cannot say
which job a dead process held). The parent waits on the pipes, the processes' sentinels and
the signal wake-up pipe at once, so a result, a death and a SIGTERM are all seen at once.
A parent whose processes have work queued may let results wait unread (`wait`'s `linger`)
and sleep until a process running low rings (one pipe shared by the pool), so it wakes
once per batch of short units rather than once per unit.

The processes are forked before the parent starts any thread; they inherit the loaded task
type and its settings, ignore SIGTERM/SIGINT (the parent decides when they stop) and die
with their parent (PR_SET_PDEATHSIG) so a killed worker leaves no orphan computing.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import multiprocessing
import os
import pickle
import select
import selectors
import signal
import struct
import sys
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from simrun_harness.batching import wants_more
from simrun_harness.jobs import Job, JobResult, JobRunner, Outcome, run_job

_PR_SET_PDEATHSIG = 1
READ_BYTES = 1 << 16  # a read of a process's pipe: many results of short units at once


@dataclass(frozen=True)
class Death:
    """A pool process ended without being asked to: the pool is broken."""

    pid: int
    exitcode: int | None
    job: Job | None


PoolEvent = JobResult | Death


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass


def _child_main(
    conn: Connection, runner: JobRunner, index: int, parent: int, ring: tuple[int, int]
) -> None:
    _die_with_parent()
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.set_wakeup_fd(-1)
    os.close(ring[0])
    runner.setup(index)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        batch, ring_at = message
        # The batches before this one are done: its jobs are all this process holds.
        for left, job in zip(range(len(batch), 0, -1), batch, strict=True):
            if ring_at is not None and left <= ring_at:
                # Once, before the job (a batch of no more than `ring_at` rings as it comes):
                # running low, wake the parent, which may let results wait.
                ring_at = None
                with contextlib.suppress(BlockingIOError):
                    os.write(ring[1], b"r")
            # at once: a death names its own job; plain pickle of a tuple of plain values
            conn.send_bytes(pickle.dumps(run_job(runner, job), pickle.HIGHEST_PROTOCOL))


@dataclass
class Slot:
    """One pool process and the jobs sent to it, oldest first."""

    index: int
    process: BaseProcess
    conn: Connection
    outstanding: deque[Job] = field(default_factory=deque)
    ended: bool = False
    ring_point: int | None = None
    """The jobs it holds when it rings for its last batch (`ProcessPool.submit`): it has rung
    once it holds no more. None: no ring was asked for, or the worker let a spent one go
    (`ProcessPool.unring`)."""
    fd: int = -1  # the parent's end of its pipe: read raw, every result there at once
    sentinel: int = -1
    unread: bytearray = field(default_factory=bytearray)  # a result read in part

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
        # Deaths, rings and wake fds: what ends a wait while results may wait unread.
        self._urgent: selectors.BaseSelector | None = None
        self._wake: set[int] = set()
        self._ring: tuple[int, int] | None = None  # written by a process running low

    def start(self) -> None:
        context = multiprocessing.get_context("fork")
        # What is loaded now (the harness, the task type, their imports) lives as long as
        # the processes: kept out of every collection, so no process's first full
        # collection walks it all (and writes to every page of it, copying them).
        gc.freeze()
        self._ring = os.pipe()
        for fd in self._ring:
            os.set_blocking(fd, False)
        for index in range(self.processes):
            parent_end, child_end = context.Pipe(duplex=True)
            process = context.Process(
                target=_child_main,
                args=(child_end, self.runner, index, os.getpid(), self._ring),
                name=f"simrun-unit-{index}",
                daemon=True,
            )
            process.start()
            child_end.close()
            slot = Slot(index, process, parent_end, fd=parent_end.fileno())
            slot.sentinel = process.sentinel
            self.slots.append(slot)
        self._selector = selectors.DefaultSelector()  # after the forks: not inherited
        self._urgent = selectors.DefaultSelector()
        for selector in (self._selector, self._urgent):
            selector.register(self._ring[0], selectors.EVENT_READ, None)
        for slot in self.slots:
            self._selector.register(slot.conn.fileno(), selectors.EVENT_READ, slot)
            self._selector.register(slot.process.sentinel, selectors.EVENT_READ, slot)
            self._urgent.register(slot.process.sentinel, selectors.EVENT_READ, slot)

    def _forget(self, slot: Slot) -> None:
        """Stop watching an ended process's pipe and sentinel."""
        for selector in (self._selector, self._urgent):
            if selector is None:
                continue
            for fd in (slot.conn.fileno(), slot.process.sentinel):
                with contextlib.suppress(KeyError, ValueError, OSError):
                    selector.unregister(fd)

    @property
    def busy(self) -> int:
        return sum(len(slot.outstanding) for slot in self.slots)

    def queues(self) -> list[tuple[int, int | None]]:
        """(jobs held, the running one included; jobs left in its last batch when it rings)
        of each live process."""
        return [(len(slot.outstanding), slot.ring_point) for slot in self.slots if not slot.ended]

    def pids(self) -> list[int]:
        return [slot.pid for slot in self.slots if not slot.ended]

    def free_slot(self, depth: int) -> Slot | None:
        """The live process with the fewest outstanding jobs, if it has fewer than `depth`."""
        live = [slot for slot in self.slots if not slot.ended]
        if not live:
            return None
        slot = min(live, key=lambda s: len(s.outstanding))
        return slot if len(slot.outstanding) < depth else None

    def due_slot(self, low: int) -> Slot | None:
        """The live process with the fewest outstanding jobs of those the worker tops up:
        below `low`, or rung (`batching.wants_more`)."""
        due = [
            slot
            for slot in self.slots
            if not slot.ended and wants_more(len(slot.outstanding), slot.ring_point, low=low)
        ]
        return min(due, key=lambda s: len(s.outstanding), default=None)

    def unring(self, slot: Slot) -> None:
        """Forget a spent ring: the process rang, but holds enough still (the depth fell), so
        its results are read as they come until it is low."""
        slot.ring_point = None

    def submit(self, slot: Slot, *jobs: Job, ring_at: int | None = None) -> None:
        """Send jobs to a process in one message; it runs them in order.

        With `ring_at`, the process rings once the jobs of this batch it has left to run
        fall to `ring_at` (as it takes the batch, if the batch is no longer): that ends a
        `wait` that lets results wait (`linger`).
        """
        slot.outstanding.extend(jobs)
        slot.ring_point = ring_at
        with contextlib.suppress(OSError):  # a dead process: its sentinel reports the death
            slot.conn.send((jobs, ring_at))

    def held_jobs(self) -> list[Job]:
        return [job for slot in self.slots for job in slot.outstanding]

    def wait(
        self, timeout: float, wake: Sequence[int] = (), *, linger: float = 0.0
    ) -> list[PoolEvent]:
        """Results and deaths, waiting up to `timeout` s or until a `wake` fd is readable.

        A result ends the wait only after `linger` s (a death, a ring or a wake fd ends it at
        once), so a caller whose processes have work queued wakes once for a batch of
        results, not once per result. Every result ready when the wait ends is returned.
        """
        assert self._selector is not None and self._urgent is not None, "the pool is not started"
        for fd in set(wake) - self._wake:
            self._selector.register(fd, selectors.EVENT_READ, None)
            self._urgent.register(fd, selectors.EVENT_READ, None)
            self._wake.add(fd)
        timeout = max(0.0, timeout)
        if linger > 0 and self._urgent.select(min(timeout, linger)):
            timeout = 0.0  # a death, a ring or a wake fd: return with the results ready
        elif linger > 0:
            timeout = max(0.0, timeout - linger)
        events: list[PoolEvent] = []
        readable = {key.fd for key, _ in self._selector.select(timeout)}
        while readable:
            if self._ring is not None and self._ring[0] in readable:
                with contextlib.suppress(BlockingIOError):  # what it announced is read below
                    os.read(self._ring[0], 4096)
            if not self._read(readable, events):
                break
            readable = {key.fd for key, _ in self._selector.select(0)}  # sent meanwhile
        return events

    def _read(self, readable: set[int], events: list[PoolEvent]) -> bool:
        """The results of each readable pipe (every one it holds, in one read), or a death;
        whether there was any."""
        found = False
        for slot in self.slots:
            if slot.ended:
                continue
            died = slot.sentinel in readable
            if died:
                self._take(slot, events, until_end=True)
            elif slot.fd in readable:
                died = not self._take(slot, events)
            if died:
                slot.process.join(0.5)
                slot.ended = True
                self._forget(slot)
                job = slot.outstanding[0] if slot.outstanding else None
                slot.outstanding.clear()
                events.append(Death(slot.pid, slot.process.exitcode, job))
            found = found or died or slot.fd in readable
        return found

    def _take(self, slot: Slot, events: list[PoolEvent], *, until_end: bool = False) -> bool:
        """Read what a process's pipe holds and make results of its whole messages (framed
        as `Connection.send_bytes` frames them); False at its end. `until_end` (the process
        died): everything it sent before, never waiting (a child of its unit may still hold
        the pipe open)."""
        while True:
            if until_end and not select.select([slot.fd], [], [], 0)[0]:
                return True
            try:
                data = os.read(slot.fd, READ_BYTES)
            except OSError:
                return False
            if not data:
                return False
            slot.unread += data
            events += self._results(slot)
            if not until_end:
                return True

    def _results(self, slot: Slot) -> list[PoolEvent]:
        """The results of the whole messages read so far (the rest waits for more bytes)."""
        found: list[PoolEvent] = []
        data, at = slot.unread, 0
        while len(data) - at >= 4:
            (size,) = struct.unpack_from("!i", data, at)
            head = 4
            if size == -1:  # a message of 2 GiB or more: its size follows in 8 bytes
                if len(data) - at < 12:
                    break
                (size,) = struct.unpack_from("!Q", data, at + 4)
                head = 12
            if len(data) - at - head < size:
                break
            found.append(self._received(slot, bytes(data[at + head : at + head + size])))
            at += head + size
        del data[:at]
        return found

    def _received(self, slot: Slot, data: bytes) -> JobResult:
        outcome: Outcome = pickle.loads(data)  # a tuple our own process made (`run_job`)
        return JobResult(slot.outstanding.popleft(), *outcome)

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
            if self._urgent is not None:
                self._urgent.close()
                self._urgent = None
            if self._ring is not None:
                for fd in self._ring:
                    os.close(fd)
                self._ring = None
            self._wake.clear()
