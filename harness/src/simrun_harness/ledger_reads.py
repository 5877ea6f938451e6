"""Reads of a split task's ledger: its unit values and total (the workers, the merge), the
counts of units in each state (progress) and the claims each worker holds (the service).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

from simrun_harness import store_reads
from simrun_harness.layout import TaskPaths
from simrun_harness.ledger import META_FILE, SEP, UNITS_FILE, Holder


class UnitNames(Sequence[str]):
    """`ledger.unit_names(total)` named at each look, none held: a reader that goes over a
    million units by index (the service matching unit keys) would hold 64 MB of names."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.width = max(6, len(str(max(total - 1, 0))))

    def __len__(self) -> int:
        return self.total

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self.total))]
        if index < 0:
            index += self.total
        if not 0 <= index < self.total:
            raise IndexError(index)
        return f"u{index:0{self.width}d}"


class UnitDirs(Sequence[Path]):
    """The output directories of `total` units below `units`, in unit order, each made at
    its look: what a plugin's `merge` is given (a list of 10^6 paths would be ~150 MB)."""

    def __init__(self, units: Path, total: int) -> None:
        self.units = units
        self.names = UnitNames(total)

    def __len__(self) -> int:
        return len(self.names)

    @overload
    def __getitem__(self, index: int) -> Path: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Path]: ...
    def __getitem__(self, index: int | slice) -> Path | Sequence[Path]:
        if isinstance(index, slice):
            return [self.units / name for name in self.names[index]]
        return self.units / self.names[index]


def read_units(paths: TaskPaths) -> list[Any]:
    """The unit values, in unit order."""
    units: list[Any] = json.loads((paths.ledger / UNITS_FILE).read_text())
    return units


def read_total(paths: TaskPaths) -> int:
    total: int = json.loads((paths.ledger / META_FILE).read_text())["total"]
    return total


@dataclass(frozen=True)
class LedgerCounts:
    """How many units are in each state."""

    pending: int
    claimed: int
    done: int
    total: int


META_MAX_BYTES = 64 * 1024


def counts(paths: TaskPaths) -> LedgerCounts | None:
    """The counts of a task's ledger, None while it has none (for progress bars): read as
    the service reads a run's files, no link followed (`store_reads`)."""
    root = paths.store_root
    try:
        if paths.ledger.name not in store_reads.names(root, paths.root):
            return None
        meta = json.loads(
            store_reads.read_bytes(root, paths.ledger / META_FILE, limit=META_MAX_BYTES)
        )
        total = meta["total"] if isinstance(meta, dict) else None
        if not isinstance(total, int):
            return None
        return LedgerCounts(
            pending=_count(root, paths.pending),
            claimed=_count(root, paths.claimed),
            done=_count(root, paths.done),
            total=total,
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return None  # a ledger being created, or one the task's code wrote over


def _count(root: Path, path: Path) -> int:
    try:
        return store_reads.count(root, path)
    except FileNotFoundError:
        return 0


def claims_by_worker(paths: TaskPaths) -> dict[str, int]:
    """How many units each worker holds now (over its attempts), no link followed."""
    found: dict[str, int] = {}
    try:
        claimed = store_reads.names(paths.store_root, paths.claimed)
    except FileNotFoundError:
        return found
    for entry in claimed:
        holder = Holder.parse(entry.partition(SEP)[2])
        if holder is not None:
            found[holder.worker] = found.get(holder.worker, 0) + 1
    return found
