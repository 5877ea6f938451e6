"""Cleanup of ended runs (S12): by age, group, failed only; a dry run lists what would go.

Only runs the identity may change are touched (the owner: every run; a person: their own and
their agents'). A run whose workflow or node is still being released is skipped and named, so
nothing a reconcile still needs disappears; each removal goes through `delete_run`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone

from runs.models import Identity, IdentityKind, Run, RunState
from runs.selectors.usage import freed_bytes
from runs.services.runs import RunConflict, RunNotFound, delete_run
from runs.store import run_paths

MAX_DAYS = 36_500.0


@dataclass(frozen=True)
class Skipped:
    run: str
    reason: str


@dataclass(frozen=True)
class CleanupResult:
    """What a cleanup (or a deletion) removed, or would remove on a dry run.

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
    """Remove the ended runs that ended at least `older_than_days` ago (their records and files).

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
    chosen: list[str] = []
    skipped: list[Skipped] = []
    for run in runs.order_by("ended_at", "id"):
        if run.pending_cancel or run.pending_release:
            skipped.append(Skipped(run.id, "its workflow or node is still being released"))
        else:
            chosen.append(run.id)
    bytes_freed = freed_bytes([run_paths(r).root for r in chosen])
    if dry_run:
        present = [f"runs/{r}" for r in chosen if run_paths(r).root.exists()]
        return CleanupResult(True, chosen, present, bytes_freed, skipped)
    removed_runs: list[str] = []
    paths: list[str] = []
    for run_id in chosen:
        try:
            paths.extend(delete_run(run_id=run_id, identity=identity))
        except RunNotFound:
            continue  # removed meanwhile by someone else
        except RunConflict as exc:
            skipped.append(Skipped(run_id, str(exc)))
            continue
        removed_runs.append(run_id)
    return CleanupResult(False, removed_runs, paths, bytes_freed, skipped)
