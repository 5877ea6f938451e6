"""What a tick reads of the backend and which runs it derives (`plan_tick`).

The runs a tick looks at are those whose row changed (`Seen.dirty`, kept from the rows it
read) and those whose workflow the backend says changed (`Backend.changes`); a backend that
cannot say (the Argo backend, which lists its workflows' revisions instead, or the local one
without its loop) has every live run looked at. Of those, the statuses read are the ones the
backend's revisions do not vouch for (`Seen.to_read`), and the runs derived the ones whose
status differs from the one their record was derived from (`Seen.to_derive`). A run this
process has not noted is noted from its row when the row says it was derived from what the
backend has now (the first tick after a restart): its status need not be read, or it need not
be derived.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from operator import attrgetter

from runs.controller.backoff import Backoff
from runs.controller.followed import Unnoted
from runs.controller.seen import DERIVED, Derived, FollowedRow, Seen, same_revision, same_status
from runs.ports import Backend, BackendStatus

log = logging.getLogger(__name__)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
WORKFLOW_NAME = attrgetter("workflow_name")

RestOfRows = Callable[[Mapping[str, int]], Mapping[str, Unnoted]]
"""The rest of the rows of runs this process has not noted, by id (`followed.unnoted_rows`)."""


@dataclass(frozen=True)
class Plan:
    """What a tick derives and settles, from the statuses it read."""

    statuses: Mapping[str, BackendStatus | None]  # by workflow name; None: workflow gone
    revisions: Mapping[str, str]  # by workflow name, when the backend has them
    due: Mapping[str, FollowedRow]  # the runs to derive, with the row read before their status
    work: frozenset[str]  # runs with a final task's work or an ended run's pending steps

    def wanted(self, backoff: Backoff) -> set[str]:
        """The runs to fetch: those to derive or settle whose backoff is over."""
        return {run_id for run_id in self.due.keys() | self.work if backoff.due(run_id)}


def plan_tick(seen: Seen, backend: Backend, *, rest: RestOfRows) -> Plan:
    """Ask the backend what changed, read the statuses of the runs to look at, and say
    which to derive. When the statuses cannot be read (the API server gone), nothing is
    derived, and the changes are asked again at the next tick."""
    changes = backend.changes(seen.changes)
    rows = seen.rows
    ids = set(rows) if changes.names is None else seen.dirty | seen.of_names(changes.names)
    looked = [row for pk in ids if (row := rows.get(pk)) is not None and row.state in DERIVED]
    statuses: dict[str, BackendStatus | None] = {}
    revisions: dict[str, str] | None = None
    if looked:
        fresh = seen.unnoted(looked)
        unnoted = rest({row.pk: row.version for row in fresh})
        try:
            statuses, revisions = read_statuses(backend, looked, seen, fresh, unnoted)
        except Exception:  # the API server gone, say: settle what can be, derive next tick
            log.exception("reading the statuses of %d runs failed; retried later", len(looked))
            return Plan({}, {}, {}, frozenset(seen.work))
        if revisions is None:  # every one was asked: one left out could not be read
            seen.dirty.update(row.pk for row in looked if row.workflow_name not in statuses)
    seen.changes = changes.mark
    due = {row.pk: row for row in seen.to_derive(looked, statuses, revisions)}
    return Plan(statuses, revisions or {}, due, frozenset(seen.work))


def read_statuses(
    backend: Backend,
    live: list[FollowedRow],
    seen: Seen,
    fresh: list[FollowedRow],
    unnoted: Mapping[str, Unnoted],
) -> tuple[dict[str, BackendStatus | None], dict[str, str] | None]:
    """The statuses a tick derives from, and the backend's revisions when it has them.

    With revisions (Argo: one list of the workflows' metadata), only the statuses of runs
    noted from another revision (or none) are read: a run whose row says it was derived from
    the revision the backend has now is noted from its row without its status (a restart).
    A run not noted whose row says it was derived from a status equal to the one read is
    noted from its row (`note_from_row`)."""
    names = list(map(WORKFLOW_NAME, live))
    revisions = backend.revisions(names)
    ask = names
    if revisions is not None:
        for row in fresh:
            rest = unnoted.get(row.pk)
            revision = revisions.get(row.workflow_name)
            if rest is not None and same_revision(rest.derived_from, row.version, revision):
                seen.note(row.pk, noted_by_revision(row, rest, revision or ""))
        ask = list(map(WORKFLOW_NAME, seen.to_read(live, revisions)))
    statuses = backend.statuses(ask, may_reuse=reusable(names, fresh, unnoted)) if ask else {}
    for row in fresh:
        if row.pk in unnoted and row.workflow_name in statuses:
            revision = (revisions or {}).get(row.workflow_name, "")
            note_from_row(seen, row, unnoted[row.pk], statuses[row.workflow_name], revision)
    return statuses, revisions


def noted_by_revision(row: FollowedRow, rest: Unnoted, revision: str) -> Derived:
    """A run whose row says it was derived from what the backend read at `revision`, which
    it still has: as if derived here, its status not read (`read=False`). A row notes its
    revision only when its derivation depended on nothing else (`rules.watches_store_or_clock`),
    so the run is skipped until the revision changes."""
    return Derived(
        row.version, row.state, None, rest.merge_pending, rest.oom_kills, revision, read=False
    )


def note_from_row(
    seen: Seen, row: FollowedRow, rest: Unnoted, status: BackendStatus | None, revision: str = ""
) -> None:
    """A run this process has not noted whose row says it was derived, at its version, from
    a status equal to `status` (a restarted process): noted from the row, as if derived here."""
    if same_status(rest.derived_from, row.version, status):
        derived = Derived(
            row.version, row.state, status, rest.merge_pending, rest.oom_kills, revision
        )
        seen.note(row.pk, derived)


def reusable(
    names: list[str], fresh: list[FollowedRow], unnoted: Mapping[str, Unnoted]
) -> dict[str, int]:
    """What the backend may answer from what it observed itself, by workflow: a run whose
    record this process derived, anything (0: the backend's own limit); a run it has not
    noted (`fresh`), what the backend observed after the record was last written (it is then
    newer than the status that record was derived from, by whichever process), so a restarted
    process needs no read per run; a run written since the tick read its version, nothing."""
    found = dict.fromkeys(names, 0)
    for row in fresh:
        if row.pk in unnoted:
            found[row.workflow_name] = _ns(unnoted[row.pk].updated_at) + 1000  # its µs's end
        else:
            del found[row.workflow_name]
    return found


def _ns(at: datetime) -> int:
    return (at - EPOCH) // timedelta(microseconds=1) * 1000
