"""One pass of the controller over what changed; driven by beat and by the watcher.

A tick, in order:

1. resumes the submissions whose worker is gone;
2. reads the rows written since its process's last read (`followed.written_rows`; every
   followed row at its first tick, and again every `SIMRUN_TICK_RESYNC_S`);
3. asks the backend what changed and reads the statuses of the runs to look at, which says
   which runs to derive (`plan.plan_tick`): a run whose row and status did not change is
   neither read nor derived;
4. fetches those runs and the runs with work left (a final task to observe, an ended run's
   pending steps) with their tasks, in two queries;
5. derives them and writes the ones that changed in a few statements, each only if its row
   did not move meanwhile (`writes.py`);
6. keeps the observations and logs of final tasks and settles ended runs;
7. records its heartbeat.

A run whose derivation or settling fails is backed off (`backoff.py`) and does not stop the
others (C15). What the process keeps between ticks (`seen.py`) only saves work: a new process
reads every row once and notes from them what their records were derived from.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import NamedTuple

from django.conf import settings
from django.db.models import Prefetch
from django.utils import timezone

from runs.controller import rules
from runs.controller.backoff import Backoff
from runs.controller.followed import Rows, followed_rows, unnoted_rows, written_rows
from runs.controller.plan import Plan, plan_tick
from runs.controller.reconcile import Derivation, applied, derive
from runs.controller.seen import Derived, Seen
from runs.controller.writes import note_derived_from, write_if_unchanged
from runs.models import Run, Task
from runs.ports import Backend
from runs.services.fair_share import requeue_submissions
from runs.services.heartbeats import record_heartbeat
from runs.services.runs import finish_deletion
from runs.services.settle import keep_task_logs, settle
from runs.states import RunState
from runs.store import task_paths

log = logging.getLogger(__name__)

SEEN = Seen()  # this process's notes; every tick of the process shares them
BACKOFF = Backoff()  # this process's failing runs and when each is tried again


def tick(
    backend: Backend,
    *,
    seen: Seen | None = None,
    source: str = "watcher",
    backoff: Backoff | None = None,
) -> int:
    """Reconcile what changed, settle ended runs, resume dead submissions; the number of
    runs followed.

    Ends by recording the heartbeat of `source` (the watcher, or `worker` for beat's pass),
    which `follow` and `simrun status` read to tell whether the controller runs at all."""
    requeue_submissions()  # once per back-off step each, never once per pass
    seen = SEEN if seen is None else seen
    backoff = BACKOFF if backoff is None else backoff
    rows = read_rows(seen)
    seen.take(rows.followed, gone=rows.gone, whole=rows.whole)
    if rows.whole:
        backoff.keep_only(set(seen.rows))
    plan = plan_tick(seen, backend, rest=unnoted_rows)
    fetched = wanted_runs(plan.wanted(backoff), seen)
    failed = reconcile_runs([f for f in fetched if f.run.pk in plan.due], plan, seen)
    for run, tasks in fetched:
        if run.pk not in failed:
            failed |= settle_run(run, tasks, backend, seen)
    for run, _ in fetched:
        if run.pk in failed:
            seen.drop(run.pk)
            backoff.failed(run.pk, failed[run.pk], first_wait_s=settings.SIMRUN_POLL_S)
        else:
            backoff.succeeded(run.pk)
    record_heartbeat(source=source, at=timezone.now())
    return len(seen.rows)


def read_rows(seen: Seen) -> Rows:
    """The rows written since the process's last read, `SIMRUN_TICK_LAG_S` before it (a write
    stamped before the read may commit after it); every followed row at the first tick and
    every `SIMRUN_TICK_RESYNC_S` (what a lag longer than that could have hidden)."""
    now = timezone.now()
    whole = seen.read_at is None or seen.resync_due(settings.SIMRUN_TICK_RESYNC_S)
    if whole:
        rows = Rows(followed_rows(), [], whole=True)
    else:
        assert seen.read_at is not None
        rows = written_rows(seen.read_at - timedelta(seconds=settings.SIMRUN_TICK_LAG_S))
    seen.read_at = now
    return rows


# Fields a tick never reads (or, `sources` and a task's `type`, only to observe a final task:
# one query then): not fetched, so not decoded.
RUN_UNUSED = ("workflow", "environment", "sources", "idempotency_key", "resume_from")
TASK_UNUSED = (
    "settings",
    "inputs",
    "dependencies",
    "resources",
    "reused",
    "reuse_note",
    "key",
    "type",
)


class Fetched(NamedTuple):
    """A run a tick derives or settles, with its tasks in their order."""

    run: Run
    tasks: list[Task]


def wanted_runs(wanted: set[str], seen: Seen) -> list[Fetched]:
    """The runs a tick derives or settles, with their tasks, in two queries; without the
    JSON fields it never reads (their decoding was most of a first tick's cost). A run no
    longer there (deleted) is forgotten."""
    if not wanted:
        return []
    tasks = Prefetch("tasks", queryset=Task.objects.defer(*TASK_UNUSED), to_attr="fetched")
    runs = Run.objects.filter(pk__in=wanted).defer(*RUN_UNUSED).prefetch_related(tasks)
    found = [Fetched(run, run.fetched) for run in runs]
    for run_id in wanted - {run.pk for run, _ in found}:
        seen.forget(run_id)
    return found


def reconcile_runs(fetched: list[Fetched], plan: Plan, seen: Seen) -> dict[str, Exception]:
    """Derive each run from the status the plan read, write those that changed in a few
    statements, and note what each record now says; the runs that failed, with why."""
    now = timezone.now()
    failed: dict[str, Exception] = {}
    derived: dict[str, Derivation] = {}
    for run, tasks in fetched:
        row = plan.due[run.pk]
        if run.version != row.version:  # written after the status was read: derived next tick
            seen.take([row._replace(version=run.version, state=run.state)], whole=False)
            continue
        try:
            status = plan.statuses[row.workflow_name]
            revision = plan.revisions.get(row.workflow_name, "")
            derived[run.pk] = derive(run, tasks, status, now=now, revision=revision)
        except Exception as exc:  # C15: one bad record must not stop the others
            failed[run.pk] = exc
    writes = [d.write for d in derived.values() if d.write is not None]
    written = write_if_unchanged(writes) if writes else set()
    notes = {
        run.pk: (run.version, d.noted)
        for run, _ in fetched
        if (d := derived.get(run.pk)) is not None
        and d.write is None
        and run.derived_from != d.noted
    }
    if notes:
        note_derived_from(notes)
    for run, tasks in fetched:
        derivation = derived.get(run.pk)
        if derivation is None:
            continue
        if derivation.write is not None:
            if run.pk not in written:  # C22: somebody else wrote it meanwhile
                seen.drop(run.pk)
                continue
            applied(run, tasks, derivation.write)
            seen.wrote(run.pk, version=run.version, state=run.state)
        run.derived_from = derivation.noted
        name = plan.due[run.pk].workflow_name
        status, revision = plan.statuses[name], plan.revisions.get(name, "")
        seen.note(
            run.pk,
            Derived(run.version, run.state, status, run.merge_pending, run.oom_kills, revision),
        )
    return failed


def settle_run(run: Run, tasks: list[Task], backend: Backend, seen: Seen) -> dict[str, Exception]:
    """The work after deriving (`after_reconcile`) of a run that is not submitting; what
    failed, by run id. A live run whose final tasks have nothing left is settled."""
    if run.state == RunState.SUBMITTING:
        return {}
    try:
        after_reconcile(run, tasks, backend)
    except Exception as exc:  # C15: one bad record must not stop the others
        return {run.pk: exc}
    if not any(t.state in rules.FINAL and not (t.observed and t.logs_kept) for t in tasks):
        seen.settled(run.pk)
    return {}


def after_reconcile(run: Run, tasks: list[Task], backend: Backend) -> None:
    """Observations and logs of final tasks (C11, C12), then the ended run's pending steps;
    from the run and tasks as fetched and reconciled in this tick."""
    from runs.observations import record_task

    for task in tasks:
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
