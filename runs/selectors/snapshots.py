"""The snapshots of sources the store holds, newest first, and one by its digest."""

from __future__ import annotations

from django.db.models import QuerySet

from runs.models import Snapshot


def newest_snapshots(limit: int) -> QuerySet[Snapshot]:
    """At most `limit` snapshots, newest first, with who made each."""
    return Snapshot.objects.select_related("created_by").order_by("-created_at", "-id")[:limit]


def snapshot_of(digest: str) -> Snapshot | None:
    return Snapshot.objects.select_related("created_by").filter(digest=digest).first()
