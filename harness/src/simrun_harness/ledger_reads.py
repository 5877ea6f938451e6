"""Reads of a split task's ledger: its unit values and total (the workers, the merge), the
counts of units in each state (progress) and the claims each worker holds (the service).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from simrun_harness.layout import TaskPaths
from simrun_harness.ledger import META_FILE, SEP, UNITS_FILE, Holder, ledger_exists, listing


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


def counts(paths: TaskPaths) -> LedgerCounts | None:
    """The counts of a task's ledger, None while it has none (for progress bars)."""
    if not ledger_exists(paths):
        return None
    return LedgerCounts(
        pending=len(listing(paths.pending)),
        claimed=len(listing(paths.claimed)),
        done=len(listing(paths.done)),
        total=read_total(paths),
    )


def claims_by_worker(paths: TaskPaths) -> dict[str, int]:
    """How many units each worker holds now (over its attempts)."""
    found: dict[str, int] = {}
    for entry in listing(paths.claimed):
        holder = Holder.parse(entry.partition(SEP)[2])
        if holder is not None:
            found[holder.worker] = found.get(holder.worker, 0) + 1
    return found
