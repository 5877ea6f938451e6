"""The keys of tasks and units: what decides an output, as one digest (docs/reuse.md).

A task's key digests the environment, the source snapshots, the task's type and its version,
its settings and, for each input port, the key of the task it reads (and the part of its
output). A changed setting or source so changes the key of the task it touches and, through
the inputs, of every task after it; resources and priorities are not part of it. A unit's key
adds the unit's place and value (`simrun_harness.reuse.unit_keys`). Plain values only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runs.workflow import input_path, input_task
from simrun_harness.reuse import KEY_FORMAT, digest


@dataclass(frozen=True)
class KeyedTask:
    """What of a task goes into its key."""

    task_id: str
    type: str
    version: str
    settings: Mapping[str, Any]
    inputs: Mapping[str, str]
    unique: str = ""
    """Set to make the key match nothing (a `command` task, whose output no key can vouch
    for: its dependents are then computed again too)."""


def task_keys(*, environment: str, sources: list[str], tasks: list[KeyedTask]) -> dict[str, str]:
    """The key of every task; `tasks` in topological order (a task after what it reads)."""
    keys: dict[str, str] = {}
    for task in tasks:
        inputs = {
            port: [keys[input_task(ref)], input_path(ref)] for port, ref in task.inputs.items()
        }
        keys[task.task_id] = digest(
            {
                "format": KEY_FORMAT,
                "environment": environment,
                "sources": list(sources),
                "type": task.type,
                "version": task.version,
                "settings": task.settings,
                "inputs": inputs,
                "unique": task.unique,
            }
        )
    return keys
