"""Bytes of the run store per run and per group (S13): a hard-linked file counts once.

Files are identified by (device, inode), so a file linked into several places of a run, of a
group or of the store is counted once in each sum it belongs to. `freed_bytes` counts only
files whose every link lies below the removed paths: those are the bytes removing them frees.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from runs.models import Run
from runs.store import store, store_root
from simrun_harness import store_reads, store_walks

FileId = tuple[int, int]


@dataclass(frozen=True)
class StoreUsage:
    runs: dict[str, int]
    groups: dict[str, int]
    """By group; "" holds the runs without a group and directories without a run record."""
    snapshots: int
    total: int


def _files(path: Path) -> Iterator[tuple[FileId, int, int]]:
    """(file id, size, link count) of every regular file below `path`, no link followed (a
    run's code may have made any of its directories a link out of the store)."""
    for found in store_walks.iter_files(store_root(), path):
        yield found.inode, found.size, found.links


def _sizes(path: Path) -> dict[FileId, int]:
    return {file_id: size for file_id, size, _ in _files(path)}


def disk_usage(path: Path) -> int:
    """The bytes of the files below `path`, every hard-linked file once."""
    return sum(_sizes(path).values())


def freed_bytes(paths: Iterable[Path]) -> int:
    """The bytes removing `paths` frees: files none of whose links stays elsewhere."""
    seen: dict[FileId, list[int]] = {}
    for path in paths:
        for file_id, size, links in _files(path):
            entry = seen.setdefault(file_id, [size, links, 0])
            entry[2] += 1
    return sum(size for size, links, found in seen.values() if found >= links)


def _top_level(path: Path) -> list[Path]:
    try:
        return [path / name for name in sorted(store_reads.names(store_root(), path))]
    except FileNotFoundError:
        return []


def store_usage() -> StoreUsage:
    """Bytes per run directory, per group of runs, of the snapshots and of the whole store
    (blobs, environments and the backend's files included)."""
    root = store()
    groups_of = dict(Run.objects.values_list("id", "group"))
    per_run: dict[str, dict[FileId, int]] = {}
    try:
        run_dirs = sorted(store_reads.names(store_root(), root.runs))
    except FileNotFoundError:
        run_dirs = []
    for run_id in run_dirs:
        per_run[run_id] = _sizes(root.runs / run_id)
    per_group: dict[str, dict[FileId, int]] = {}
    everything: dict[FileId, int] = {}
    for run_id, sizes in per_run.items():
        per_group.setdefault(groups_of.get(run_id, ""), {}).update(sizes)
        everything.update(sizes)
    snapshots = _sizes(root.snapshots)
    everything.update(snapshots)
    for entry in _top_level(root.root):
        if entry not in (root.runs, root.snapshots):
            everything.update(_sizes(entry))
    return StoreUsage(
        runs={run_id: sum(sizes.values()) for run_id, sizes in per_run.items()},
        groups={group: sum(sizes.values()) for group, sizes in sorted(per_group.items())},
        snapshots=sum(snapshots.values()),
        total=sum(everything.values()),
    )
