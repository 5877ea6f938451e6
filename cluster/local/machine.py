"""What this machine can give to runs: its cores, memory and scratch disk, less a margin.

The memory is the smaller of the machine's and a cgroup limit of the service's container, so
a pod sized for the node is not killed by the container's limit first. The scratch is the
free disk where the pods' scratch directories live (the backend's state directory), measured
whenever the nodes are asked for. All are rounded down to whole cores and GiB, as the cluster
backend reports its nodes.
"""

from __future__ import annotations

import math
import os
import shutil
import socket
from pathlib import Path

import psutil

GIB = 1024**3
MEMORY_MARGIN_GB = 1.0  # at least this much is left to the service and the system
MEMORY_MARGIN_SHARE = 0.1  # ... or this share of the memory, whichever is more
CGROUP_LIMITS = (
    Path("/sys/fs/cgroup/memory.max"),  # cgroup v2
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),  # cgroup v1
)


def machine_name() -> str:
    """The node name of this machine: its host name."""
    return socket.gethostname() or "localhost"


def cgroup_memory_bytes() -> int | None:
    """The memory limit of this process's cgroup, None without one."""
    for path in CGROUP_LIMITS:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:
            return int(text)
    return None


def default_cores() -> float:
    """The CPUs this process may use, less one for the service on machines of four or more."""
    try:
        count = len(os.sched_getaffinity(0))
    except AttributeError:
        count = os.cpu_count() or 1
    return float(count - 1 if count >= 4 else count)


SCRATCH_MARGIN_GB = 1.0  # at least this much disk is left to the store and the system
SCRATCH_MARGIN_SHARE = 0.1  # ... or this share of the free disk, whichever is more


def free_scratch_gb(path: Path) -> float:
    """The free disk of the file system holding `path` (or its nearest existing parent) less
    the margin, in whole GiB, at least 0: the scratch pods of this machine may ask for."""
    found = path
    while not found.exists() and found != found.parent:
        found = found.parent
    gib = shutil.disk_usage(found).free / GIB
    return float(max(0, math.floor(gib - max(SCRATCH_MARGIN_GB, gib * SCRATCH_MARGIN_SHARE))))


def default_memory_gb() -> float:
    """The memory (or the cgroup's limit) less the margin, in whole GiB, at least 1."""
    total = psutil.virtual_memory().total
    limit = cgroup_memory_bytes()
    if limit is not None:
        total = min(total, limit)
    gib = total / GIB
    return float(max(1, math.floor(gib - max(MEMORY_MARGIN_GB, gib * MEMORY_MARGIN_SHARE))))
