"""Which status each run's record was last derived from, so a tick skips unchanged runs.

The records stay the controller's only state (C15): this is a cache of one fact per run, "the
record at version v (state s) is what status S derives to", noted by the process that derived
it, with the record's fields the skip depends on at that version. A tick reads every followed
run's version and state from the database; a run whose version, state and status are the ones
noted (and whose derivation depends on nothing but its status, `rules.watches_store_or_clock`)
would derive to itself, so it is neither derived nor written. Any write of the record by
anyone bumps its version, which ends the skip; a process that starts (or another process) has
noted nothing and derives every run once.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from runs.ports import BackendStatus


@dataclass(frozen=True)
class Derived:
    """A record's version and state, the status they were derived from (None: gone), and the
    record's merge markers awaited and kills for memory counted at that version."""

    version: int
    state: str
    status: BackendStatus | None
    merge_pending: Mapping[str, str] = field(default_factory=dict)
    oom_kills: Mapping[str, Sequence[int]] = field(default_factory=dict)


class Seen:
    """What each run's record was derived from, by run id."""

    def __init__(self) -> None:
        self._runs: dict[str, Derived] = {}

    def __len__(self) -> int:
        return len(self._runs)

    def knows(self, run_id: str, *, version: int, state: str) -> bool:
        """Whether the record at `version` was derived here: its status may then be what the
        backend last observed (never older than what this process derived it from)."""
        noted = self._runs.get(run_id)
        return noted is not None and noted.version == version and noted.state == state

    def derived(
        self, run_id: str, *, version: int, state: str, status: BackendStatus | None
    ) -> Derived | None:
        """What was noted of the record at `version` if it was derived from a status equal to
        `status`; None otherwise."""
        noted = self._runs.get(run_id)
        if noted is None or noted.version != version or noted.state != state:
            return None
        return noted if noted.status is status or noted.status == status else None

    def note(self, run_id: str, derived: Derived) -> None:
        self._runs[run_id] = derived

    def drop(self, run_id: str) -> None:
        self._runs.pop(run_id, None)

    def keep_only(self, run_ids: Collection[str]) -> None:
        """Forget the runs not followed any more."""
        kept = set(run_ids)
        for run_id in [r for r in self._runs if r not in kept]:
            del self._runs[run_id]
