"""The store's change history, which watches replay from.

Every write is a `Change` with the next resourceVersion of one counter shared by all types
(as etcd's revision is). The history keeps the last `limit` of them (trimmed once it holds a
quarter more); a watch from a resourceVersion older than the history answers 410 Expired, as
after etcd compaction (`compact` drops the whole history).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.sim import status
from tests.sim.resources import ResourceInfo


@dataclass(frozen=True)
class Change:
    """One write, as a watch reports it."""

    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    info: ResourceInfo
    obj: dict[str, Any]
    old: dict[str, Any] | None


class History:
    """The last changes, in resourceVersion order (the store's lock guards it)."""

    def __init__(self, limit: int) -> None:
        self._changes: list[Change] = []
        self._oldest = 1
        self._limit = limit

    def append(self, change: Change) -> None:
        """Keep a change; forget the oldest once a quarter more than the limit are kept."""
        self._changes.append(change)
        if len(self._changes) > self._limit * 5 // 4:
            drop = len(self._changes) - self._limit
            self._oldest = self._changes[drop - 1].rv
            del self._changes[:drop]

    def since(self, rv: int) -> list[Change]:
        """The changes after `rv`; 410 Expired when the history no longer reaches back."""
        if rv < self._oldest:
            raise status.gone(f"too old resource version: {rv} ({self._oldest})")
        if not self._changes:
            return []
        # resourceVersions are consecutive, one per change: index by subtraction
        return self._changes[max(0, rv + 1 - self._changes[0].rv) :]

    def compact(self, rv: int) -> None:
        """Forget the history, as etcd compaction does: watches from before `rv` get 410."""
        self._changes.clear()
        self._oldest = rv
