"""How much of a run was reused: "reused N of M units", and from which runs."""

from __future__ import annotations

from dataclasses import dataclass, field

from runs.models import Run
from runs.reuse_plans import count_reused


@dataclass(frozen=True)
class ReuseView:
    """Units reused of the run's units (a split task's units; one per unsplit task), the
    runs they came from (run → how many), and whether reuse was on and from which run first."""

    reused: int
    units: int
    sources: dict[str, int] = field(default_factory=dict)
    enabled: bool = True
    resume_from: str = ""

    @property
    def text(self) -> str:
        return f"reused {self.reused} of {self.units} units"


def run_reuse(run: Run) -> ReuseView:
    """What `run` reused, from its task rows (loaded with the run when prefetched)."""
    reused = 0
    units = 0
    sources: dict[str, int] = {}
    for task in run.tasks.all():
        units += task.units_total if task.splittable and task.units_total is not None else 1
        for source, units_of in (task.reused or {}).items():
            count = count_reused(units_of)
            reused += count
            sources[source] = sources.get(source, 0) + count
    return ReuseView(reused, units, sources, run.reuse, run.resume_from)
