"""Cancel and delete runs: who may, and in which order things happen.

The refusals are those of `runs.refusals` (imported here too, where the surfaces find them)."""

from __future__ import annotations

import shutil

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from runs.models import Identity, IdentityKind, Run, RunState, Task, TaskState
from runs.ports import Backend
from runs.refusals import NotAllowed, RunConflict, RunNotFound
from runs.services.settle import settle
from runs.store import run_paths


def may_change(identity: Identity, run: Run) -> bool:
    """The owner changes every run; a person their own; an agent its person's."""
    if identity.kind == IdentityKind.OWNER:
        return True
    return run.principal_id == identity.principal.pk


def cancel_run(*, run_id: str, identity: Identity, backend: Backend) -> Run:
    """C16: write the run cancelled, then cancel its workflow and release its node."""
    run = Run.objects.filter(pk=run_id).first()
    if run is None:
        raise RunNotFound(f"no run {run_id!r}")
    if not may_change(identity, run):
        raise NotAllowed(
            f"run {run_id} belongs to {run.principal.name}; only they or the owner may cancel it"
        )
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
    if not updated:
        run.refresh_from_db()
        raise RunConflict(f"run {run_id} ended meanwhile ({run.state})")
    settle(run.pk, backend)
    run.refresh_from_db()
    return run


def delete_run(*, run_id: str, identity: Identity) -> list[str]:
    """Delete an ended run's record and its files; the paths removed, relative to the store."""
    run = Run.objects.filter(pk=run_id).first()
    if run is None:
        raise RunNotFound(f"no run {run_id!r}")
    if not may_change(identity, run):
        raise NotAllowed(
            f"run {run_id} belongs to {run.principal.name}; only they or the owner may delete it"
        )
    if not run.ended:
        raise RunConflict(f"run {run_id} is {run.state}; cancel it before deleting it")
    if run.pending_cancel or run.pending_release:
        raise RunConflict(f"run {run_id} still has its workflow or node to release; try again soon")
    paths = run_paths(run.pk)
    removed = [f"runs/{run.pk}"] if paths.root.exists() else []
    run.delete()
    shutil.rmtree(paths.root, ignore_errors=True)
    return removed
