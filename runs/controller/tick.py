"""One pass of the controller over every followed run; driven by beat and by the watcher.

A tick reads the followed runs' versions in one query, asks the backend once for the status
of every live workflow (for a run whose record this process derived last, what the backend
last observed will do: the local backend's loop holds it), and touches only the runs that
need it: those whose status differs
from the one their record was derived from (`seen.py`), those whose derivation also depends
on the store or the clock (`rules.watches_store_or_clock`), those with a final task whose
observations or logs are still to be kept, and ended runs with steps pending. Those are
fetched with their tasks in one more query; a run that did not change costs no query.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from runs.controller import rules
from runs.controller.backoff import Backoff
from runs.controller.reconcile import Followed, Reconciled, followed_rows, reconcile_with
from runs.controller.seen import Derived, Seen
from runs.models import Run, RunState, Task
from runs.ports import Backend, BackendStatus
from runs.services import background
from runs.services.heartbeats import record_heartbeat
from runs.services.runs import finish_deletion
from runs.services.settle import keep_task_logs, settle
from runs.services.submission import stale_submissions
from runs.store import task_paths

log = logging.getLogger(__name__)

SEEN = Seen()  # this process's notes; every tick of the process shares them
BACKOFF = Backoff()  # this process's failing runs and when each is tried again
LIVE = frozenset(RunState.live())
DERIVED = LIVE - {RunState.SUBMITTING}  # a run still submitting has no workflow to ask about


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
    statuses: dict[str, BackendStatus | None] = {}
    if live:
        try:
            known = [
                r.workflow_name for r in live if seen.knows(r.pk, version=r.version, state=r.state)
            ]
            statuses = backend.statuses([r.workflow_name for r in live], may_reuse=known)
        except Exception:  # the API server gone, say: settle what can be, derive next tick
            log.exception("reading the statuses of %d runs failed; retried later", len(live))
    due: dict[str, Followed] = {}
    for row in live:
        if row.workflow_name not in statuses:
            continue  # not read this tick (logged by the backend)
        status = statuses[row.workflow_name]
        noted = seen.derived(row.pk, version=row.version, state=row.state, status=status)
        if noted is None or rules.watches_store_or_clock(
            merge_pending=noted.merge_pending,
            failures=status.failures if status is not None else {},
            oom_kills=noted.oom_kills,
        ):
            due[row.pk] = row
    backoff = BACKOFF if backoff is None else backoff
    wanted = set(due) | {r.pk for r in rows if r.final_work or r.state not in LIVE}
    wanted = {pk for pk in wanted if backoff.due(pk)}
    now = timezone.now()
    for run in Run.objects.filter(pk__in=wanted).prefetch_related("tasks") if wanted else []:
        try:
            if run.pk in due:
                row = due[run.pk]
                _reconcile(run, row, statuses[row.workflow_name], seen, now)
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


def _reconcile(
    run: Run, row: Followed, status: BackendStatus | None, seen: Seen, now: datetime
) -> None:
    """Derive one run from the status read after `row`; note what its record now says."""
    if run.version != row.version:
        seen.drop(run.pk)  # written after the status was read: derived again next tick
        return
    result = reconcile_with(run, status, now=now)
    if result is Reconciled.CONFLICT:
        seen.drop(run.pk)
    else:
        seen.note(run.pk, Derived(run.version, run.state, status, run.merge_pending, run.oom_kills))


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
