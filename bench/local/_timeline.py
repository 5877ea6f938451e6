"""When the steps of a run happened, read back from the files the run left in the store.

Every time here is a Unix timestamp of this machine's clock, which the benchmark, the
services and the pods share: an attempt's creation (`attempt.json`), its pod process's start
(`child.json`: the process's start time), its end (`exit.json`), the `unit_done` lines of the
progress file and the merge marker's modification time.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _stack import wait_for

from runs.models import Identity, Run
from runs.states import RunState
from runs.store import store


@dataclass(frozen=True)
class PodTimes:
    """One attempt of a pod: created by the backend, its process started (a standby's: when
    it took the attempt), ended."""

    created: float
    started: float | None
    ended: float | None
    adopted: bool = False  # handed to a standby pod process started ahead


def process_clock_offset() -> float:
    """How far psutil's process start times are off this clock (boot time is whole seconds).

    Measured on a short child: its start time less the time just before it was forked; the
    fork itself (a millisecond or two) stays in the figure.
    """
    import subprocess

    import psutil

    offsets = []
    for _ in range(5):
        before = time.time()
        child = subprocess.Popen(["sleep", "0.05"])
        offsets.append(psutil.Process(child.pid).create_time() - before)
        child.wait()
    return sorted(offsets)[2]


_OFFSET: list[float] = []


def pod_times(run_id: str, pod: str, attempt: int = 0) -> PodTimes | None:
    """The times of one attempt; the process start corrected by `process_clock_offset`."""
    if not _OFFSET:
        _OFFSET.append(process_clock_offset())
    folder = store().run(run_id).pods / pod / str(attempt)
    spec = _json(folder / "attempt.json")
    if spec is None:
        return None
    child = _json(folder / "child.json")
    ended = _json(folder / "exit.json")
    started = None
    if child is not None:  # a standby started ahead: when it took the attempt
        started = child.get("adopted") or float(child["started"]) - _OFFSET[0]
    return PodTimes(
        created=float(spec["created"]),
        started=started,
        ended=None if ended is None else float(ended["ended"]),
        adopted=child is not None and "adopted" in child,
    )


def unit_done_times(run_id: str, task: str) -> list[float]:
    """The times of the task's `unit_done` lines, in file order."""
    path = store().run(run_id).task(task).progress
    times = []
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line still being written
        if record.get("event") == "unit_done":
            times.append(_timestamp(record["time"]))
    return times


def log_time(run_id: str, pod: str, text: str, attempt: int = 0) -> float | None:
    """When the pod's log first has a line containing `text` (the harness stamps every line
    with this machine's local time, to the millisecond)."""
    log = store().run(run_id).pods / pod / str(attempt) / "log"
    try:
        lines = log.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return None
    for line in lines:
        if text in line:
            stamp, _, millis = line[:23].partition(",")
            return time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S")) + int(millis) / 1000
    return None


def merge_marker_time(run_id: str, task: str) -> float | None:
    marker = store().run(run_id).task(task).out / ".simrun-merged"
    return marker.stat().st_mtime if marker.exists() else None


def submit(identity: Identity, task: dict[str, object], name: str) -> tuple[Run, float, float]:
    """Submit a one-task workflow as the CLI does; the run, and when the call began and ended."""
    from runs.backends import backend
    from runs.services.submission import create_run

    nodes = backend().nodes()
    called = time.time()
    run, _ = create_run(  # reuse off: the benchmarks submit one workflow again and again
        identity=identity,
        workflow={"name": name, "tasks": [task]},
        sources=[],
        nodes=nodes,
        reuse=False,
    )
    return run, called, time.time()


def wait_for_end(run_id: str, timeout: float = 600, every: float = 0.25) -> tuple[Run, float]:
    """The run once it ended, and when this process saw that (polling every `every` s; the
    run's `ended_at`, not this time, ends the measured wall time)."""

    def ended() -> Run | None:
        run = Run.objects.get(pk=run_id)
        return run if run.state in RunState.ended() else None

    run = wait_for(ended, timeout=timeout, what=f"run {run_id} to end", every=every)
    return run, time.time()


def _json(path: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None
    return data


def _timestamp(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso).timestamp()
