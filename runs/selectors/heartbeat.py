"""When the controller last reconciled: `follow`, `simrun status` and the pages read this."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db.models import Max
from django.utils import timezone

from runs.models import Heartbeat

LATE_INTERVALS = 5  # a controller this many poll intervals behind is taken as not running
LATE_MIN_S = 10.0  # ... and never sooner than this (a pass over many runs takes seconds)


def last_reconcile(*, source: str | None = None) -> datetime | None:
    """When a reconcile pass last ended (of `source` only, if given); None if none ever did."""
    rows = Heartbeat.objects.all() if source is None else Heartbeat.objects.filter(source=source)
    found: datetime | None = rows.aggregate(newest=Max("at"))["newest"]
    return found


def late_after_s() -> float:
    """Seconds without a reconcile after which the controller counts as stopped."""
    return max(LATE_INTERVALS * settings.SIMRUN_POLL_S, LATE_MIN_S)


def controller_idle_s(*, source: str | None = None) -> float | None:
    """Seconds since the last reconcile pass ended, by this server's clock; None if never."""
    last = last_reconcile(source=source)
    return None if last is None else max(0.0, (timezone.now() - last).total_seconds())
