"""What following a run says besides its progress: whether anything advances it, and times.

The controller records a heartbeat at the end of every reconcile pass; `show` reports how long
ago that was (`controller_idle_s`, by the server's clock) and after how long it counts as
stopped (`controller_late_s`). Following says once when the controller stops (with the command
that starts it) and once when it is back; the run is followed throughout.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from runs.states import RunState

ENDED = frozenset(RunState.ended())
START_COMMAND = "simrun serve"


@dataclass
class ControllerWatch:
    """Notes whether the controller of a followed run was last seen late."""

    late: bool = False

    def note(self, run: dict[str, Any]) -> str | None:
        """The line to print about the controller after this poll, if its liveness changed."""
        limit = run.get("controller_late_s")
        if limit is None or run["state"] in ENDED:
            return None  # a server that does not say, or nothing left to advance
        idle = run.get("controller_idle_s")
        late = idle is None or idle > limit
        if late == self.late:
            return None
        self.late = late
        if not late:
            return f"the controller is reconciling again; following run {run['id']}"
        since = "has never reconciled" if idle is None else f"has not reconciled for {idle:.0f}s"
        return (
            f"warning: simrun's controller {since}: the services are not running; "
            f"start them with `{START_COMMAND}` (still following run {run['id']})"
        )


def watched(runs: Iterator[dict[str, Any]], say: Callable[[str], None]) -> Iterator[dict[str, Any]]:
    """The polls of a run, saying when its controller stops and comes back."""
    watch = ControllerWatch()
    for run in runs:
        line = watch.note(run)
        if line is not None:
            say(line)
        yield run


def moment(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def seconds_between(start: str | None, end: str | None) -> float | None:
    """Seconds from one ISO moment to another; None if either is missing."""
    begun, ended = moment(start), moment(end)
    return None if begun is None or ended is None else (ended - begun).total_seconds()


def run_seconds(run: dict[str, Any]) -> float | None:
    """A run's time from its submission to its end, from its record: what both the line
    that ends following and the demo's summary print, so the two always agree."""
    return seconds_between(run.get("created_at"), run.get("ended_at"))


def task_times(task: dict[str, Any]) -> str:
    """`show`'s times of a task: when it started and ended (local time) and how long it took."""

    def clock(text: str | None) -> str:
        found = moment(text)
        return found.astimezone().strftime("%H:%M:%S") if found else "-"

    took = seconds_between(task.get("started_at"), task.get("ended_at"))
    length = "" if took is None else f"  took {took:.1f}s"
    return f"started {clock(task.get('started_at'))}  ended {clock(task.get('ended_at'))}{length}"
