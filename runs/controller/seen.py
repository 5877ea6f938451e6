"""Which status each run's record was last derived from, so a tick skips unchanged runs.

The records stay the controller's only state (C15): this is a cache of one fact per run, "the
record at version v (state s) is what status S derives to", noted by the process that derived
it, with the record's fields the skip depends on at that version. A tick reads every followed
run's version and state from the database; a run whose version, state and status are the ones
noted (and whose derivation depends on nothing but its status, `rules.watches_store_or_clock`)
would derive to itself, so it is neither derived nor written. Any write of the record by
anyone bumps its version, which ends the skip. A process that starts (or another process) has
noted nothing: the row's `derived_from` (`derived_from()`: its version and a digest of the
status it was derived from) tells it which runs would derive to themselves, and it notes
those from their row without fetching or deriving them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from functools import cached_property
from typing import Protocol, TypeVar

from runs.controller import rules
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

    @cached_property
    def watches(self) -> bool:
        """Whether the record may change while its status stays this one, so a tick derives
        it all the same (`rules.watches_store_or_clock`); worked out once per note."""
        return rules.watches_store_or_clock(
            merge_pending=self.merge_pending,
            failures=self.status.failures if self.status is not None else {},
            oom_kills=self.oom_kills,
        )


class Row(Protocol):
    """What a tick reads of a followed run (`reconcile.Followed`), as far as notes go."""

    @property
    def pk(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def state(self) -> str: ...
    @property
    def workflow_name(self) -> str: ...


R = TypeVar("R", bound=Row)


class Seen:
    """What each run's record was derived from, by run id."""

    def __init__(self) -> None:
        self._runs: dict[str, Derived] = {}

    def __len__(self) -> int:
        return len(self._runs)

    def unnoted(self, rows: Iterable[R]) -> list[R]:
        """The rows whose record, at their version and state, was not derived here. Of the
        others, what the backend last observed is never older than what this process derived
        them from, so it may answer from it (`tick.reusable`)."""
        notes = self._runs
        found = []
        for row in rows:
            noted = notes.get(row.pk)
            if noted is None or noted.version != row.version or noted.state != row.state:
                found.append(row)
        return found

    def to_derive(self, rows: Iterable[R], statuses: Mapping[str, BackendStatus | None]) -> list[R]:
        """The rows whose status was read (`statuses`, by workflow name) and whose record must
        be derived: not noted at its version and state as derived from a status equal to that
        one, or one that may change all the same (`Derived.watches`). One loop, no call per
        row: a tick asks it of every live run."""
        notes = self._runs
        found = []
        for row in rows:
            name = row.workflow_name
            if name not in statuses:
                continue  # not read this tick
            noted = notes.get(row.pk)
            if noted is None or noted.version != row.version or noted.state != row.state:
                found.append(row)
                continue
            status = statuses[name]
            if (noted.status is not status and noted.status != status) or noted.watches:
                found.append(row)
        return found

    def note(self, run_id: str, derived: Derived) -> None:
        self._runs[run_id] = derived

    def drop(self, run_id: str) -> None:
        self._runs.pop(run_id, None)

    def keep_only(self, run_ids: Collection[str]) -> None:
        """Forget the runs not followed any more."""
        for run_id in self._runs.keys() - set(run_ids):
            del self._runs[run_id]


def derived_from(version: int, status: BackendStatus | None) -> str:
    """What a record at `version` derived from `status` notes in its row, so that a process
    that noted nothing (a restart) can tell it would derive to itself: `<version>:<digest>`,
    the digest equal exactly when the statuses are equal; empty for a workflow gone."""
    if status is None:
        return ""
    text = json.dumps(status, sort_keys=True, separators=(",", ":"), default=_plain)
    return f"{version}:{hashlib.blake2b(text.encode(), digest_size=16).hexdigest()}"


def _plain(value: object) -> object:
    """For the digest: a dataclass as the dict of its fields, anything else as its text — the
    JSON `dataclasses.asdict` gave, which rows written before hold, in half the time."""
    names = _field_names(type(value))
    if names is None:
        return str(value)
    return {name: getattr(value, name) for name in names}


def _field_names(kind: type) -> tuple[str, ...] | None:
    """The fields of a dataclass, None for any other type."""
    if kind not in _FIELDS:
        _FIELDS[kind] = tuple(f.name for f in fields(kind)) if is_dataclass(kind) else None
    return _FIELDS[kind]


_FIELDS: dict[type, tuple[str, ...] | None] = {}
