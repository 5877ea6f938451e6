"""The controller's heartbeat, written at the end of every reconcile pass."""

from __future__ import annotations

from datetime import datetime

from django.db import IntegrityError, transaction

from runs.models import Heartbeat


def record_heartbeat(*, source: str, at: datetime) -> None:
    """Note that `source` finished a reconcile pass at `at` (one UPDATE once the row exists)."""
    if Heartbeat.objects.filter(source=source).update(at=at):
        return
    try:
        with transaction.atomic():
            Heartbeat.objects.create(source=source, at=at)
    except IntegrityError:  # two passes of the same source made the row at once: either will do
        Heartbeat.objects.filter(source=source).update(at=at)
