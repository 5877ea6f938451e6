"""Memory of a pod and of its unit processes, and the rule the harness enforces on it.

Measurement. With cgroup v2 the pod's figure is the cgroup's anonymous memory (`memory.stat`
anon: what the processes allocated, not the page cache the kernel reclaims at the limit) and
its kills for memory are `memory.events` oom_kill. The cgroup counts only when it is the
pod's own: its `memory.max` is the pod's limit (or no limit was given); its kills count then
even without `memory.stat` (the cluster simulator writes only `memory.max` and
`memory.events`). Otherwise (cgroup
v1, no container, a local pod inside the service's cgroup) the pod's figure is the anonymous
memory (RSS less file-backed pages) of the worker and its unit processes, as the local
supervisor measures it. Peaks are sampled; the unit processes also report their own
high-water mark (`ru_maxrss`) after every job.

The rule (`pod_over_limit`): the pod's limit is enforced, not a limit per process. When the
pod's memory comes within `headroom_bytes` of its limit, the harness kills its largest unit
process, which breaks the pool: the attempt is killed for memory (exit 137, counted in
`oom_kills`), before the kernel (or the local supervisor) would kill the whole pod at the
limit. The memory per worker is the share of the pod's budget a process is planned for, not
a cap: one unit may use more while others use less. Only without any known pod limit is a
unit process over its memory per worker killed (the fallback).
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from simrun_harness.cgroup import Cgroup

GB = 1024**3
HEADROOM_FRACTION = 0.03
HEADROOM_MIN_BYTES = 32 * 1024**2
"""The harness kills before the pod's limit by max(3 % of it, 32 MiB): memory grows between
two samples, and a kill by the kernel at the limit would take the whole pod with it."""
OWN_CGROUP_TOLERANCE = 0.01
"""A cgroup whose memory.max is within 1 % (pages, rounding) of the pod's limit is the pod's."""


def own_peak_rss_bytes() -> int:
    """This process's peak resident memory (`ru_maxrss`, KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


def to_gb(value: int | None) -> float | None:
    return None if value is None else value / GB


def headroom_bytes(limit_bytes: float) -> float:
    """How far below its limit a pod's memory makes the harness kill a unit process."""
    return max(limit_bytes * HEADROOM_FRACTION, HEADROOM_MIN_BYTES)


def pod_over_limit(total_bytes: float, limit_bytes: float) -> bool:
    """Whether a pod using `total_bytes` is near enough its limit to kill a unit process."""
    return total_bytes >= limit_bytes - headroom_bytes(limit_bytes)


def largest(used: Mapping[int, int]) -> int | None:
    """The process using the most memory (the lowest pid on a tie), None without any."""
    if not used:
        return None
    return min(used, key=lambda pid: (-used[pid], pid))


def _anonymous(info: Any) -> int:
    """RSS less file-backed pages where the platform says (Linux `shared`)."""
    return max(0, int(info.rss) - int(getattr(info, "shared", 0)))


PROC = "/proc"
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _statm(pid: int | str) -> tuple[int, int] | None:
    """(resident, anonymous) bytes from `/proc/<pid>/statm` (resident less file-backed and
    shared pages, as psutil's rss and shared); None once the process is gone.

    One small read, where psutil (imported only off Linux) costs its import at every start
    and an object per process.
    """
    try:
        with open(f"{PROC}/{pid}/statm", "rb") as statm:
            fields = statm.read().split()
    except OSError:
        return None
    resident = int(fields[1]) * _PAGE
    return resident, max(0, resident - int(fields[2]) * _PAGE)


def _limit_is_pods(cgroup: Cgroup, explicit_limit_gb: float | None) -> bool:
    """Whether the cgroup's `memory.max` is the pod's limit (any, when none was given)."""
    if explicit_limit_gb is None:
        return True
    limit = cgroup.memory_max_bytes()
    wanted = explicit_limit_gb * GB
    return limit is not None and abs(limit - wanted) <= wanted * OWN_CGROUP_TOLERANCE


def is_pods_cgroup(cgroup: Cgroup, explicit_limit_gb: float | None) -> bool:
    """Whether `cgroup` measures this pod alone: v2 files, and its limit is the pod's."""
    return cgroup.memory_anon_bytes() is not None and _limit_is_pods(cgroup, explicit_limit_gb)


def counts_pods_kills(cgroup: Cgroup, explicit_limit_gb: float | None) -> bool:
    """Whether the cgroup's `memory.events` counts this pod's kills for memory: the file
    exists and its `memory.max` is the pod's limit (any, when no limit was given). It may
    count them where `memory.stat` is missing (the cluster simulator's containers)."""
    return cgroup.oom_kills() is not None and _limit_is_pods(cgroup, explicit_limit_gb)


@dataclass(frozen=True)
class Sample:
    """One measurement: resident bytes of each live unit process, and the pod's total."""

    processes: dict[int, int]
    total: int


class MemoryMeter:
    """Samples the pod and its unit processes and keeps the peaks."""

    def __init__(self, cgroup: Cgroup, explicit_limit_gb: float | None = None) -> None:
        self.cgroup = cgroup
        self._oom_at_start = cgroup.oom_kills()
        self.source: Literal["cgroup", "processes"] = (
            "cgroup" if is_pods_cgroup(cgroup, explicit_limit_gb) else "processes"
        )
        self.counts_kills = self.source == "cgroup" or counts_pods_kills(cgroup, explicit_limit_gb)
        self.peak_total = 0
        self.peak_process = 0
        self._proc_fs = os.path.exists(f"{PROC}/self/statm")
        self._procs: dict[int, Any] = {}  # psutil's processes, without /proc

    def _memory(self, pid: int | None) -> tuple[int, int] | None:
        """(resident, anonymous) bytes of a unit process (None: our own), None once gone."""
        if self._proc_fs:
            return _statm("self" if pid is None else pid)
        import psutil  # only where there is no /proc

        key = os.getpid() if pid is None else pid
        try:
            proc = self._procs.get(key) or self._procs.setdefault(key, psutil.Process(key))
            info = proc.memory_info()
        except psutil.Error:
            self._procs.pop(key, None)
            return None
        return int(info.rss), _anonymous(info)

    def sample(self, pids: Iterable[int]) -> Sample:
        """Measure the live processes of `pids` and the pod; updates the peaks."""
        found: dict[int, int] = {}
        anonymous = 0
        for pid in pids:
            memory = self._memory(pid)
            if memory is not None:
                found[pid] = memory[0]
                anonymous += memory[1]
        if found:
            self.peak_process = max(self.peak_process, *found.values())
        total = self.cgroup.memory_anon_bytes() if self.source == "cgroup" else None
        if total is None:
            own = self._memory(None)
            total = (own[1] if own else 0) + anonymous
        self.peak_total = max(self.peak_total, total)
        return Sample(found, total)

    def note_process_peak(self, peak_bytes: int) -> None:
        """A unit process's own high-water mark, reported after a job."""
        self.peak_process = max(self.peak_process, peak_bytes)

    def cgroup_oom_kills(self) -> int:
        """Kills of the out-of-memory killer in our cgroup since the meter started."""
        if not self.counts_kills:
            return 0
        now = self.cgroup.oom_kills()
        if now is None:
            return 0
        return max(0, now - (self._oom_at_start or 0))

    def limit_gb(self, explicit_gb: float | None) -> float | None:
        """The pod's memory limit: SIMRUN_MEMORY_LIMIT_GB, else the cgroup's memory.max."""
        if explicit_gb is not None:
            return explicit_gb
        if self.source != "cgroup":
            return None
        return to_gb(self.cgroup.memory_max_bytes())
