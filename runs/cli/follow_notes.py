"""What following a run says besides its progress: whether anything advances it, and times.

The controller records a heartbeat at the end of every reconcile pass; `show` reports how long
ago that was (`controller_idle_s`, by the server's clock) and after how long it counts as
stopped (`controller_late_s`). Following says once when the controller stops (with the command
that starts it) and once when it is back; the run is followed throughout.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from runs.disk_space import size_text
from runs.states import RunState

ENDED = frozenset(RunState.ended())
START_COMMAND = "simrun serve"


@dataclass
class DiskWatch:
    """Notes whether the service's disk was last seen full (`disk` of a run's detail)."""

    full: str | None = None  # the path of the full disk

    def note(self, run: dict[str, Any]) -> str | None:
        """The line to print about the disk after this poll, if that changed."""
        disk = run.get("disk") or None
        path = str(disk["path"]) if disk else None
        if path == self.full:
            return None
        self.full = path
        if disk is None:
            return f"there is room on the disk again; following run {run['id']}"
        needed = disk["needed_bytes"]
        return (
            f"warning: the disk of {path} is full: {size_text(disk['free_bytes'])} free, "
            f"simrun needs {size_text(needed)} free; the run waits until space is freed there "
            f"(still following run {run['id']})"
        )


@dataclass
class ControllerWatch:
    """Notes whether the controller of a followed run was last seen late."""

    late: bool = False
    quiet_until: float = 0.0  # monotonic: a disk just freed gives the controller its time

    def note(self, run: dict[str, Any]) -> str | None:
        """The line to print about the controller after this poll, if its liveness changed.
        A full disk explains a controller that cannot record its passes: not said then, nor
        before the controller had its usual time to pass again once space was freed."""
        limit = run.get("controller_late_s")
        if limit is None or run["state"] in ENDED:
            return None  # a server that does not say, or nothing left to advance
        if run.get("disk"):
            self.quiet_until = time.monotonic() + float(limit)
            return None
        if time.monotonic() < self.quiet_until and not self.late:
            return None
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
    """The polls of a run, saying when its service's disk fills and has room again, and when
    its controller stops and comes back."""
    disk, controller = DiskWatch(), ControllerWatch()
    for run in runs:
        for line in (disk.note(run), controller.note(run)):
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
