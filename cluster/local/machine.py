"""What this machine can give to runs: its cores and memory, less a margin for the service.

The memory is the smaller of the machine's and a cgroup limit of the service's container, so
a pod sized for the node is not killed by the container's limit first. Both are rounded down
to whole cores and GiB, as the cluster backend reports its nodes.
"""

from __future__ import annotations

import math
import os
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


def default_memory_gb() -> float:
    """The memory (or the cgroup's limit) less the margin, in whole GiB, at least 1."""
    total = psutil.virtual_memory().total
    limit = cgroup_memory_bytes()
    if limit is not None:
        total = min(total, limit)
    gib = total / GIB
    return float(max(1, math.floor(gib - max(MEMORY_MARGIN_GB, gib * MEMORY_MARGIN_SHARE))))
