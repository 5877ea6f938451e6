"""What a run's event stream observes at each poll: its row, its tasks' states and the
counts of its ledgers (the API's `events`, runs/api/events.py)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from runs.models import Run, Task
from runs.selectors.progress import TaskProgress, run_progress
from runs.states import RunState
from runs.store import task_paths
from simrun_harness.ledger_reads import counts


@dataclass(frozen=True)
class Observation:
    """A run as one poll saw it."""

    run_id: str
    version: int
    state: str
    message: str
    tasks: dict[str, str]
    counts: dict[str, dict[str, int]]
    progress: float | None

    @property
    def ended(self) -> bool:
        return self.state in RunState.ended()

    @property
    def done(self) -> int:
        return sum(c["done"] for c in self.counts.values())


def observe(run_id: str) -> Observation | None:
    """The run's row, its tasks' states and ledger counts now; None once it is deleted."""
    row = Run.objects.filter(pk=run_id).values("version", "state", "message").first()
    if row is None:
        return None
    tasks = list(Task.objects.filter(run_id=run_id).order_by("position"))
    ledgers = {
        t.task_id: counts(task_paths(run_id, t.task_id)) if t.splittable else None for t in tasks
    }
    progress = [TaskProgress(t.task_id, t.state, ledgers[t.task_id], None, None) for t in tasks]
    ended = row["state"] in RunState.ended()
    return Observation(
        run_id=run_id,
        version=row["version"],
        state=row["state"],
        message=row["message"],
        tasks={t.task_id: t.state for t in tasks},
        counts={tid: asdict(c) for tid, c in ledgers.items() if c is not None},
        progress=None if ended else run_progress(progress),
    )
