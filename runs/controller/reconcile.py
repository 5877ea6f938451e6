"""Reconcile: bring the records of the live runs up to date with the backend.

Nothing is kept in memory between ticks but what `seen.py` notes (C15): every tick reads the
live runs from the database. The backend is asked with no lock held (C14), after the record's
version was read, and a record is written only if its version is still the one read (C22), so
a cancel racing a reconcile wins and a status read before another process's write never
overwrites what that process derived.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, NamedTuple

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from runs.controller import rules
from runs.models import Run, RunState, StoredPod, Task
from runs.plans import TaskPlan
from runs.ports import Backend, BackendStatus, PodPhase, WorkflowPhase
from runs.store import has_merge_marker, reports, task_paths
from simrun_harness.report import read_report

log = logging.getLogger(__name__)


@dataclass
class Observed:
    """What one reconcile derived for a run: the fields to write and the tasks' changes."""

    run: dict[str, Any] = field(default_factory=dict)
    tasks: dict[int, dict[str, Any]] = field(default_factory=dict)
    outcome: str | None = None


FOLLOWED = (  # the runs the controller follows: live ones and ended ones with work pending
    Q(state__in=RunState.live())
    | Q(pending_release=True)
    | Q(pending_cancel=True)
    | Q(pending_logs=True)
    | Q(deleting=True)
)


class Followed(NamedTuple):
    """What a tick needs to know of a followed run before asking the backend."""

    pk: str
    version: int
    state: str
    workflow_name: str
    final_work: bool  # a final task's observations or logs are still to be kept


def followed_rows() -> list[Followed]:
    """The followed runs in one query, without their tasks and JSON fields."""
    work = Task.objects.filter(run=OuterRef("pk"), state__in=rules.FINAL).filter(
        Q(observed=False) | Q(logs_kept=False)
    )
    rows = (
        Run.objects.filter(FOLLOWED)
        .order_by()
        .annotate(final_work=Exists(work))
        .values_list(*Followed._fields)
    )
    return [Followed(*row) for row in rows]


def write_if_unchanged(run: Run, observed: Observed) -> bool:
    """C22: write the run's fields and its tasks' only if the run's version is unchanged."""
    with transaction.atomic():
        updated = Run.objects.filter(pk=run.pk, version=run.version).update(
            **observed.run, version=F("version") + 1, updated_at=timezone.now()
        )
        if not updated:
            return False
        for pk, values in observed.tasks.items():
            Task.objects.filter(pk=pk).update(**values)
    return True


def observe(run: Run, tasks: list[Task], status: BackendStatus | None, now: datetime) -> Observed:
    """Derive the run's new state from the backend's status and the store (no writes)."""
    grace = timedelta(seconds=settings.SIMRUN_MERGE_MARKER_GRACE_S)
    merge_pending = dict(run.merge_pending)
    oom_kills = {k: list(v) for k, v in run.oom_kills.items()}
    states: dict[str, str] = {}
    messages: list[str] = []
    awaiting: dict[str, bool] = {}
    markers: dict[str, bool] = {}
    for task in tasks:
        plan = TaskPlan.from_json(task.plan) if task.plan else None
        merges_self = bool(plan and plan.coordinator_merges)
        paths = task_paths(run.id, task.task_id)
        if task.splittable:
            markers[task.task_id] = has_merge_marker(paths)
        if status is None:
            continue
        kills = _reported_kills(task)
        names = rules.pod_names(
            task.task_id,
            splittable=task.splittable,
            pods=plan.pods if plan else 1,
            coordinator_merges=merges_self,
        )
        for name in names:
            found = rules.oom_attempts(status.failures.get(name, []), kills.get(name, {}))
            if found:
                oom_kills[name] = sorted(set(oom_kills.get(name, [])) | found)
        pods = {n: p for n, p in status.pods.items() if n in names}
        if task.splittable:
            w0 = pods.get(f"{task.task_id}-w0")
            waiting_marker = bool(
                merges_self and w0 and w0.phase == PodPhase.SUCCEEDED and not markers[task.task_id]
            )
            if waiting_marker:
                merge_pending.setdefault(task.task_id, now.isoformat())
            since = merge_pending.get(task.task_id)
            over = bool(since and now - datetime.fromisoformat(since) > grace)
            awaiting[task.task_id] = waiting_marker and not over
            state = rules.split_task_state(
                task.task_id,
                pods,
                coordinator_merges=merges_self,
                marker=markers[task.task_id],
                marker_wait_over=over,
            )
            if state == rules.FAILED and over and waiting_marker:
                messages.append(
                    f"task '{task.task_id}': the coordinator ended but no merge marker appeared"
                )
        else:
            state = rules.unsplit_task_state(pods.get(task.task_id))
        for name in rules.base_pods(
            task.task_id, splittable=task.splittable, coordinator_merges=merges_self
        ):
            shape = plan.shape_of_pod(task_id=task.task_id, pod=name) if plan else None
            retry_gb = shape.retry_memory_gb if shape else 0.0
            verdict = rules.fatal_failure(
                name,
                status.failures.get(name, []),
                oom_attempts=frozenset(oom_kills.get(name, [])),
                retry_memory_gb=retry_gb,
            )
            if verdict and state not in (rules.DONE,):
                state = rules.FAILED
                cause = _cause(task, verdict)
                said = f"{verdict.message}: {cause}" if cause else verdict.message
                messages.append(f"task '{task.task_id}': {said}")
        if state == rules.FAILED and not any(
            m.startswith(f"task '{task.task_id}'") for m in messages
        ):
            messages.append(f"task '{task.task_id}': {_failure_text(task.task_id, status)}")
        states[task.task_id] = state
    if status is None:
        stored = {t.task_id: t.state for t in tasks}
        states = rules.resolve_gone(stored, markers=markers, awaiting_marker=awaiting)
        for task_id, state in states.items():
            if state == rules.FAILED and stored[task_id] != rules.FAILED:
                messages.append(f"task '{task_id}': its workflow is gone and its end was not seen")
    elif status.phase in (WorkflowPhase.SUCCEEDED, WorkflowPhase.FAILED, WorkflowPhase.STOPPED):
        for task_id, state in states.items():
            if state not in rules.FINAL and not awaiting.get(task_id):
                states[task_id] = rules.FAILED  # C6: only a task awaiting its marker keeps it open
                messages.append(f"task '{task_id}': the workflow ended before the task did")
    outcome = rules.run_outcome(states)
    if outcome is not None:  # the workflow is stopped: what is still open will not go on
        states = {t: s if s in rules.FINAL else rules.CANCELLED for t, s in states.items()}
    observed = Observed(outcome=outcome)
    observed.run = {"oom_kills": oom_kills, "merge_pending": merge_pending}
    if status is not None:
        observed.run["pods"] = {
            name: StoredPod(
                phase=str(pod.phase),
                attempts=pod.attempts,
                node=pod.node,
                exit_code=pod.exit_code,
            )
            for name, pod in status.pods.items()
        }
    why = {t.task_id: m.partition(": ")[2] for t in tasks for m in messages if _about(m, t)}
    observed.tasks = {
        t.pk: c for t in tasks if (c := _task_change(t, states, now, why)) is not None
    }
    if outcome is not None:
        began, ended = _span(tasks, observed, now)
        if began is not None and (run.started_at is None or began < run.started_at):
            observed.run["started_at"] = began
        observed.run.update(
            state=outcome,
            message="; ".join(messages),
            ended_at=ended,
            pending_cancel=status is not None,
            pending_logs=status is not None,
            pending_release=run.reserved,
        )
    else:
        live = rules.live_run_state(states)
        observed.run["state"] = live
        if live == RunState.RUNNING and run.started_at is None:
            observed.run["started_at"] = now
    return observed


def _about(message: str, task: Task) -> bool:
    return message.startswith(f"task '{task.task_id}': ")


def _task_change(
    task: Task, states: dict[str, str], now: datetime, why: dict[str, str]
) -> dict[str, Any] | None:
    """The fields of a task to write for its new state; None if its state did not change.

    A task that ends done or failed takes its times from its pods' reports (the first start,
    the last end), so a run whose controller was away while its pods ran (its services
    killed and restarted, its submission resumed by another worker) records when the work
    happened rather than when the controller next looked."""
    new = states.get(task.task_id, task.state)
    if new == task.state:
        return None
    change: dict[str, Any] = {"state": new}
    if new not in (rules.WAITING, rules.QUEUED) and task.started_at is None:
        change["started_at"] = now
    if new in rules.FINAL:
        change["ended_at"] = now
    if new in (rules.DONE, rules.FAILED):
        began, ended = _reported_span(task)
        if began is not None and began < change.get("started_at", task.started_at or now):
            change["started_at"] = began
        if ended is not None and ended < now:
            change["ended_at"] = ended
    if new == rules.CANCELLED:
        change["message"] = "stopped: the run failed"
    if new == rules.FAILED and task.task_id in why:
        change["message"] = why[task.task_id]
    return change


def _reported_span(task: Task) -> tuple[datetime | None, datetime | None]:
    """The first start and the last end among the reports of a task's pods."""
    found = [report for _, report in reports(task_paths(task.run_id, task.task_id))]
    if not found:
        return None, None
    return min(r.started_at for r in found), max(r.ended_at for r in found)


def _span(tasks: list[Task], observed: Observed, now: datetime) -> tuple[datetime | None, datetime]:
    """When an ending run's work began and ended: its tasks' first start and last end."""
    starts, ends = [], []
    for task in tasks:
        change = observed.tasks.get(task.pk, {})
        started = change.get("started_at", task.started_at)
        ended = change.get("ended_at", task.ended_at)
        if started is not None:
            starts.append(started)
        if ended is not None:
            ends.append(ended)
    return (min(starts) if starts else None), (max(ends) if ends else now)


def _cause(task: Task, verdict: rules.Verdict) -> str:
    """Why the attempt that failed a task failed: from its report, or its exit code."""
    paths = task_paths(task.run_id, task.task_id)
    report = None
    if verdict.attempt is not None:
        try:
            report = read_report(paths.report(verdict.pod, verdict.attempt))
        except (OSError, ValueError):
            report = None  # no report: the store refused it, or the pod died before
    error = report.error if report is not None else None
    return rules.failure_cause(
        verdict,
        error=error.message if error else None,
        unit=error.unit if error else None,
        task_dir=str(paths.root),
    )


def _reported_kills(task: Task) -> dict[str, dict[int, int]]:
    """Kills of the OOM killer counted in reports, per pod and attempt (C8)."""
    found: dict[str, dict[int, int]] = {}
    for _, report in reports(task_paths(task.run_id, task.task_id)):
        if report.oom_kills:
            found.setdefault(report.worker, {})[report.attempt] = report.oom_kills
    return found


def _failure_text(task_id: str, status: BackendStatus) -> str:
    for name, failures in sorted(status.failures.items()):
        if name == task_id or name.startswith(f"{task_id}-"):
            last = failures[-1]
            code = "no exit code" if last.exit_code is None else f"exit code {last.exit_code}"
            return f"pod {name} failed ({code}){': ' + last.message if last.message else ''}"
    return "failed"


class Reconciled(StrEnum):
    UNCHANGED = "unchanged"  # the record already said what the status says
    WRITTEN = "written"
    CONFLICT = "conflict"  # somebody else wrote the record meanwhile: nothing written


def reconcile_with(run: Run, status: BackendStatus | None, *, now: datetime) -> Reconciled:
    """Derive a run from its status (None: its workflow is gone), read after the record's
    version; write if it changed and nobody else wrote meanwhile. A write is applied to `run`
    and its prefetched tasks too, so what follows in the tick works from them."""
    tasks = list(run.tasks.all())
    observed = observe(run, tasks, status, now)
    if not observed.tasks and all(getattr(run, k) == v for k, v in observed.run.items()):
        return Reconciled.UNCHANGED  # no write, no new version for the event streams
    if not write_if_unchanged(run, observed):
        return Reconciled.CONFLICT
    for key, value in observed.run.items():
        setattr(run, key, value)
    run.version += 1
    for task in tasks:
        for key, value in observed.tasks.get(task.pk, {}).items():
            setattr(task, key, value)
    return Reconciled.WRITTEN


def reconcile_run(run: Run, backend: Backend, *, now: datetime | None = None) -> bool:
    """One run: ask the backend (no lock held), derive, write if it changed and nobody else
    wrote meanwhile; True if written."""
    try:
        status: BackendStatus | None = backend.status(run.workflow_name)
    except KeyError:
        status = None
    return reconcile_with(run, status, now=now or timezone.now()) is Reconciled.WRITTEN
