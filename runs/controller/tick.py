"""One pass of the controller over every followed run; driven by beat and by the watcher.

A tick reads the followed runs' versions in one query (and, for the runs this process has not
noted, the rest of their rows in one more: none at a steady tick), asks the backend once for
the status of every live workflow (for a run whose record this process derived last, what the
backend last observed will do: the local backend's loop holds it), and touches only the runs
that need it: those whose status differs from the one their record was derived from
(`seen.py`), those whose derivation also depends on the store or the clock
(`rules.watches_store_or_clock`), those with a final task whose observations or logs are still
to be kept, and ended runs with steps pending. Those are fetched with their tasks in one more
query; a run that did not change costs no query. At 10,000 live runs what is left is a loop
or two over them in Python (`Seen.unnoted`, `Seen.to_derive`, the backend's `statuses`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from operator import attrgetter

from django.conf import settings
from django.db.models import Prefetch
from django.utils import timezone

from runs.controller import rules
from runs.controller.backoff import Backoff
from runs.controller.followed import Followed, Unnoted, followed_rows, unnoted_rows
from runs.controller.reconcile import Reconciled, reconcile_with
from runs.controller.seen import Derived, Seen, same_revision, same_status
from runs.models import Run, Task
from runs.ports import Backend, BackendStatus
from runs.services import background
from runs.services.heartbeats import record_heartbeat
from runs.services.runs import finish_deletion
from runs.services.settle import keep_task_logs, settle
from runs.services.submission import stale_submissions
from runs.states import RunState
from runs.store import task_paths

log = logging.getLogger(__name__)

SEEN = Seen()  # this process's notes; every tick of the process shares them
BACKOFF = Backoff()  # this process's failing runs and when each is tried again
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
LIVE = frozenset(RunState.live())
DERIVED = LIVE - {RunState.SUBMITTING}  # a run still submitting has no workflow to ask about
WORKFLOW_NAME = attrgetter("workflow_name")


def tick(
    backend: Backend,
    *,
    seen: Seen | None = None,
    source: str = "watcher",
    backoff: Backoff | None = None,
) -> int:
    """Reconcile every live run, settle ended ones, resume dead submissions; runs looked at.

    Ends by recording the heartbeat of `source` (the watcher, or `worker` for beat's pass),
    which `follow` and `simrun status` read to tell whether the controller runs at all."""
    for run_id in stale_submissions():
        background.enqueue(background.SUBMIT_RUN, run_id=run_id)
    seen = SEEN if seen is None else seen
    rows = followed_rows()
    live = [r for r in rows if r.state in DERIVED]
    fresh = seen.unnoted(live)  # the rest of their rows is read
    asked = {r.pk: r.version for r in fresh}
    unnoted = unnoted_rows(asked)
    statuses: dict[str, BackendStatus | None] = {}
    revisions: dict[str, str] | None = None
    if live:
        try:
            statuses, revisions = read_statuses(backend, live, seen, fresh, unnoted)
        except Exception:  # the API server gone, say: settle what can be, derive next tick
            log.exception("reading the statuses of %d runs failed; retried later", len(live))
    due = {r.pk: r for r in seen.to_derive(live, statuses, revisions)}
    backoff = BACKOFF if backoff is None else backoff
    wanted = set(due) | {r.pk for r in rows if r.final_work or r.state not in LIVE}
    wanted = {pk for pk in wanted if backoff.due(pk)}
    now = timezone.now()
    for run in wanted_runs(wanted):
        try:
            if run.pk in due:
                row = due[run.pk]
                revision = (revisions or {}).get(row.workflow_name, "")
                _reconcile(run, row, statuses[row.workflow_name], revision, seen, now)
            if run.state != RunState.SUBMITTING:
                after_reconcile(run, backend)
        except Exception as exc:  # C15: one bad record must not stop the others
            seen.drop(run.pk)
            backoff.failed(run.pk, exc, first_wait_s=settings.SIMRUN_POLL_S)
        else:
            backoff.succeeded(run.pk)
    seen.keep_only({r.pk for r in live})
    backoff.keep_only({r.pk for r in rows})
    record_heartbeat(source=source, at=timezone.now())
    return len(rows)


RUN_UNUSED = ("workflow", "environment")  # fields a tick never reads: not fetched
TASK_UNUSED = ("settings", "inputs", "dependencies", "resources")


def wanted_runs(wanted: set[str]) -> list[Run]:
    """The runs a tick derives or settles, with their tasks, in two queries; without the
    JSON fields it never reads (their decoding was most of a first tick's cost)."""
    if not wanted:
        return []
    tasks = Prefetch("tasks", queryset=Task.objects.defer(*TASK_UNUSED))
    return list(Run.objects.filter(pk__in=wanted).defer(*RUN_UNUSED).prefetch_related(tasks))


def read_statuses(
    backend: Backend,
    live: list[Followed],
    seen: Seen,
    fresh: list[Followed],
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


def noted_by_revision(row: Followed, rest: Unnoted, revision: str) -> Derived:
    """A run whose row says it was derived from what the backend read at `revision`, which
    it still has: as if derived here, its status not read (`read=False`). A row notes its
    revision only when its derivation depended on nothing else (`rules.watches_store_or_clock`),
    so the run is skipped until the revision changes."""
    return Derived(
        row.version, row.state, None, rest.merge_pending, rest.oom_kills, revision, read=False
    )


def note_from_row(
    seen: Seen, row: Followed, rest: Unnoted, status: BackendStatus | None, revision: str = ""
) -> None:
    """A run this process has not noted whose row says it was derived, at its version, from
    a status equal to `status` (a restarted process): noted from the row, as if derived here."""
    if same_status(rest.derived_from, row.version, status):
        derived = Derived(
            row.version, row.state, status, rest.merge_pending, rest.oom_kills, revision
        )
        seen.note(row.pk, derived)


def reusable(
    names: list[str], fresh: list[Followed], unnoted: Mapping[str, Unnoted]
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


def _reconcile(
    run: Run,
    row: Followed,
    status: BackendStatus | None,
    revision: str,
    seen: Seen,
    now: datetime,
) -> None:
    """Derive one run from the status read after `row` (at the backend's `revision`, if it
    has them); note what its record now says."""
    if run.version != row.version:
        seen.drop(run.pk)  # written after the status was read: derived again next tick
        return
    result = reconcile_with(run, status, now=now, revision=revision)
    if result is Reconciled.CONFLICT:
        seen.drop(run.pk)
    else:
        derived = Derived(
            run.version, run.state, status, run.merge_pending, run.oom_kills, revision
        )
        seen.note(run.pk, derived)


def after_reconcile(run: Run, backend: Backend) -> None:
    """Observations and logs of final tasks (C11, C12), then the ended run's pending steps;
    from the run and tasks as fetched and reconciled in this tick."""
    from runs.observations import record_task

    for task in run.tasks.all():
        if task.state not in rules.FINAL:
            continue
        if not task.observed:
            kills = {pod: attempts for pod, attempts in run.oom_kills.items()}
            record_task(task=task, paths=task_paths(run.pk, task.task_id), kills=kills)
            Task.objects.filter(pk=task.pk).update(observed=True)
            task.observed = True
        if not task.logs_kept and not run.deleting and keep_task_logs(run, task, backend):
            Task.objects.filter(pk=task.pk).update(logs_kept=True)
            task.logs_kept = True
    if run.ended:
        failed = settle(run.pk, backend)
        if failed:  # the tick backs off and logs it once a step, like a failing reconcile
            raise SettlingFailed("; ".join(failed))
        if run.deleting:  # its `delete_run` task was lost, or came before the release
            finish_deletion(run_id=run.pk)


class SettlingFailed(Exception):
    """An ended run's pending steps failed again (they stay pending)."""
