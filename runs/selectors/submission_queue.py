"""The submissions waiting per identity, as an operator sees them in the admin."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Count, Min, Q, QuerySet

from runs.models import SubmissionQueue
from runs.states import RunState


def submission_queue(*, now: datetime) -> QuerySet[SubmissionQueue]:
    """Every identity with its runs waiting for a worker (`waiting`, the oldest's creation in
    `waiting_since`), being submitted (`in_progress`) and submitted in the last minute
    (`last_minute`); those with most waiting first."""
    submitting = Q(runs__state=RunState.SUBMITTING)
    unleased = Q(runs__submit_lease_until__isnull=True) | Q(runs__submit_lease_until__lt=now)
    return SubmissionQueue.objects.annotate(
        waiting=Count("runs", filter=submitting & unleased),
        in_progress=Count("runs", filter=submitting & Q(runs__submit_lease_until__gte=now)),
        last_minute=Count("runs", filter=Q(runs__created_at__gt=now - timedelta(minutes=1))),
        waiting_since=Min("runs__created_at", filter=submitting & unleased),
    ).order_by("-waiting", "-in_progress", "name")
