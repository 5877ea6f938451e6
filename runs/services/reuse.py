"""Deciding, at submission, which units of a run reuse the outputs of earlier runs.

Once the environment is known (`submit_run`), every task gets its key (`runs.reuse`), a split
task's units their keys (`unit-keys.json` in the task directory: the store's index of what a
unit is), and the tasks whose key an earlier task of the store shares find there the units
already done (its ledger's `done/`, whose outputs are in place) with the same unit key. What
is found is written to the task's `reuse.json` for the harness, which links the outputs
before any unit is claimed, and recorded in the task's row (`Task.reused`: run → units).
"""

from __future__ import annotations

import json
import logging
import os
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from typing import Any

from django.db import transaction

from runs.local_packages import tree_digest
from runs.models import Run, Task
from runs.refusals import SubmissionRefused
from runs.reuse import KeyedTask, task_keys
from runs.store import has_merge_marker, store, task_paths
from runs.task_types import COMMAND, plugins, registry
from simrun_harness import store_reads
from simrun_harness.layout import TaskPaths
from simrun_harness.ledger import unit_names
from simrun_harness.plugin import SplitTaskType, TaskContext
from simrun_harness.reuse import KEYS_FILE, REUSE_FILE, unit_keys

log = logging.getLogger(__name__)

MAX_CANDIDATES = 20
KEYS_MAX = 128 * 1024 * 1024
"""The largest unit-keys file of an earlier run read (about 80 bytes a unit)."""
"""Earlier tasks with the same key looked at, newest first (the resumed run before them)."""


def check_resume(*, reuse: bool, resume_from: str | None) -> None:
    """SubmissionRefused unless `resume_from` (if given) names a run and reuse is on."""
    if not resume_from:
        return
    if not reuse:
        raise SubmissionRefused(
            "resume_from: a resumed run reuses done units; it cannot be combined with no reuse"
        )
    if not Run.objects.filter(pk=resume_from).exists():
        raise SubmissionRefused(f"resume_from: no run {resume_from!r}")


def _version(type_name: str) -> str:
    """The type's plugin version; for a plugin installed from a directory (editable or local,
    PEP 610), also a digest of its files: its code may change without a new version."""
    if type_name == COMMAND:
        return "built-in"
    found = plugins().get(type_name)
    if not found:
        return "?"
    plugin = found[0]
    try:
        direct = json.loads(distribution(plugin.package).read_text("direct_url.json") or "null")
    except (PackageNotFoundError, OSError, ValueError):
        direct = None
    if isinstance(direct, dict) and str(direct.get("url", "")).startswith("file://"):
        project = Path(plugin.source)
        if project.is_dir():
            return f"{plugin.version}+{tree_digest(project)}"
    return plugin.version


def _keyed(run: Run, task: Task, version: str) -> KeyedTask:
    return KeyedTask(
        task_id=task.task_id,
        type=task.type,
        version=version,
        settings=task.settings,
        inputs=task.inputs,
        unique=run.id if task.type == COMMAND else "",
    )


def _units(run: Run, task: Task) -> list[Any] | None:
    """The unit values of a split task, as its plugin lists them (as at planning); None when
    this process cannot list them (a plugin the worker does not have, or one that fails
    here): reuse only saves work, so the run goes on and computes the task whole."""
    try:
        task_type = registry()[task.type]()
        assert isinstance(task_type, SplitTaskType)
        model_dir = store().snapshot(run.sources[0]) if run.sources else None
        settings = task_type.parse_settings(task.settings)
        ctx = TaskContext(task_id=task.task_id, settings=settings, model_dir=model_dir)
        return list(task_type.units(ctx))
    except Exception:
        log.warning(
            "run %s, task %r: its units cannot be listed here, so none is reused",
            run.id,
            task.task_id,
            exc_info=True,
        )
        return None


def _write_json(path: Path, value: Any) -> None:
    """Write through a temporary name, so a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, path)


def _candidates(run: Run, key: str) -> list[tuple[str, str]]:
    """(run, task) of earlier tasks with this key: the resumed run first, then newest first."""
    found = list(
        Task.objects.filter(key=key)
        .exclude(run_id=run.id)
        .order_by("-run__created_at")
        .values_list("run_id", "task_id")[:MAX_CANDIDATES]
    )
    return sorted(found, key=lambda pair: pair[0] != run.resume_from)


def _done_units(paths: TaskPaths) -> set[str]:
    try:
        return set(store_reads.names(paths.store_root, paths.done))
    except FileNotFoundError:
        return set()


def _reuse_units(
    run: Run, key: str, keys: dict[str, str]
) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The units done elsewhere with the same unit key: (reuse.json, run → units)."""
    plan: dict[str, str] = {}
    reused: dict[str, list[str]] = {}
    for source_run, source_task in _candidates(run, key):
        if len(plan) == len(keys):
            break
        paths = task_paths(source_run, source_task)
        try:
            # another run's file, read without following a link its code may have put there
            theirs: dict[str, str] = json.loads(
                store_reads.read_bytes(paths.store_root, paths.root / KEYS_FILE, limit=KEYS_MAX)
            )
        except (OSError, ValueError):
            continue
        root = paths.store_root
        for name in sorted(_done_units(paths) - set(plan)):
            if (
                name in keys
                and theirs.get(name) == keys[name]
                and store_reads.is_dir(root, paths.unit_dir(name))
            ):
                plan[name] = f"runs/{source_run}/tasks/{source_task}/units/{name}"
                reused.setdefault(source_run, []).append(name)
    return ({"units": plan} if plan else {}), reused


def _reuse_output(run: Run, key: str) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """A published output of an unsplit task with the same key: (reuse.json, run → ["out"])."""
    for source_run, source_task in _candidates(run, key):
        if has_merge_marker(task_paths(source_run, source_task)):
            return {"out": f"runs/{source_run}/tasks/{source_task}/out"}, {source_run: ["out"]}
    return {}, {}


def plan_reuse(*, run_id: str, environment: str) -> None:
    """Key every task and unit of a run and write what it reuses; once (a resumed submission
    finds the keys recorded and leaves them, as the pods may already read them)."""
    run = Run.objects.get(pk=run_id)
    tasks = list(run.tasks.order_by("position"))
    if any(task.key for task in tasks):
        return
    versions = {name: _version(name) for name in {task.type for task in tasks}}
    keys = task_keys(
        environment=environment,
        sources=list(run.sources),
        tasks=[_keyed(run, task, versions[task.type]) for task in tasks],
    )
    updates: dict[int, dict[str, Any]] = {}
    for task in tasks:
        key = keys[task.task_id]
        paths = task_paths(run.id, task.task_id)
        plan: dict[str, Any] = {}
        reused: dict[str, list[str]] = {}
        if task.splittable:
            units = _units(run, task)
            if units is None:  # not keyed: computed whole, and never reused by a later run
                updates[task.pk] = {"key": "", "reused": {}}
                continue
            mine = dict(zip(unit_names(len(units)), unit_keys(key, units), strict=True))
            _write_json(paths.root / KEYS_FILE, mine)
            if run.reuse:
                plan, reused = _reuse_units(run, key, mine)
        elif run.reuse and task.type != COMMAND:
            plan, reused = _reuse_output(run, key)
        if plan:
            _write_json(paths.root / REUSE_FILE, plan)
        updates[task.pk] = {"key": key, "reused": reused}
    with transaction.atomic():
        for pk, values in updates.items():
            Task.objects.filter(pk=pk).update(**values)
