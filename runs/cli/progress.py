"""A run's progress while it is followed: live bars in a terminal, plain lines elsewhere.

A pipe, a log file, CI or an agent reading the output get no redrawn bars (rich draws them
only at the end there); they get one line per task when its state changes, and while it runs
at most every `PLAIN_EVERY_S` when its count moved.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from runs.states import RunState

ENDED = frozenset(RunState.ended())
PLAIN_EVERY_S = 5.0


class Shows(Protocol):
    def show(self, run_id: str) -> dict[str, Any]: ...


def polls(
    client: Shows,
    run_id: str,
    *,
    interval: float,
    check: Callable[[], None] | None,
    say: Callable[[str], None] | None = None,
) -> Iterator[dict[str, Any]]:
    """The run as `show` gives it, every `interval`, until (and including) its end.

    A service that does not answer is asked again at every interval; `say` is told once
    when it stops answering and once when it answers again."""
    from runs.cli.client import Unreachable

    down = False
    while True:
        try:
            run = client.show(run_id)
        except Unreachable as exc:
            if not down and say is not None:
                say(unreachable_line(exc, run_id))
            down = True
            time.sleep(interval)
            continue
        if down and say is not None:
            say(f"simrun answers again; following run {run_id}")
        down = False
        yield run
        if run["state"] in ENDED:
            return
        if check is not None:
            check()
        time.sleep(interval)


def unreachable_line(exc: Exception, run_id: str) -> str:
    return (
        f"warning: {exc}; is it running? "
        f"start it with `simrun serve` (still following run {run_id})"
    )


@dataclass(frozen=True)
class Said:
    """What the last plain line of a task said, and when."""

    state: str
    done: int
    at: float


def line_due(said: Said | None, *, state: str, done: int, now: float) -> bool:
    """Whether a task's plain line is printed now: its first, a new state, or a count that
    moved at least `PLAIN_EVERY_S` after the last line."""
    if said is None or state != said.state:
        return True
    return done != said.done and now - said.at >= PLAIN_EVERY_S


def plain_line(task: dict[str, Any], seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    count = f"{task['done']}/{task['total']}"
    return f"{task['id']:>16}  {count:>11}  {task['state']:10} {minutes}:{secs:02d}"


def follow_plain(runs: Iterator[dict[str, Any]], write: Callable[[str], None]) -> dict[str, Any]:
    """Plain lines for the polls of a run; the last poll."""
    started = time.monotonic()
    said: dict[str, Said] = {}
    run: dict[str, Any] = {}
    for run in runs:
        now = time.monotonic()
        for task in run["tasks"]:
            if line_due(said.get(task["id"]), state=task["state"], done=task["done"], now=now):
                write(plain_line(task, now - started))
                said[task["id"]] = Said(task["state"], task["done"], now)
    return run


def follow_bars(runs: Iterator[dict[str, Any]], console: Any) -> dict[str, Any]:
    """Live rich bars for the polls of a run; the last poll."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[state]}"),
        TimeElapsedColumn(),
    )
    bars: dict[str, Any] = {}
    run: dict[str, Any] = {}
    with Progress(*columns, console=console, transient=False) as progress:
        for run in runs:
            for task in run["tasks"]:
                if task["id"] not in bars:
                    bars[task["id"]] = progress.add_task(
                        f"{task['id']:>16}", total=task["total"], state=task["state"]
                    )
                progress.update(
                    bars[task["id"]],
                    total=task["total"],
                    completed=task["done"],
                    state=task["state"],
                )
    return run
