"""Reconcile: bring the records of the live runs up to date with the backend.

Nothing is kept in memory between ticks but what `seen.py` notes (C15): every tick reads the
live runs from the database. The backend is asked with no lock held (C14), after the record's
version was read, and a record is written only if its version is still the one read (C22), so
a cancel racing a reconcile wins and a status read before another process's write never
overwrites what that process derived.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.utils import timezone

from runs.controller import records, rules
from runs.controller.seen import derived_from
from runs.controller.store_facts import failure_causes, reported_kills, reported_span
from runs.controller.writes import Write, note_derived_from, write_if_unchanged
from runs.models import Run, StoredPod, Task
from runs.plans import TaskPlan
from runs.ports import Backend, BackendStatus
from runs.states import RunState
from runs.store import has_merge_marker, task_paths


@dataclass(frozen=True)
class Observed:
    """What one reconcile derived for a run: the fields to write and the tasks' changes."""

    run: dict[str, Any] = field(default_factory=dict)
    tasks: dict[int, dict[str, Any]] = field(default_factory=dict)
    outcome: str | None = None


def observe(run: Run, tasks: list[Task], status: BackendStatus | None, now: datetime) -> Observed:
    """Derive the run's new state from the backend's status and the store (no writes).

    Facts first, then rules: the store is read only where the status says the derivation
    depends on it (`rules.wants_marker`, `rules.wants_reported_kills`; the reports of a task
    that ends, of a pod whose failure fails it), so a run whose status did not change costs
    no file access. A status the backend could not read (`unreadable`) changes only the
    run's message. What is said of each task (`said`: task, reason) makes the run's message,
    in order, and a failed task's own message is the last reason said of it."""
    if status is not None and status.unreadable:  # nothing to derive from: keep, and say why
        return Observed(run=rules.live_message(run.message, status))
    task_records = [_record(task, status) for task in tasks]
    markers = {
        t.task_id: has_merge_marker(task_paths(run.id, t.task_id))
        for t in task_records
        if rules.wants_marker(t, status)
    }
    oom_kills = {k: list(v) for k, v in run.oom_kills.items()}
    merge_pending = dict(run.merge_pending)
    derived: dict[str, rules.TaskDerived] = {}
    said: list[tuple[str, str]] = []
    grace = timedelta(seconds=settings.SIMRUN_MERGE_MARKER_GRACE_S)
    if status is not None:
        for task in task_records:
            derived[task.task_id] = found = rules.derive_task(
                task,
                status,
                marker=markers.get(task.task_id, False),
                reported_kills=reported_kills(run.id, task, status),
                oom_kills=oom_kills,
                merge_since=merge_pending.get(task.task_id),
                now=now,
                grace=grace,
            )
            oom_kills.update(found.oom_kills)
            if found.merge_since is not None:
                merge_pending[task.task_id] = found.merge_since
            causes = failure_causes(run.id, task.task_id, found.reasons)
            reasons = records.task_reasons(task.task_id, found, causes=causes, status=status)
            said += [(task.task_id, reason) for reason in reasons]
    states, ended = records.workflow_end(
        {t: d.state for t, d in derived.items()},
        stored={t.task_id: t.state for t in tasks},
        status=status,
        markers=markers,
        awaiting=_awaiting(derived, status, merge_pending, now, grace),
    )
    said += ended
    outcome = rules.run_outcome(states)
    if outcome is not None:  # the workflow is stopped: what is still open will not go on
        states = {t: s if s in rules.FINAL else rules.CANCELLED for t, s in states.items()}
    changes = _task_changes(run.id, tasks, states, dict(said), now)
    fields: dict[str, Any] = {"oom_kills": oom_kills, "merge_pending": merge_pending}
    if status is not None:
        fields["pods"] = _pods(status)
    message = records.run_message(said)
    fields.update(_run_change(run, tasks, states, outcome, changes, message, status, now))
    return Observed(run=fields, tasks=changes, outcome=outcome)


def _awaiting(
    derived: dict[str, rules.TaskDerived],
    status: BackendStatus | None,
    merge_pending: dict[str, str],
    now: datetime,
    grace: timedelta,
) -> dict[str, bool]:
    """C6, C10: the tasks awaiting their merge marker: as derived while the workflow is there;
    once it is gone, those its record says awaited one (True while their grace lasts)."""
    if status is not None:
        return {t: d.awaiting for t, d in derived.items()}
    return rules.awaited_when_gone(merge_pending, now=now, grace=grace)


def _record(task: Task, status: BackendStatus | None) -> rules.TaskRecord:
    """The plain values the rules need of a task's row; the retry memory of its base pods
    (its plan decoded) only when one of them failed."""
    plan = task.plan or {}
    if plan and not isinstance(plan.get("shape"), dict):
        raise ValueError(f"task {task.task_id!r}: its plan has no shape: {plan!r}")
    record = rules.TaskRecord(
        task.task_id,
        task.state,
        task.splittable,
        int(plan["pods"]) if plan else 1,
        bool(plan.get("coordinator_merges", False)),
    )
    if not plan or status is None or not any(p in status.failures for p in record.base_pods):
        return record
    shapes = TaskPlan.from_json(task.plan)
    retry = {
        pod: shapes.shape_of_pod(task_id=task.task_id, pod=pod).retry_memory_gb
        for pod in record.base_pods
    }
    return replace(record, retry_memory_gb=retry)


def _pods(status: BackendStatus) -> dict[str, StoredPod]:
    return {
        name: StoredPod(
            phase=str(pod.phase), attempts=pod.attempts, node=pod.node, exit_code=pod.exit_code
        )
        for name, pod in status.pods.items()
    }


def _task_changes(
    run_id: str, tasks: list[Task], states: dict[str, str], why: dict[str, str], now: datetime
) -> dict[int, dict[str, Any]]:
    """The changes of the tasks whose state changed (`why`: a task's last reason said); the
    reports of those that end done or failed give their times."""
    changes = {}
    for task in tasks:
        new = states.get(task.task_id, task.state)
        reported = (
            reported_span(run_id, task.task_id)
            if records.ends_task_with_reports(task.state, new)
            else (None, None)
        )
        change = records.task_change(
            state=task.state,
            started_at=task.started_at,
            new=new,
            now=now,
            why=why.get(task.task_id),
            reported=reported,
        )
        if change is not None:
            changes[task.pk] = change
    return changes


def _run_change(
    run: Run,
    tasks: list[Task],
    states: dict[str, str],
    outcome: str | None,
    changes: dict[int, dict[str, Any]],
    message: str,
    status: BackendStatus | None,
    now: datetime,
) -> dict[str, Any]:
    """The run's fields for its outcome (the terminal record, C13), or its live state."""
    if outcome is None:
        live = rules.live_run_state(states)
        started = {"started_at": now} if live == RunState.RUNNING and run.started_at is None else {}
        return {"state": live, **started, **rules.live_message(run.message, status)}
    began, ended = _span(tasks, changes, now)
    change: dict[str, Any] = {}
    if began is not None and (run.started_at is None or began < run.started_at):
        change["started_at"] = began
    return change | {
        "state": outcome,
        "message": message,
        "ended_at": ended,
        "pending_cancel": status is not None,
        "pending_logs": status is not None,
        "pending_release": run.reserved,
    }


def _span(
    tasks: list[Task], changes: dict[int, dict[str, Any]], now: datetime
) -> tuple[datetime | None, datetime]:
    """When an ending run's work began and ended: its tasks' first start and last end."""
    starts, ends = [], []
    for task in tasks:
        change = changes.get(task.pk, {})
        started = change.get("started_at", task.started_at)
        ended = change.get("ended_at", task.ended_at)
        if started is not None:
            starts.append(started)
        if ended is not None:
            ends.append(ended)
    return (min(starts) if starts else None), (max(ends) if ends else now)


class Reconciled(StrEnum):
    UNCHANGED = "unchanged"  # the record already said what the status says
    WRITTEN = "written"
    CONFLICT = "conflict"  # somebody else wrote the record meanwhile: nothing written


@dataclass(frozen=True)
class Derivation:
    """What a run's record becomes from a status: the write to make (None: the record
    already says it), and else what its row notes it was derived from (`derived_from`)."""

    write: Write | None
    noted: str


def derive(
    run: Run, tasks: list[Task], status: BackendStatus | None, *, now: datetime, revision: str = ""
) -> Derivation:
    """Derive a run and its tasks from its status (None: its workflow is gone), read after
    the record's version; no writes. The row notes which status it was derived from
    (`derived_from`, with the backend's `revision` of it unless the record may change with
    the status unchanged)."""
    observed = observe(run, tasks, status, now)
    if observed.tasks or any(getattr(run, k) != v for k, v in observed.run.items()):
        fields = observed.run | {
            "derived_from": noted_in_row(run.version + 1, status, revision, observed.run)
        }
        write = Write(run.pk, run.version, fields, observed.tasks)
        return Derivation(write, fields["derived_from"])
    return Derivation(None, noted_in_row(run.version, status, revision, observed.run))


def applied(run: Run, tasks: list[Task], write: Write) -> None:
    """A write made: applied to `run` and its tasks too, so what follows in the tick works
    from them."""
    for key, value in write.run.items():
        setattr(run, key, value)
    run.version += 1
    for task in tasks:
        for key, value in write.tasks.get(task.pk, {}).items():
            setattr(task, key, value)


def reconcile_with(
    run: Run, status: BackendStatus | None, *, now: datetime, revision: str = ""
) -> Reconciled:
    """One run: derive it from its status and write if it changed and nobody else wrote
    meanwhile (C22); when only what its row notes changed, that is noted without a new
    version (nothing a reader sees changed). A tick does the same for many runs at once."""
    tasks = list(run.tasks.all())
    derivation = derive(run, tasks, status, now=now, revision=revision)
    if derivation.write is not None:
        if not write_if_unchanged([derivation.write]):
            return Reconciled.CONFLICT
        applied(run, tasks, derivation.write)
        return Reconciled.WRITTEN
    if run.derived_from != derivation.noted:  # C22: only on the version read
        note_derived_from({run.pk: (run.version, derivation.noted)})
        run.derived_from = derivation.noted
    return Reconciled.UNCHANGED  # no new version for the event streams


def noted_in_row(
    version: int, status: BackendStatus | None, revision: str, fields: dict[str, Any]
) -> str:
    """`derived_from` of the record at `version` with these fields, derived from `status`."""
    if status is not None and status.unreadable:  # read again at every tick, never skipped
        return derived_from(version, status)
    watches = status is not None and rules.watches_store_or_clock(
        merge_pending=fields["merge_pending"],
        failures=status.failures,
        oom_kills=fields["oom_kills"],
    )
    return derived_from(version, status, "" if watches else revision)


def reconcile_run(run: Run, backend: Backend, *, now: datetime | None = None) -> bool:
    """One run: ask the backend (no lock held), derive, write if it changed and nobody else
    wrote meanwhile; True if written."""
    try:
        status: BackendStatus | None = backend.status(run.workflow_name)
    except KeyError:
        status = None
    return reconcile_with(run, status, now=now or timezone.now()) is Reconciled.WRITTEN
