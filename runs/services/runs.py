"""Cancel and delete runs: who may, and in which order things happen.

The refusals are those of `runs.refusals` (imported here too, where the surfaces find them)."""

from __future__ import annotations

import os
import shutil

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from runs.models import Identity, IdentityKind, Run, Task
from runs.refusals import NotAllowed, RunConflict, RunNotFound
from runs.services import background
from runs.states import RunState, TaskState
from runs.store import run_paths


def may_change(identity: Identity, run: Run) -> bool:
    """The owner changes every run; a person their own; an agent its person's."""
    if identity.kind == IdentityKind.OWNER:
        return True
    return run.principal_id == identity.principal.pk


def cancel_run(*, run_id: str, identity: Identity) -> Run:
    """C16: write the run cancelled and its open tasks with it; its workflow's cancel, the
    node's release and the logs are left pending in the row for `settle_run`, enqueued once
    this commits (and for the controller's tick, should that task be lost)."""
    run = _changeable(run_id, identity, "cancel")
    if run.ended:
        raise RunConflict(f"run {run_id} has ended ({run.state}); there is nothing to cancel")
    now = timezone.now()
    with transaction.atomic():  # the run and its open tasks end together, or neither does
        updated = Run.objects.filter(pk=run.pk, state__in=RunState.live()).update(
            state=RunState.CANCELLED,
            message=f"cancelled by {identity.name}",
            ended_at=now,
            pending_cancel=True,
            pending_logs=True,
            pending_release=F("reserved"),
            version=F("version") + 1,
        )
        if updated:
            Task.objects.filter(run=run).exclude(state__in=TaskState.final()).update(
                state=TaskState.CANCELLED, ended_at=now, message=f"cancelled by {identity.name}"
            )
            background.enqueue_on_commit(background.SETTLE_RUN, run_id=run.pk)
    run.refresh_from_db()
    if not updated:
        raise RunConflict(f"run {run_id} ended meanwhile ({run.state})")
    return run


def request_deletion(*, run_id: str, identity: Identity) -> Run:
    """Mark an ended run deleting; `delete_run`, enqueued once this commits, settles what it
    still has pending and removes its record and files (the tick does it should that task be
    lost). Asking again for a run already deleting changes nothing."""
    run = _changeable(run_id, identity, "delete")
    if not run.ended:
        raise RunConflict(f"run {run_id} is {run.state}; cancel it before deleting it")
    mark_deleting(run_id=run.pk)
    found = Run.objects.filter(pk=run.pk).first()
    if found is None:  # asked twice and the first deletion finished meanwhile
        raise RunNotFound(f"no run {run_id!r}")
    return found


def mark_deleting(*, run_id: str) -> bool:
    """Mark an ended run deleting (a conditional update) and enqueue its `delete_run` once
    this commits; False when it is not ended, or deleting already (nothing done twice)."""
    with transaction.atomic():
        updated = Run.objects.filter(pk=run_id, state__in=RunState.ended(), deleting=False).update(
            deleting=True, pending_logs=False, version=F("version") + 1
        )
        if updated:
            background.enqueue_on_commit(background.DELETE_RUN, run_id=run_id)
    return bool(updated)


def request_settling(*, run_ids: list[str]) -> list[str]:
    """Enqueue `settle_run` (once this commits) for each of these runs that has ended with a
    step still pending (logs, stop, release); their ids. The admin's retry: the backend calls
    happen in a worker, not in the request."""
    pending = Q(pending_logs=True) | Q(pending_cancel=True) | Q(pending_release=True)
    found = list(
        Run.objects.filter(pending, pk__in=run_ids, state__in=RunState.ended())
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    for run_id in found:
        background.enqueue_on_commit(background.SETTLE_RUN, run_id=run_id)
    return found


def finish_deletion(*, run_id: str) -> list[str] | None:
    """Remove a deleting run's files, then its record; the paths removed (relative to the
    store), or None while its workflow or node is still to be released (C19: a run deleted
    meanwhile is no error)."""
    run = Run.objects.filter(pk=run_id, deleting=True).first()
    if run is None:
        return []
    if run.pending_cancel or run.pending_release:
        return None
    return _remove(run)


def _remove(run: Run) -> list[str]:
    """The run's files, then its record: a failure between the two leaves a record to find."""
    paths = run_paths(run.pk)
    removed = [f"runs/{run.pk}"] if os.path.lexists(paths.root) else []
    if paths.root.is_symlink():  # the run's code made its directory a link: only that goes
        paths.root.unlink(missing_ok=True)
    shutil.rmtree(paths.root, ignore_errors=True)  # never follows a link inside
    Run.objects.filter(pk=run.pk).delete()
    return removed


def _changeable(run_id: str, identity: Identity, verb: str) -> Run:
    """The run, if it exists and `identity` may change it."""
    run = Run.objects.filter(pk=run_id).first()
    if run is None:
        raise RunNotFound(f"no run {run_id!r}")
    if not may_change(identity, run):
        raise NotAllowed(
            f"run {run_id} belongs to {run.principal.name}; only they or the owner may {verb} it"
        )
    return run
