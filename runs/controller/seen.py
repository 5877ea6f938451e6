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

`Seen` also keeps what a tick needs to look only at what changed: the followed rows as last
read (`take`: every one at a process's first tick, then the rows written since), the runs to
look at whatever the backend says (`dirty`: a row that changed, a note dropped, a record that
watches the store or the clock), the runs with work after deriving (`work`: a final task to
observe, an ended run's steps), and the backend's mark of the changes it last told
(`Backend.changes`).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass, replace
from datetime import datetime
from functools import cached_property
from typing import Protocol, TypeVar

from runs.controller import rules
from runs.ports import BackendStatus
from runs.states import RunState

LIVE = frozenset(RunState.live())
DERIVED = LIVE - {RunState.SUBMITTING}  # a run still submitting has no workflow to ask about


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


class FollowedRow(Row, Protocol):
    """A followed run's row as a tick reads it (`followed.Followed`)."""

    @property
    def final_work(self) -> bool: ...

    def _replace(self, *, version: int, state: str) -> FollowedRow: ...


R = TypeVar("R", bound=Row)
F = TypeVar("F", bound=FollowedRow)
REVISION_MAX = 40  # longer revisions are not noted in a row (`Run.derived_from`: 96 at most)


class Seen:
    """What each run's record was derived from, by run id; the followed rows as last read."""

    def __init__(self) -> None:
        self._runs: dict[str, Derived] = {}
        self.rows: dict[str, FollowedRow] = {}  # every followed run's row, as last read
        self._by_name: dict[str, str] = {}  # workflow name → run id, of the followed runs
        self.dirty: set[str] = set()  # looked at by the next tick whatever the backend says
        self.work: set[str] = set()  # a final task's work, or an ended run's pending steps
        self.read_at: datetime | None = None  # when the rows were last read (None: never)
        self.whole_at = -float("inf")  # when every followed row was last read (monotonic)
        self.changes: Hashable | None = None  # the mark of the backend's changes last told

    def __len__(self) -> int:
        return len(self._runs)

    def take(self, rows: Iterable[FollowedRow], *, gone: Iterable[str] = (), whole: bool) -> None:
        """The rows a tick read: every followed one (`whole`: the others are forgotten), or
        those written since the last read, with the ids of those written that are not
        followed any more (`gone`). A row that changed is looked at by the next tick."""
        rows = list(rows)
        if whole:
            self.whole_at = time.monotonic()
            gone = self.rows.keys() - {row.pk for row in rows}
        for run_id in list(gone):
            self.forget(run_id)
        for row in rows:
            before = self.rows.get(row.pk)
            self.rows[row.pk] = row
            self._by_name[row.workflow_name] = row.pk
            if row.final_work or row.state not in LIVE:
                self.work.add(row.pk)
            else:
                self.work.discard(row.pk)
            if before is None or before.version != row.version or before.state != row.state:
                self.dirty.add(row.pk)

    def wrote(self, run_id: str, *, version: int, state: str) -> None:
        """The tick wrote this record: its row as it is now (no need to read it again)."""
        row = self.rows.get(run_id)
        if row is not None:
            self.rows[run_id] = row._replace(version=version, state=state)
            if state not in LIVE:  # its steps follow
                self.work.add(run_id)

    def resync_due(self, every_s: float) -> bool:
        """Whether every followed row was read last `every_s` ago or more."""
        return time.monotonic() - self.whole_at >= every_s

    def settled(self, run_id: str) -> None:
        """A live run's final tasks have no work left (observed, logs kept)."""
        row = self.rows.get(run_id)
        if row is not None and row.state in LIVE:
            self.work.discard(run_id)

    def of_names(self, names: Iterable[str]) -> set[str]:
        """The followed runs of these workflows (names of no followed run are left out)."""
        by_name = self._by_name
        return {by_name[name] for name in names if name in by_name}

    def forget(self, run_id: str) -> None:
        """A run not followed any more (ended and settled, or deleted)."""
        row = self.rows.pop(run_id, None)
        if row is not None:
            self._by_name.pop(row.workflow_name, None)
        self._runs.pop(run_id, None)
        self.dirty.discard(run_id)
        self.work.discard(run_id)

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
                continue
            self.dirty.discard(row.pk)  # unchanged: looked at again when something changes
            if revisions is not None and noted.revision != revisions.get(name, ""):
                notes[row.pk] = replace(noted, status=status, revision=revisions.get(name, ""))
        return found

    def note(self, run_id: str, derived: Derived) -> None:
        """What the record at `derived.version` was derived from; the run is looked at again
        only when its row or its status changes, unless its record watches the store or the
        clock (`Derived.watches`)."""
        self._runs[run_id] = derived
        if derived.watches:
            self.dirty.add(run_id)
        else:
            self.dirty.discard(run_id)

    def drop(self, run_id: str) -> None:
        """Forget what the run was derived from: the next tick derives it."""
        self._runs.pop(run_id, None)
        self.dirty.add(run_id)

    def keep_only(self, run_ids: Collection[str]) -> None:
        """Forget the notes of runs not followed any more."""
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
    digest = f"{version}:{status_digest(status)}"
    return f"{digest}@{revision}" if revision and len(revision) <= REVISION_MAX else digest


def status_digest(status: BackendStatus) -> str:
    """The digest of a status's JSON, worked out once per status object: a backend hands out
    the same object while a status stays equal (`cluster/local/statuses.py`, the Argo
    backend's parsed workflows), and a tick compares and notes it more than once."""
    found = _DIGESTS.get(id(status))
    if found is not None and found[0] is status:
        return found[1]
    text = json.dumps(status, sort_keys=True, separators=(",", ":"), default=_plain)
    digest = hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
    if len(_DIGESTS) >= DIGESTS_KEPT:
        _DIGESTS.clear()
    _DIGESTS[id(status)] = (status, digest)  # the object held: its id stays its own
    return digest


DIGESTS_KEPT = 100_000
_DIGESTS: dict[int, tuple[BackendStatus, str]] = {}


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
