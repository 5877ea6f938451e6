"""CPU seconds of the parts of the stack while a benchmark runs, sampled from /proc.

A thread reads every process every `every` seconds and keeps, per process (pid and start
time), the last user + system seconds it saw, under the part the process belongs to:

    celery      the Celery worker and its pool processes
    watcher     the `simrun watch` process (the controller loop and the backend's loop)
    supervisor  the supervisors of the pods (memory polling, signals)
    pod         a pod's main process (`simrun-worker`, `simrun-merge`: claims, progress)
    units       the pool processes of a worker pod (the units' own work)
    merge       the merge pod and its pool
    postgres    Postgres backends serving the benchmark's database
    bench       this process (polling the database and the files, and this sampler)

A process that ends loses what it used after its last sample (at most `every` seconds).
"""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict

import psutil

PARTS = ("celery", "watcher", "supervisor", "pod", "units", "merge", "postgres", "bench")


class CpuSampler:
    """Samples the stack's processes in a background thread between `start` and `stop`."""

    def __init__(
        self, *, celery: int, watcher: int, database: str, store: str, every: float = 0.5
    ) -> None:
        self.roots = {celery: "celery", watcher: "watcher"}
        self.store = store
        self.database = database
        self.every = every
        self.seen: dict[tuple[int, float], tuple[str, float]] = {}
        self.before: dict[tuple[int, float], float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._bench_start = 0.0
        self._bench = 0.0

    def start(self) -> CpuSampler:
        self._bench_start = time.process_time()
        self._sample()
        self.before = {key: seconds for key, (_, seconds) in self.seen.items()}
        self._thread.start()
        return self

    def stop(self) -> dict[str, float]:
        """CPU seconds per part between `start` and now."""
        self._stop.set()
        self._thread.join()
        self._sample()
        totals: dict[str, float] = defaultdict(float)
        for key, (part, seconds) in self.seen.items():
            totals[part] += seconds - self.before.get(key, 0.0)
        totals["bench"] = time.process_time() - self._bench_start
        return {part: totals.get(part, 0.0) for part in PARTS}

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self._sample()

    def _sample(self) -> None:
        procs = {}
        for proc in psutil.process_iter(["pid", "ppid", "cmdline", "create_time", "cpu_times"]):
            info = proc.info
            if info["cpu_times"] is None or info["create_time"] is None:
                continue
            procs[info["pid"]] = info
        for pid, info in procs.items():
            if pid == os.getpid():
                continue
            key = (pid, info["create_time"])
            # An ended process waiting to be reaped (a zombie) has no command line any more
            # and would pass for its parent's: it keeps the part it had.
            ended = not info["cmdline"] and key in self.seen
            part = self.seen[key][0] if ended else self._part(pid, procs)
            if part is not None:
                times = info["cpu_times"]
                self.seen[key] = (part, times.user + times.system)

    def _part(self, pid: int, procs: dict[int, dict]) -> str | None:
        """The part a process belongs to; None for a process of someone else."""

        def cmdline(p: int) -> str:
            return " ".join(procs[p]["cmdline"] or [])

        def ours(p: int) -> bool:  # a supervisor of a pod of this stack's store
            text = cmdline(p)
            return "cluster.local.supervisor" in text and self.store in text

        text = cmdline(pid)
        if text.startswith("postgres:") and f" {self.database} " in f"{text} ":
            return "postgres"
        if "cluster.local.supervisor" in text:
            return "supervisor" if ours(pid) else None
        parent, current, hops = procs[pid]["ppid"], procs[pid]["ppid"], 0
        while current in procs and hops < 50:
            if ours(current):
                if "simrun-merge" in text:
                    return "merge"
                return "pod" if current == parent else "units"
            if current in self.roots:
                return self.roots[current]
            current, hops = procs[current]["ppid"], hops + 1
        return None
