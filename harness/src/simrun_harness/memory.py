"""Memory of a pod and of its unit processes, from the cgroup where it can, else measured.

With cgroup v2 the pod's figure is the cgroup's anonymous memory (`memory.stat` anon: what
the processes allocated, not the page cache the kernel reclaims at the limit) and its kills
for memory are `memory.events` oom_kill. Without it (cgroup v1, no container) the pod's
figure is the resident memory of the harness's process tree. Peaks are sampled; the unit
processes also report their own high-water mark (`ru_maxrss`) after every job.
"""

from __future__ import annotations

import resource
import sys
from collections.abc import Iterable
from typing import Literal

import psutil

from simrun_harness.cgroup import Cgroup

GB = 1024**3


def own_peak_rss_bytes() -> int:
    """This process's peak resident memory (`ru_maxrss`, KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


def to_gb(value: int | None) -> float | None:
    return None if value is None else value / GB


class MemoryMeter:
    """Samples the pod and its unit processes and keeps the peaks."""

    def __init__(self, cgroup: Cgroup) -> None:
        self.cgroup = cgroup
        self._oom_at_start = cgroup.oom_kills()
        self.source: Literal["cgroup", "processes"] = (
            "cgroup" if cgroup.memory_anon_bytes() is not None else "processes"
        )
        self.peak_total = 0
        self.peak_process = 0
        self._own = psutil.Process()
        self._procs: dict[int, psutil.Process] = {}

    def _rss(self, pid: int) -> int | None:
        proc = self._procs.get(pid)
        try:
            if proc is None:
                proc = self._procs[pid] = psutil.Process(pid)
            return int(proc.memory_info().rss)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            self._procs.pop(pid, None)
            return None

    def sample(self, pids: Iterable[int]) -> dict[int, int]:
        """Resident bytes of each live process in `pids`; updates the peaks."""
        found: dict[int, int] = {}
        for pid in pids:
            rss = self._rss(pid)
            if rss is not None:
                found[pid] = rss
        if found:
            self.peak_process = max(self.peak_process, *found.values())
        total = self.cgroup.memory_anon_bytes() if self.source == "cgroup" else None
        if total is None:
            try:
                own = int(self._own.memory_info().rss)
            except psutil.Error:
                own = 0
            total = own + sum(found.values())
        self.peak_total = max(self.peak_total, total)
        return found

    def note_process_peak(self, peak_bytes: int) -> None:
        """A unit process's own high-water mark, reported after a job."""
        self.peak_process = max(self.peak_process, peak_bytes)

    def cgroup_oom_kills(self) -> int:
        """Kills of the out-of-memory killer in our cgroup since the meter started."""
        now = self.cgroup.oom_kills()
        if now is None:
            return 0
        return max(0, now - (self._oom_at_start or 0))

    def limit_gb(self, explicit_gb: float | None) -> float | None:
        """The pod's memory limit: SIMRUN_MEMORY_LIMIT_GB, else the cgroup's memory.max."""
        if explicit_gb is not None:
            return explicit_gb
        return to_gb(self.cgroup.memory_max_bytes())
