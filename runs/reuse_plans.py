"""What a run's tasks can reuse, and why not more: keys, matching and their explanation.

Shared by the submission, which writes what it finds (`runs.services.reuse.plan_reuse`), and
the preview of a workflow before it runs (`runs.selectors.reuse_preview`), which writes
nothing the store keeps. Every key is made in the model's environment: the settings as the
type's settings model keys them (`1000` and `1000.0` of a float, any key order, a default
written or left out are one key), the plugin's digest, the units the plugin lists there.

A task of a million units is keyed and matched without holding its units or keys: the
plugin host writes the units one line each, the keys are written one line each as they are
read (`simrun_harness.reuse.write_unit_keys`), and an earlier task's keys are read beside
ours, line by line. What a split task reuses is kept as ranges of unit indices.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runs.models import Run, Task
from runs.planned_tasks import count_units
from runs.reuse import KeyDifference, KeyedTask, first_difference, task_key_parts
from runs.snapshots import MANIFEST, MANIFEST_MAX_BYTES
from runs.store import store, store_root, task_paths
from runs.task_types import COMMAND, CommandType, Types, check_class_settings
from runs.workflow import input_task
from simrun_harness import store_reads
from simrun_harness.layout import MERGE_MARKER
from simrun_harness.ledger_reads import UnitNames
from simrun_harness.reuse import UNITS_LIST_FILE, digest, read_unit_keys, write_unit_keys

MAX_CANDIDATES = 20
"""Earlier tasks with the same key looked at, newest first (the resumed run before them)."""
KEY_PARTS_FILE = "key.json"

Ranges = list[list[int]]
"""[start, end) ranges of unit indices, in order."""


@dataclass(frozen=True)
class TaskToKey:
    """A task as keying needs it."""

    task_id: str
    type: str
    splittable: bool
    settings: dict[str, Any]
    inputs: dict[str, str]


@dataclass
class TaskReuse:
    """What one task reuses: its key (and what it digests), its units, the plan for the
    harness, the record (run → ranges, or ["out"]) and why not more."""

    task_id: str
    key: str
    parts: dict[str, Any]
    units: int
    plan: dict[str, Any] = field(default_factory=dict)
    reused: dict[str, Any] = field(default_factory=dict)
    note: dict[str, Any] = field(default_factory=dict)

    @property
    def reused_count(self) -> int:
        return sum(count_reused(v) for v in self.reused.values())


def count_reused(value: Any) -> int:
    """Units of one source in a task's record: ranges, unit names (an earlier simrun), or
    ["out"] for an unsplit task's output."""
    return sum(r[1] - r[0] if isinstance(r, list) else 1 for r in value)


def keyed_settings(types: Types, task: TaskToKey) -> dict[str, Any]:
    """The settings as the type's model keys them (SettingsInvalid when it refuses them)."""
    if task.type == COMMAND:
        return check_class_settings(CommandType, task.settings)
    return types.check(task.type, task.settings)


def key_tasks(
    *,
    types: Types,
    environment: str,
    sources: list[str],
    tasks: list[TaskToKey],
    unique: str,
) -> dict[str, dict[str, Any]]:
    """What each task's key digests, in topological order; `unique` (the run's id) makes a
    `command` task's key, and so its dependents', match nothing."""
    keyed = []
    for task in tasks:
        version = "built-in" if task.type == COMMAND else types.plugin(task.type).digest
        keyed.append(
            KeyedTask(
                task_id=task.task_id,
                type=task.type,
                version=version,
                settings=keyed_settings(types, task),
                inputs=task.inputs,
                unique=unique if task.type == COMMAND else "",
            )
        )
    return task_key_parts(environment=environment, sources=sources, tasks=keyed)


def list_units(
    types: Types, task: TaskToKey, model: str | None, directory: Path
) -> tuple[Path, int]:
    """The units the plugin lists, one canonical JSON line each, in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    out = directory / UNITS_LIST_FILE
    model_dir = store().snapshot(model) if model else None
    count = count_units(types, task.task_id, task.type, task.settings, model_dir, out=out)
    return out, count


def _candidates(run_id: str, resume_from: str, key: str) -> list[tuple[str, str]]:
    """(run, task) of earlier tasks with this key: the resumed run first, then newest first."""
    found = list(
        Task.objects.filter(key=key)
        .exclude(run_id=run_id)
        .order_by("-run__created_at")
        .values_list("run_id", "task_id")[:MAX_CANDIDATES]
    )
    return sorted(found, key=lambda pair: pair[0] != resume_from)


def _ranges(flags: bytearray, value: int) -> Iterator[tuple[int, int]]:
    start = None
    for index, flag in enumerate(flags):
        if flag == value and start is None:
            start = index
        elif flag != value and start is not None:
            yield start, index
            start = None
    if start is not None:
        yield start, len(flags)


def match_units(
    *, run_id: str, resume_from: str, key: str, keys_file: Path, total: int
) -> tuple[dict[str, Any], dict[str, Ranges]]:
    """The units done in earlier tasks with the same unit key: (the harness's plan, run →
    ranges). Reads every key file line by line; holds one byte per unit."""
    taken = bytearray(total)  # 1: a source was found for the unit
    plan: list[list[Any]] = []
    reused: dict[str, Ranges] = {}
    names = UnitNames(total)  # named at each look: a million names held are 64 MB
    for source_run, source_task in _candidates(run_id, resume_from, key):
        if sum(taken) == total:
            break
        paths = task_paths(source_run, source_task)
        # another run's files: read without following a link its code may have put there
        theirs = read_unit_keys(paths.store_root, paths.root)
        if theirs is None:
            continue
        found = bytearray(total)
        try:
            with (
                _dir(paths.store_root, paths.done) as done,
                _dir(paths.store_root, paths.units) as units,
                keys_file.open() as mine,
            ):
                for index, (ours, their) in enumerate(zip(mine, theirs, strict=False)):
                    if index >= total or taken[index] or ours.rstrip("\n") != their:
                        continue
                    if _is(done, names[index], stat.S_ISREG) and _is(
                        units, names[index], stat.S_ISDIR
                    ):
                        found[index] = 1
                        taken[index] = 1
        except FileNotFoundError:  # no ledger yet, or its directories are links
            continue
        ranges = [[a, b] for a, b in _ranges(found, 1)]
        if ranges:
            plan.append([f"runs/{source_run}/tasks/{source_task}", ranges])
            reused[source_run] = ranges
    return ({"from": plan} if plan else {}), reused


@contextmanager
def _dir(store_root: Path, path: Path) -> Iterator[int]:
    """A directory of the store, reached without a link, listed once (which revalidates it
    on NFS, where a name looked up before it appeared may keep missing until then)."""
    with store_reads.directory(store_root, path) as fd:
        with os.scandir(fd) as scan:
            for _ in scan:
                pass
        yield fd


def _is(dir_fd: int, name: str, test: Callable[[int], bool]) -> bool:
    """Whether `name` in `dir_fd` is there and, not followed if a link, passes `test`."""
    try:
        return test(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def match_output(
    *, run_id: str, resume_from: str, key: str
) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """A published output of an unsplit task with the same key: (plan, run → ["out"])."""
    for source_run, source_task in _candidates(run_id, resume_from, key):
        paths = task_paths(source_run, source_task)
        if store_reads.is_file(paths.store_root, paths.out / MERGE_MARKER):
            return {"out": f"runs/{source_run}/tasks/{source_task}/out"}, {source_run: ["out"]}
    return {}, {}


def reuse_split_task(
    *,
    run_id: str,
    resume_from: str,
    key: str,
    units_file: Path,
    directory: Path,
    reuse: bool,
) -> tuple[int, dict[str, Any], dict[str, Ranges]]:
    """Key a split task's units into `directory` (`unit-keys.txt`) and, with reuse on, find
    what is done elsewhere: (units, plan, run → ranges)."""
    from simrun_harness.reuse import KEYS_FILE

    keys_file = directory / KEYS_FILE
    total = write_unit_keys(key, units_file, keys_file)
    if not reuse:
        return total, {}, {}
    plan, reused = match_units(
        run_id=run_id, resume_from=resume_from, key=key, keys_file=keys_file, total=total
    )
    return total, plan, reused


# -- why not more -----------------------------------------------------------------------------


def reference_task(run: Run, task_id: str, task_type: str) -> Task | None:
    """The earlier task a task is compared with: the resumed run's task of the same id, else
    the newest earlier task of the same id and type in a run of the same workflow name."""
    earlier = Task.objects.filter(task_id=task_id, type=task_type).exclude(run_id=run.id)
    if run.resume_from:
        found = earlier.filter(run_id=run.resume_from).first()
        if found is not None:
            return found
    return (
        earlier.filter(run__name=run.name, run__created_at__lte=run.created_at)
        .order_by("-run__created_at")
        .first()
    )


def stored_parts(run_id: str, task_id: str) -> dict[str, Any] | None:
    """What an earlier task's key digests, read without following a link."""
    paths = task_paths(run_id, task_id)
    try:
        parts = json.loads(
            store_reads.read_bytes(paths.store_root, paths.root / KEY_PARTS_FILE, limit=1 << 22)
        )
    except (OSError, ValueError):
        return None
    return parts if isinstance(parts, dict) else None


def _manifest(snapshot: str) -> dict[str, str]:
    """A snapshot's manifest (path → content digest), read without following a link; empty
    when it is absent, a link, too large or no JSON."""
    try:
        data = store_reads.read_bytes(
            store_root(), store().snapshot(snapshot) / MANIFEST, limit=MANIFEST_MAX_BYTES
        )
        entries = json.loads(data)
    except (OSError, ValueError):
        return {}
    if not isinstance(entries, list):
        return {}
    return {str(e[0]): str(e[1]) for e in entries if isinstance(e, list) and len(e) >= 2}


def differing_file(mine: str, theirs: str) -> str:
    """The first file (by path) that differs between two snapshots: changed, new or gone."""
    a, b = _manifest(mine), _manifest(theirs)
    for path in sorted(set(a) | set(b)):
        if a.get(path) != b.get(path):
            return path
    return ""


def describe_difference(diff: KeyDifference, run_id: str, inputs: dict[str, str]) -> str:
    """One line a user can act on: what differs from run `run_id`."""
    if diff.part == "environment":
        return (
            f"the model's environment differs from run {run_id}'s "
            f"({diff.mine[:12]} here, {diff.theirs[:12]} there: its pyproject.toml, lock, a "
            "local package, the Python or the harness changed)"
        )
    if diff.part == "plugin":
        return f"the plugin's code differs from run {run_id}'s ({diff.mine} here, {diff.theirs})"
    if diff.part == "type":
        return f"the task's type differs from run {run_id}'s ({diff.mine} here, {diff.theirs})"
    if diff.part == "setting":
        return (
            f"setting {diff.name!r} differs from run {run_id}'s "
            f"({diff.mine} here, {diff.theirs} there)"
        )
    if diff.part == "source":
        which = "the model" if diff.name == "0" else f"source {int(diff.name) + 1}"
        path = differing_file(diff.mine, diff.theirs) if diff.mine and diff.theirs else ""
        where = f": file {path!r} differs" if path else ""
        return f"{which} snapshot differs from run {run_id}'s{where}"
    if diff.part == "upstream":
        upstream = input_task(inputs.get(diff.name, diff.name))
        return (
            f"its input {diff.name!r} reads task {upstream!r}, whose key differs from run "
            f"{run_id}'s (see that task)"
        )
    return "a command task's output is never reused, nor anything after it"


def explain(
    *,
    run: Run,
    task: TaskToKey,
    mine: dict[str, Any],
    reused: dict[str, Any],
    units: int,
) -> dict[str, Any]:
    """Why a task reused what it did: {reused, units, compared_with, differs, text}."""
    count = sum(count_reused(v) for v in reused.values())
    note: dict[str, Any] = {"reused": count, "units": units}
    if not run.reuse:
        note["text"] = "reuse is off (--no-reuse)"
        return note
    if units and count == units:
        sources = ", ".join(sorted(reused))
        note["text"] = f"reused all {units} from {sources}"
        return note
    if mine.get("unique"):
        note["differs"] = {"part": "unique"}
        note["text"] = "a command task: never reused, nor what reads it"
        return note
    reference = reference_task(run, task.task_id, task.type)
    if reference is None:
        note["text"] = f"reused {count} of {units}: no earlier run of {run.name!r} to reuse from"
        return note
    note["compared_with"] = reference.run_id
    theirs = stored_parts(reference.run_id, reference.task_id)
    if theirs is None:
        note["text"] = (
            f"reused {count} of {units}: run {reference.run_id} was keyed by an earlier simrun"
            if reference.key
            else f"reused {count} of {units}: run {reference.run_id}'s task was never keyed"
        )
        return note
    if digest(theirs) == digest(mine):
        missing = units - count
        note["text"] = (
            f"reused {count} of {units}: the key is run {reference.run_id}'s; {missing} "
            f"unit(s) were not done there (or their outputs are gone)"
        )
        return note
    diff = first_difference(mine, theirs)
    if diff is None:
        note["text"] = f"reused {count} of {units}"
        return note
    note["differs"] = {
        "part": diff.part,
        "name": diff.name,
        "here": diff.mine,
        "there": diff.theirs,
    }
    if diff.part == "source" and diff.mine and diff.theirs:
        note["differs"]["file"] = differing_file(diff.mine, diff.theirs)
    note["text"] = f"reused {count} of {units}: " + describe_difference(
        diff, reference.run_id, task.inputs
    )
    return note
