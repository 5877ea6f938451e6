"""Cleanup of ended runs (S12): by age, group, failed only; a dry run lists what would go.

Only runs the identity may change are touched (the owner: every run; a person: their own and
their agents'). The cleanup marks the runs deleting and answers: each run's `delete_run` task
(or the controller's next tick, should it be lost) releases what the run still holds and then
removes its files and record, as a deletion of one run does. Removing the files of hundreds of
runs takes minutes on a network file system, which no request should wait for.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone

from runs.models import Identity, IdentityKind, Run
from runs.selectors.usage import freed_bytes
from runs.services.runs import mark_deleting
from runs.states import RunState
from runs.store import run_paths

MAX_DAYS = 36_500.0


@dataclass(frozen=True)
class Skipped:
    run: str
    reason: str


@dataclass(frozen=True)
class CleanupResult:
    """What a cleanup is removing, or would remove on a dry run.

    Paths are relative to the run store; `bytes_freed` counts only files none of whose hard
    links stays elsewhere.
    """

    dry_run: bool
    runs: list[str]
    paths: list[str]
    bytes_freed: int
    skipped: list[Skipped] = field(default_factory=list)


def cleanup_runs(
    *,
    identity: Identity,
    older_than_days: float,
    group: str | None = None,
    failed_only: bool = False,
    dry_run: bool = False,
    now: datetime | None = None,
) -> CleanupResult:
    """Mark for deletion the ended runs that ended at least `older_than_days` ago (their
    records and files go once their `delete_run` task has run); a dry run only lists them.

    Raises ValueError for a negative or absurd age.
    """
    if not 0 <= older_than_days <= MAX_DAYS:
        raise ValueError(f"older_than_days: must be between 0 and {MAX_DAYS:g}")
    cutoff = (now or timezone.now()) - timedelta(days=older_than_days)
    runs = Run.objects.filter(state__in=RunState.ended(), ended_at__lte=cutoff)
    if failed_only:
        runs = runs.filter(state=RunState.FAILED)
    if group:
        runs = runs.filter(group=group)
    if identity.kind != IdentityKind.OWNER:
        runs = runs.filter(principal=identity.principal)
    skipped = [
        Skipped(r, "it is being deleted already")
        for r in runs.filter(deleting=True).order_by("ended_at", "id").values_list("id", flat=True)
    ]
    chosen = list(
        runs.filter(deleting=False).order_by("ended_at", "id").values_list("id", flat=True)
    )
    if dry_run:
        present = [f"runs/{r}" for r in chosen if os.path.lexists(run_paths(r).root)]
        freed = freed_bytes([run_paths(r).root for r in chosen])
        return CleanupResult(True, chosen, present, freed, skipped)
    marked = []
    for run_id in chosen:  # each a conditional update: a run deleted meanwhile is left alone
        if mark_deleting(run_id=run_id):
            marked.append(run_id)
        else:
            skipped.append(Skipped(run_id, "it was deleted or changed meanwhile"))
    paths = [f"runs/{r}" for r in marked if os.path.lexists(run_paths(r).root)]
    return CleanupResult(
        False, marked, paths, freed_bytes([run_paths(r).root for r in marked]), skipped
    )
