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
from dataclasses import dataclass, field, fields, is_dataclass, replace
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
    revision: str = ""  # what the backend read `status` from (`Backend.revisions`), if it says
    read: bool = True  # False: noted from its row by its revision, `status` not read here

    @cached_property
    def watches(self) -> bool:
        """Whether the record may change while its status stays this one, so a tick derives
        it all the same (`rules.watches_store_or_clock`), or its status could not be read
        (read again at every tick: the reason may go with the workflow unchanged, e.g. the
        Argo server given for offloaded nodes); worked out once per note."""
        if self.status is not None and self.status.unreadable:
            return True
        return rules.watches_store_or_clock(
            merge_pending=self.merge_pending,
            failures=self.status.failures if self.status is not None else {},
            oom_kills=self.oom_kills,
        )


class Row(Protocol):
    """What a tick reads of a followed run (`followed.Followed`), as far as notes go."""

    @property
    def pk(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def state(self) -> str: ...
    @property
    def workflow_name(self) -> str: ...


R = TypeVar("R", bound=Row)
REVISION_MAX = 40  # longer revisions are not noted in a row (`Run.derived_from`: 96 at most)


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

    def to_read(self, rows: Iterable[R], revisions: Mapping[str, str]) -> list[R]:
        """The rows whose status must be read, by the backend's revisions now (by workflow
        name): not noted at their version and state, noted from another revision or none, or
        whose record may change all the same (`Derived.watches`). The others are unchanged."""
        notes = self._runs
        found = []
        for row in rows:
            noted = notes.get(row.pk)
            if (
                noted is None
                or noted.version != row.version
                or noted.state != row.state
                or not noted.revision
                or noted.revision != revisions.get(row.workflow_name)
                or noted.watches
            ):
                found.append(row)
        return found

    def to_derive(
        self,
        rows: Iterable[R],
        statuses: Mapping[str, BackendStatus | None],
        revisions: Mapping[str, str] | None = None,
    ) -> list[R]:
        """The rows whose status was read (`statuses`, by workflow name) and whose record must
        be derived: not noted at its version and state as derived from a status equal to that
        one, or one that may change all the same (`Derived.watches`). One loop, no call per
        row: a tick asks it of every live run. A run whose status is the one noted but read
        from another revision (`revisions`) is noted at that revision."""
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
            if (
                not noted.read
                or (noted.status is not status and noted.status != status)
                or noted.watches
            ):
                found.append(row)
            elif revisions is not None and noted.revision != revisions.get(name, ""):
                notes[row.pk] = replace(noted, status=status, revision=revisions.get(name, ""))
        return found

    def note(self, run_id: str, derived: Derived) -> None:
        self._runs[run_id] = derived

    def drop(self, run_id: str) -> None:
        self._runs.pop(run_id, None)

    def keep_only(self, run_ids: Collection[str]) -> None:
        """Forget the runs not followed any more."""
        for run_id in self._runs.keys() - set(run_ids):
            del self._runs[run_id]


def derived_from(version: int, status: BackendStatus | None, revision: str = "") -> str:
    """What a record at `version` derived from `status` notes in its row, so that a process
    that noted nothing (a restart) can tell it would derive to itself: `<version>:<digest>`,
    the digest equal exactly when the statuses are equal, and `@<revision>` when the backend
    said what it read the status from (`Backend.revisions`): a restarted process whose backend
    says the same revision needs not read the status at all. Empty for a workflow gone."""
    if status is None:
        return ""
    text = json.dumps(status, sort_keys=True, separators=(",", ":"), default=_plain)
    digest = f"{version}:{hashlib.blake2b(text.encode(), digest_size=16).hexdigest()}"
    return f"{digest}@{revision}" if revision and len(revision) <= REVISION_MAX else digest


def same_status(noted: str, version: int, status: BackendStatus | None) -> bool:
    """Whether a row's `derived_from` says its record at `version` was derived from a status
    equal to `status` (whatever revision it names)."""
    return bool(noted) and noted.partition("@")[0] == derived_from(version, status)


def same_revision(noted: str, version: int, revision: str | None) -> bool:
    """Whether a row's `derived_from` says its record at `version` was derived from what the
    backend read at `revision`: then from a status equal to what it would read now."""
    digest, _, found = noted.partition("@")
    return bool(found) and found == revision and digest.partition(":")[0] == str(version)


def _plain(value: object) -> object:
    """For the digest: a dataclass as the dict of its fields, anything else as its text — the
    JSON `dataclasses.asdict` gave, which rows written before hold, in half the time."""
    names = _field_names(type(value))
    if names is None:
        return str(value)
    plain = {name: getattr(value, name) for name in names}
    for name in ADDED_FIELDS.intersection(plain):
        if not plain[name]:  # at its default: the digest rows written before it hold
            del plain[name]
    return plain


ADDED_FIELDS = frozenset({"unreadable"})
"""Fields of the status added after rows noted their digests (BackendStatus.unreadable):
left out of the digest while empty, so a new field does not make every run derived again."""


def _field_names(kind: type) -> tuple[str, ...] | None:
    """The fields of a dataclass, None for any other type."""
    if kind not in _FIELDS:
        _FIELDS[kind] = tuple(f.name for f in fields(kind)) if is_dataclass(kind) else None
    return _FIELDS[kind]


_FIELDS: dict[type, tuple[str, ...] | None] = {}
