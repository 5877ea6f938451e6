"""When the controller last reconciled: `follow`, `simrun status` and the pages read this."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db.models import Max
from django.utils import timezone

from runs.models import Heartbeat
from runs.states import RunState

LATE_INTERVALS = 5  # a controller this many poll intervals behind is taken as not running
LATE_MIN_S = 10.0  # ... and never sooner than this (a pass over many runs takes seconds)


def last_reconcile(*, source: str | None = None) -> datetime | None:
    """When a reconcile pass last ended (of `source` only, if given); None if none ever did."""
    rows = Heartbeat.objects.all() if source is None else Heartbeat.objects.filter(source=source)
    found: datetime | None = rows.aggregate(newest=Max("at"))["newest"]
    return found


def idle_pass_s() -> float:
    """How often a watcher that follows no run passes unasked: the idle poll, well within the
    time after which serve takes a silent watcher for dead (SIMRUN_LIVENESS_S)."""
    return float(min(settings.SIMRUN_IDLE_POLL_S, settings.SIMRUN_LIVENESS_S / 2))


def late_after_s(*, state: str | None = None) -> float:
    """Seconds without a reconcile after which the controller counts as stopped, for a run
    in `state`. A run still in submission is the worker's: the watcher, idle until the
    submission rings it, may rightly not pass for an idle poll meanwhile."""
    late = max(LATE_INTERVALS * settings.SIMRUN_POLL_S, LATE_MIN_S)
    return late + idle_pass_s() if state == RunState.SUBMITTING else late


def controller_idle_s(*, source: str | None = None) -> float | None:
    """Seconds since the last reconcile pass ended, by this server's clock; None if never."""
    last = last_reconcile(source=source)
    return None if last is None else max(0.0, (timezone.now() - last).total_seconds())
