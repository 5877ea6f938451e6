"""The run store as the service sees it: its root from the settings, reads the controller needs.

The service trusts no file of a run: every read goes through `simrun_harness.store_reads`,
below the store's root, never following a link (a link, a FIFO or a device reads as absent).
"""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings

from runs.local_packages import LocalPackageRules
from simrun_harness import store_reads, store_walks
from simrun_harness.layout import MERGE_MARKER, RunPaths, StorePaths, TaskPaths
from simrun_harness.report import WorkerReport, task_reports


def store() -> StorePaths:
    """The run store of these settings."""
    return StorePaths(Path(settings.SIMRUN_STORE))


def store_root() -> Path:
    """The store's root, absolute: what every read of the store stays below."""
    return Path(os.path.abspath(settings.SIMRUN_STORE))


def run_paths(run_id: str) -> RunPaths:
    return store().run(run_id)


def task_paths(run_id: str, task_id: str) -> TaskPaths:
    return store().run(run_id).task(task_id)


def listing_limits(*, files: int | None = None) -> store_walks.WalkLimits:
    """How far a listing of a run's files goes (SIMRUN_LISTING_*), keeping at most `files`."""
    return store_walks.WalkLimits(
        entries=settings.SIMRUN_LISTING_MAX_ENTRIES,
        depth=settings.SIMRUN_LISTING_MAX_DEPTH,
        seconds=settings.SIMRUN_LISTING_MAX_S,
        files=files,
    )


def local_package_rules() -> LocalPackageRules:
    """Where a model's local packages may lie besides its snapshot, and how large each may be
    (SIMRUN_LOCAL_PACKAGE_ROOTS, SIMRUN_UPLOAD_MAX_FILES, SIMRUN_LOCAL_PACKAGE_MAX_BYTES)."""
    return LocalPackageRules(
        roots=tuple(Path(os.path.abspath(p)) for p in settings.SIMRUN_LOCAL_PACKAGE_ROOTS),
        max_entries=settings.SIMRUN_UPLOAD_MAX_FILES,
        max_bytes=settings.SIMRUN_LOCAL_PACKAGE_MAX_BYTES,
    )


def has_merge_marker(task: TaskPaths) -> bool:
    """C20: whether out/.simrun-merged is a file, found by listing directories.

    On NFS a lookup may answer from a cached negative entry made before the pod wrote the
    file; listing the task directory, then out/, revalidates both.
    """
    root = task.store_root
    try:
        if "out" not in store_reads.names(root, task.root):
            return False
        return MERGE_MARKER in store_reads.names(root, task.out)
    except FileNotFoundError:
        return False


def reports(task: TaskPaths) -> list[tuple[str, WorkerReport]]:
    """Every report of a task that can be read, with its file name; unreadable ones skipped."""
    return task_reports(task)
