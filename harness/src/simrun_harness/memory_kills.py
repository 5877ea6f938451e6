"""The marks of units whose process was killed for memory (`ledger/memory_kills/<unit>`).

A mark holds the memory per worker (and the pod's limit) of the attempt the unit broke; the
ledger lets only an attempt with more memory per worker claim the unit again (see
`simrun_harness.ledger`). Marks are written to a temporary name and renamed into place, and
only ever raised: a later kill at less memory leaves the mark as it is.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime

from simrun_harness.layout import TaskPaths


@dataclass(frozen=True)
class MemoryKill:
    """The mark of a unit whose process was killed for memory: the attempt it broke."""

    memory_per_worker_gb: float
    memory_limit_gb: float | None
    holder: str


def read_memory_kills(paths: TaskPaths) -> dict[str, MemoryKill]:
    """The units marked killed for memory (an unreadable mark counts as one at no memory)."""
    try:
        names = os.listdir(paths.memory_kills)
    except FileNotFoundError:
        return {}
    found: dict[str, MemoryKill] = {}
    for name in names:
        if name.startswith("."):
            continue
        try:
            data = json.loads((paths.memory_kills / name).read_text())
            limit = data.get("memory_limit_gb")
            found[name] = MemoryKill(
                memory_per_worker_gb=float(data["memory_per_worker_gb"]),
                memory_limit_gb=None if limit is None else float(limit),
                holder=str(data.get("holder", "")),
            )
        except FileNotFoundError:
            continue
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            found[name] = MemoryKill(memory_per_worker_gb=0.0, memory_limit_gb=None, holder="")
    return found


def write_memory_kill(paths: TaskPaths, name: str, kill: MemoryKill) -> None:
    """Mark unit `name` killed for memory at `kill`'s memory, unless marked at more already."""
    paths.memory_kills.mkdir(exist_ok=True)
    earlier = read_memory_kills(paths).get(name)
    if earlier is not None and earlier.memory_per_worker_gb >= kill.memory_per_worker_gb:
        return
    record = {
        "memory_per_worker_gb": kill.memory_per_worker_gb,
        "memory_limit_gb": kill.memory_limit_gb,
        "holder": kill.holder,
        "at": datetime.now(UTC).isoformat(),
    }
    tmp = paths.memory_kills / f".{name}.{kill.holder}.{os.getpid()}"
    tmp.write_text(json.dumps(record))
    os.replace(tmp, paths.memory_kills / name)
