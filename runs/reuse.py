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
from simrun_harness.reuse import KEY_FORMAT, canonical, digest


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


def task_key_parts(
    *, environment: str, sources: list[str], tasks: list[KeyedTask]
) -> dict[str, dict[str, Any]]:
    """What each task's key digests (kept beside the task, `key.json`, so a later run can say
    which part differed); `tasks` in topological order (a task after what it reads)."""
    keys: dict[str, str] = {}
    parts: dict[str, dict[str, Any]] = {}
    for task in tasks:
        inputs = {
            port: [keys[input_task(ref)], input_path(ref)] for port, ref in task.inputs.items()
        }
        parts[task.task_id] = {
            "format": KEY_FORMAT,
            "environment": environment,
            "sources": list(sources),
            "type": task.type,
            "version": task.version,
            "settings": dict(task.settings),
            "inputs": inputs,
            "unique": task.unique,
        }
        keys[task.task_id] = digest(parts[task.task_id])
    return parts


def task_keys(*, environment: str, sources: list[str], tasks: list[KeyedTask]) -> dict[str, str]:
    """The key of every task; `tasks` in topological order (a task after what it reads)."""
    parts = task_key_parts(environment=environment, sources=sources, tasks=tasks)
    return {task_id: digest(part) for task_id, part in parts.items()}


@dataclass(frozen=True)
class KeyDifference:
    """The first part of two tasks' keys that differs: `part` is one of environment, plugin,
    type, setting, source, upstream, unique; `name` the setting, the source's place or the
    input port; `mine` and `theirs` the two values (as short text)."""

    part: str
    name: str = ""
    mine: str = ""
    theirs: str = ""


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else canonical(value)
    return text if len(text) <= 40 else text[:37] + "..."


def first_difference(
    mine: Mapping[str, Any], theirs: Mapping[str, Any], *, names: Mapping[str, str] | None = None
) -> KeyDifference | None:
    """Which part of a task's key (`task_key_parts`) differs from an earlier task's, in the
    order a user would look: the environment, the plugin's code, the type, a setting (the
    first by name), a source snapshot (by its place: the model first), an upstream task (by
    input port; `names` maps a port to the task it reads). None when none does."""
    if mine.get("environment") != theirs.get("environment"):
        return KeyDifference(
            "environment", mine=_short(mine["environment"]), theirs=_short(theirs["environment"])
        )
    if mine.get("type") != theirs.get("type"):
        return KeyDifference("type", mine=str(mine.get("type")), theirs=str(theirs.get("type")))
    if mine.get("version") != theirs.get("version"):
        return KeyDifference(
            "plugin", mine=str(mine.get("version")), theirs=str(theirs.get("version"))
        )
    settings, earlier = mine.get("settings", {}), theirs.get("settings", {})
    for name in sorted(set(settings) | set(earlier)):
        if canonical(settings.get(name)) != canonical(earlier.get(name)):
            return KeyDifference(
                "setting", name, _short(settings.get(name)), _short(earlier.get(name))
            )
    sources, before = list(mine.get("sources", [])), list(theirs.get("sources", []))
    for index in range(max(len(sources), len(before))):
        a = sources[index] if index < len(sources) else ""
        b = before[index] if index < len(before) else ""
        if a != b:
            return KeyDifference("source", str(index), a, b)
    inputs, read = mine.get("inputs", {}), theirs.get("inputs", {})
    for port in sorted(set(inputs) | set(read)):
        if inputs.get(port) != read.get(port):
            return KeyDifference("upstream", port, (names or {}).get(port, port))
    if mine.get("unique") or theirs.get("unique"):
        return KeyDifference("unique")
    return None
