"""CPU seconds of the parts of the stack while a benchmark runs, sampled from /proc.

A thread reads every process every `every` seconds and keeps, per process (pid and start
time), the last user + system seconds it saw, under the part the process belongs to:

    web         the web process of the embedded default (`simrun serve`)
    celery      the Celery worker and its pool processes
    watcher     the `simrun watch` process (the controller loop and the backend's loop)
    supervisor  the supervisors of the pods (memory polling, signals)
    pod         a pod's main process (`simrun-worker`, `simrun-merge`: claims, progress)
    units       the pool processes of a worker pod (the units' own work)
    merge       the merge pod and its pool
    postgres    Postgres backends serving the benchmark's database
    bench       this process (polling the database and the files, and this sampler)

A process that ends loses what it used after its last sample (at most `every` seconds).

A sample reads one small file per process of the machine (`/proc/<pid>/stat`: parent, name,
start time, CPU) and works out the part of a process once it is a second old (by then a
forked child has run `exec`): ~2 ms for 100 processes, where psutil's `process_iter` with
command lines took ~12 ms. The sampler's CPU competes with simrun (not with the bare pool,
which it does not run beside), so it is kept small.
"""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from dataclasses import dataclass

PARTS = ("web", "celery", "watcher", "supervisor", "pod", "units", "merge", "postgres", "bench")
TICKS = os.sysconf("SC_CLK_TCK")

SETTLED_S = 1.0
"""A process's part is kept once it is this old: a forked child runs `exec` well before."""

Key = tuple[int, int, str]
"""(pid, start time in ticks, name): one process (a name changes at `exec`)."""


@dataclass(frozen=True)
class Stat:
    """What a sample needs of one process, from `/proc/<pid>/stat`."""

    key: Key
    ppid: int
    seconds: float

    def settled(self, uptime: float) -> bool:
        return uptime - self.key[1] / TICKS >= SETTLED_S


# a pod's supervisor: started for its attempt, or started ahead as a standby and handed it
# (the next standby, importing while the run goes on, counts too: it is simrun's work)
SUPERVISORS = ("cluster.local.supervisor", "cluster.local.standby_supervisor")


def _uptime() -> float:
    with open("/proc/uptime", "rb") as handle:
        return float(handle.read().split()[0])


def _stat(pid: int) -> Stat | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    name_end = raw.rindex(b")")  # the name may hold spaces and parentheses
    name = raw[raw.index(b"(") + 1 : name_end].decode(errors="replace")
    fields = raw[name_end + 2 :].split()  # fields[0] is the state (field 3)
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    return Stat((pid, int(fields[19]), name), int(fields[1]), ticks / TICKS)


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


class CpuSampler:
    """Samples the stack's processes in a background thread between `start` and `stop`."""

    def __init__(
        self,
        *,
        celery: int,
        watcher: int,
        database: str,
        store: str,
        web: int | None = None,
        every: float = 0.5,
    ) -> None:
        self.roots = {celery: "celery", watcher: "watcher"} | ({web: "web"} if web else {})
        self.store = store
        self.database = database
        self.every = every
        self.seen: dict[Key, tuple[str, float]] = {}
        self.before: dict[Key, float] = {}
        self._parts: dict[Key, str | None] = {}  # of settled processes
        self._texts: dict[Key, str] = {}  # their command lines
        self._uptime = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._bench_start = 0.0

    def start(self) -> CpuSampler:
        self._bench_start = time.process_time()
        self._sample()
        self.before = {key: seconds for key, (_, seconds) in self.seen.items()}
        self._thread.start()
        return self

    def stop(self, *, ended_at: float | None = None) -> dict[str, float]:
        """CPU seconds per part between `start` and now; with `ended_at` (time.time), of the
        processes started before it only (what starts once the work ended, the next
        standby importing, is not the work's)."""
        self._stop.set()
        self._thread.join()
        self._sample()
        if ended_at is not None:
            limit = (ended_at - time.time() + _uptime()) * TICKS  # in ticks since boot
            self.seen = {key: value for key, value in self.seen.items() if key[1] <= limit}
        # one process per (pid, start time): a name it took meanwhile (a standby handed its
        # attempt renames itself) is the same process, whose CPU before `start` is not ours
        latest: dict[tuple[int, int], tuple[str, float]] = {}
        before: dict[tuple[int, int], float] = {}
        for key, (part, seconds) in self.seen.items():
            if seconds >= latest.get(key[:2], ("", -1.0))[1]:
                latest[key[:2]] = (part, seconds)
        for key, seconds in self.before.items():
            before[key[:2]] = min(seconds, before.get(key[:2], seconds))
        totals: dict[str, float] = defaultdict(float)
        for process, (part, seconds) in latest.items():
            totals[part] += seconds - before.get(process, 0.0)
        totals["bench"] = time.process_time() - self._bench_start
        return {part: totals.get(part, 0.0) for part in PARTS}

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self._sample()

    def _sample(self) -> None:
        me = os.getpid()
        self._uptime = _uptime()
        procs: dict[int, Stat] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != me:
                stat = _stat(int(entry))
                if stat is not None:
                    procs[stat.key[0]] = stat
        for stat in procs.values():
            # A settled process keeps its part: an ended one waiting to be reaped (a zombie)
            # has no command line any more and would pass for its parent's.
            if stat.key in self._parts:
                part = self._parts[stat.key]
            else:
                part = self._part(stat.key[0], procs)
                if stat.settled(self._uptime):
                    self._parts[stat.key] = part
            if part is not None:
                self.seen[stat.key] = (part, stat.seconds)

    def _text(self, pid: int, procs: dict[int, Stat]) -> str:
        """A process's command line (read once it settled; at every sample before)."""
        stat = procs[pid]
        if stat.key in self._texts:
            return self._texts[stat.key]
        text = _cmdline(pid)
        if stat.settled(self._uptime):
            self._texts[stat.key] = text
        return text

    def _part(self, pid: int, procs: dict[int, Stat]) -> str | None:
        """The part a process belongs to; None for a process of someone else."""

        def ours(p: int) -> bool:  # a supervisor (or a standby's) of this stack's store
            text = self._text(p, procs)
            return any(name in text for name in SUPERVISORS) and self.store in text

        if pid in self.roots:  # the Celery worker's and the watcher's own processes
            return self.roots[pid]
        text = self._text(pid, procs)
        if self.database and text.startswith("postgres:") and f" {self.database} " in text + " ":
            return "postgres"
        if any(name in text for name in SUPERVISORS):
            return "supervisor" if ours(pid) else None
        parent, current, hops = procs[pid].ppid, procs[pid].ppid, 0
        while current in procs and hops < 50:
            if ours(current):
                if "simrun-merge" in text:
                    return "merge"
                return "pod" if current == parent else "units"
            if current in self.roots:
                return self.roots[current]
            current, hops = procs[current].ppid, hops + 1
        return None
