"""Celery beat's scheduler for simrun: Celery's own, plus a sign of life at every tick.

beat runs as a service of its own under `simrun serve`, which restarts it when it exits or
stops ticking; its tick is at most `beat_max_loop_interval` apart (a fraction of
`SIMRUN_LIVENESS_S`) even when no task is due.
"""

from __future__ import annotations

from typing import Any

from celery.beat import PersistentScheduler

from simrun_site.liveness import stamp


class StampingScheduler(PersistentScheduler):  # type: ignore[misc]
    """Celery's persistent scheduler that stamps `beat` after each tick."""

    def tick(self, *args: Any, **kwargs: Any) -> float:
        interval: float = super().tick(*args, **kwargs)
        stamp("beat")
        return interval
