"""The run store as the service sees it: its root from the settings, reads the controller needs."""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings

from simrun_harness.layout import MERGE_MARKER, RunPaths, StorePaths, TaskPaths
from simrun_harness.report import WorkerReport


def store() -> StorePaths:
    """The run store of these settings."""
    return StorePaths(Path(settings.SIMRUN_STORE))


def run_paths(run_id: str) -> RunPaths:
    return store().run(run_id)


def task_paths(run_id: str, task_id: str) -> TaskPaths:
    return store().run(run_id).task(task_id)


def has_merge_marker(task: TaskPaths) -> bool:
    """C20: whether out/.simrun-merged exists, found by listing directories.

    On NFS a lookup may answer from a cached negative entry made before the pod wrote the
    file; listing the task directory, then out/, revalidates both.
    """
    try:
        if "out" not in os.listdir(task.root):
            return False
        return MERGE_MARKER in os.listdir(task.out)
    except FileNotFoundError:
        return False


def reports(task: TaskPaths) -> list[tuple[str, WorkerReport]]:
    """Every report of a task that can be read, with its file name; unreadable ones skipped."""
    try:
        names = sorted(os.listdir(task.reports))
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        if not name.endswith(".json") or name.startswith("."):
            continue
        try:
            found.append(
                (name, WorkerReport.model_validate_json((task.reports / name).read_bytes()))
            )
        except (OSError, ValueError):
            continue
    return found
