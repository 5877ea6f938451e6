"""Limits and usage of the cgroup (v2) the harness runs in.

Every reader returns None where the file or the field does not exist (cgroup v1 hosts, a
process outside a container): the caller then measures the processes themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CGROUP_MOUNT = Path("/sys/fs/cgroup")
_PROC_CGROUP = Path("/proc/self/cgroup")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _field(text: str | None, key: str) -> int | None:
    """The value of `key` in a flat keyed file such as memory.stat or memory.events."""
    if text is None:
        return None
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            try:
                return int(value)
            except ValueError:
                return None
    return None


def own_cgroup_dir(mount: Path = CGROUP_MOUNT, proc_file: Path = _PROC_CGROUP) -> Path:
    """The directory of this process's v2 cgroup (the mount itself inside a container)."""
    text = _read(proc_file) or ""
    for line in text.splitlines():
        if line.startswith("0::"):
            candidate = mount / line[3:].lstrip("/")
            if (candidate / "memory.stat").exists() or (candidate / "cpu.max").exists():
                return candidate
    return mount


@dataclass(frozen=True)
class Cgroup:
    """The v2 files of one cgroup directory."""

    root: Path

    def cpu_cores(self) -> float | None:
        """Cores allowed by `cpu.max` (quota ÷ period), None without a quota."""
        text = _read(self.root / "cpu.max")
        if not text:
            return None
        quota, _, period = text.partition(" ")
        if quota == "max":
            return None
        try:
            return int(quota) / int(period or "100000")
        except ValueError:
            return None

    def memory_max_bytes(self) -> int | None:
        """The hard limit of `memory.max`, None without one."""
        text = _read(self.root / "memory.max")
        if text is None or text == "max":
            return None
        try:
            return int(text)
        except ValueError:
            return None

    def memory_anon_bytes(self) -> int | None:
        """Anonymous memory now (`memory.stat` anon): what processes allocated, no page cache."""
        return _field(_read(self.root / "memory.stat"), "anon")

    def memory_peak_bytes(self) -> int | None:
        """`memory.peak`: the high-water mark including page cache (kernels 5.19+)."""
        text = _read(self.root / "memory.peak")
        try:
            return int(text) if text else None
        except ValueError:
            return None

    def oom_kills(self) -> int | None:
        """Processes of the cgroup the out-of-memory killer killed (`memory.events` oom_kill)."""
        return _field(_read(self.root / "memory.events"), "oom_kill")
