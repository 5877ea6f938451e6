"""What a `simrun serve` that died left running, found from its records and ended.

Every process serve starts is on a record in the data directory, with its pid and start time
(so a pid the system gave to another process since is never taken for it):

- `services.json`: serve itself and its services (web, worker, beat, watcher);
- `processes/<pid>.json`: each pod supervisor its services started, and its pod (written by
  the supervisor, `cluster/local/serve_tie.py`), with the serve it belongs to.

Services die with serve (a parent-death signal) and pods are stopped by their supervisors
when serve ends, so after a `kill -9` of serve little is left: a pod that ignores SIGTERM
while its grace runs, a pod whose supervisor was killed. A new `serve` and `simrun stop` end
those (SIGTERM to each process group, SIGKILL after a short grace) and say what they ended.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from runs.cli.service_state import ServeRecord, read_state

RECORDS = "processes"
END_GRACE_S = 10.0  # what was left gets this long after SIGTERM before SIGKILL


@dataclass(frozen=True)
class Leftover:
    """A live process of the installation that no running serve looks after."""

    pid: int
    started: float
    group: int | None  # its own process group, ended whole; None: the process alone
    what: str  # "the pod hold of run R", "the web process"
    role: str = "service"  # service, pod, supervisor: supervisors are ended last

    def process(self) -> psutil.Process | None:
        try:
            found = psutil.Process(self.pid)
            same = abs(found.create_time() - self.started) < 0.01
            return found if same and found.status() != psutil.STATUS_ZOMBIE else None
        except psutil.Error:
            return None

    def describe(self) -> str:
        return f"{self.what} (pid {self.pid})"


def records_dir(data_dir: Path) -> Path:
    return data_dir / RECORDS


def serve_key(record: ServeRecord) -> str:
    """How serve's processes name it in their records (`SIMRUN_SERVE`)."""
    return f"{record.pid}:{record.started!r}"


def leftovers(data_dir: Path, *, running: ServeRecord | None) -> list[Leftover]:
    """The live processes of this installation not looked after by `running` (the serve
    that runs here now, if one does): an earlier serve's services and pods."""
    found: list[Leftover] = []
    earlier = read_state(data_dir)
    if earlier is not None and (running is None or earlier.pid != running.pid):
        for service in earlier.services:
            if service.pid and service.started:
                what = f"the {service.name} process"
                found.append(Leftover(service.pid, service.started, service.pid, what))
    mine = serve_key(running) if running is not None else None
    for path in sorted(records_dir(data_dir).glob("*.json")):
        data = _read(path)
        if data is None or data.get("serve") == mine:
            continue
        entries = [_entry(p, str(data.get("what", "a pod"))) for p in data.get("processes", [])]
        alive = [e for e in entries if e.process() is not None]
        if alive:
            found.extend(alive)
        else:  # everything on it ended: the record is done with
            path.unlink(missing_ok=True)
    return [f for f in found if f.process() is not None]


def _entry(process: dict[str, Any], what: str) -> Leftover:
    role = str(process.get("role", "pod"))
    group = process.get("group")
    return Leftover(
        int(process["pid"]),
        float(process["started"]),
        int(group) if group is not None else None,
        f"the {what}" if role == "pod" else f"the supervisor of {what}",
        role,
    )


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def end(found: list[Leftover], *, grace_s: float = END_GRACE_S) -> list[Leftover]:
    """End services and pods (SIGTERM to each one's group, SIGKILL after `grace_s`), then the
    supervisors still there (a supervisor whose pod ended records its exit and ends by
    itself); the ones that were running when asked."""
    first = _end_batch([f for f in found if f.role != "supervisor"], grace_s)
    rest = _end_batch([f for f in found if f.role == "supervisor"], grace_s)
    return first + rest


def _end_batch(found: list[Leftover], grace_s: float) -> list[Leftover]:
    ended = [f for f in found if f.process() is not None]
    for leftover in ended:
        _signal(leftover, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while any(e.process() is not None for e in ended) and time.monotonic() < deadline:
        time.sleep(0.1)
    for leftover in ended:
        _signal(leftover, signal.SIGKILL)
        if leftover.group is not None:  # the group's other processes (a pod's pool)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(leftover.group, signal.SIGKILL)
    return ended


def _signal(leftover: Leftover, signum: int) -> None:
    process = leftover.process()
    if process is None:
        return
    if leftover.group is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(leftover.group, signum)
    with contextlib.suppress(psutil.Error):
        process.send_signal(signum)


def end_leftovers(
    data_dir: Path, *, running: ServeRecord | None, grace_s: float = END_GRACE_S
) -> str | None:
    """End what earlier serves left; the line that says what was ended, None if nothing."""
    ended = end(leftovers(data_dir, running=running), grace_s=grace_s)
    for path in records_dir(data_dir).glob("*.json"):
        data = _read(path)
        if data is not None and (running is None or data.get("serve") != serve_key(running)):
            path.unlink(missing_ok=True)
    if not ended:
        return None
    return "ended what an earlier simrun serve left running: " + ", ".join(
        e.describe() for e in ended
    )
