"""Runs whose reconcile keeps raising are retried later and later, and logged once a step.

A record the controller cannot derive (a bug, a corrupt row, a store it cannot read) would
otherwise raise at every tick: a traceback every poll interval, and the work done again for
nothing. Each failure doubles the wait before the next try, from the poll interval up to
`MAX_S`; each step logs one line (the first with its traceback); the first success logs that
the run reconciles again. Like `seen.py`, this is a per-process note, not state: a restarted
process tries every run at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger("runs.controller.tick")

MAX_S = 60.0


@dataclass
class Step:
    failures: int
    retry_at: float


@dataclass
class Backoff:
    """The failing runs of this process and when each is tried again."""

    clock: Callable[[], float] = time.monotonic
    steps: dict[str, Step] = field(default_factory=dict)

    def due(self, run_id: str) -> bool:
        """Whether the run may be reconciled now (it is not waiting out a failure)."""
        step = self.steps.get(run_id)
        return step is None or self.clock() >= step.retry_at

    def failed(self, run_id: str, exc: BaseException, *, first_wait_s: float) -> float:
        """Note a failure; log one line; the seconds until the run is tried again."""
        step = self.steps.get(run_id)
        failures = 1 if step is None else step.failures + 1
        wait = min(first_wait_s * 2 ** (failures - 1), MAX_S)
        self.steps[run_id] = Step(failures, self.clock() + wait)
        log.error(
            "reconciling run %s failed (%d in a row: %s: %s); tried again in %.0fs",
            run_id,
            failures,
            type(exc).__name__,
            exc,
            wait,
            exc_info=exc if failures == 1 else None,
        )
        return wait

    def succeeded(self, run_id: str) -> None:
        step = self.steps.pop(run_id, None)
        if step is not None:
            log.info("run %s reconciles again after %d failures", run_id, step.failures)

    def keep_only(self, run_ids: set[str]) -> None:
        for gone in set(self.steps) - run_ids:
            del self.steps[gone]
