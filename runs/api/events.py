"""The event stream of a run (S16): server-sent events of its state and progress.

The stream polls the run's row and ledgers every SIMRUN_EVENTS_POLL_S and ends after
SIMRUN_EVENTS_MAX_S (clients reconnect), or as soon as the run has ended.

Event ids are `<version>-<done>`: the run's version (bumped by every write of its row) and the
units done over its ledgers (which only grow). Both only increase, so ids are monotonic per
run. A `state` event carries the whole state (run, tasks, counts) whenever the version grew; a
`progress` event the counts whenever only units were done. Each event is a complete
observation, so a client resuming with `Last-Event-ID` gets exactly the observations newer
than its id: nothing it has seen again, and the latest state at once. The row keeps no
history, so states that came and went between two polls (or while a client was away) are
folded into the next observation; the final state is always delivered, followed by `end`.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass
from typing import Any

from asgiref.sync import sync_to_async

from runs.api.connections import polled
from runs.models import Run, Task
from runs.selectors.progress import TaskProgress, run_progress
from runs.states import RunState
from runs.store import task_paths
from simrun_harness.ledger_reads import counts

KEEPALIVE_S = 15.0
EVENT_ID = r"^([0-9]{1,18})-([0-9]{1,18})$"
_ID = re.compile(EVENT_ID)


@dataclass(frozen=True, order=True)
class EventId:
    version: int
    done: int

    def __str__(self) -> str:
        return f"{self.version}-{self.done}"

    @classmethod
    def parse(cls, text: str) -> EventId:
        """An id as sent; ValueError for anything else."""
        match = _ID.fullmatch(text)
        if match is None:
            raise ValueError(f"Last-Event-ID {text!r} is not an id of this stream (<n>-<n>)")
        return cls(int(match.group(1)), int(match.group(2)))


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


@dataclass(frozen=True)
class Event:
    kind: str
    data: dict[str, Any]
    id: EventId | None = None

    def encode(self) -> bytes:
        lines = [f"event: {self.kind}"]
        if self.id is not None:
            lines.append(f"id: {self.id}")
        lines.append(f"data: {json.dumps(self.data, separators=(',', ':'))}")
        return ("\n".join(lines) + "\n\n").encode()


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


def next_events(seen: EventId | None, now: Observation) -> list[Event]:
    """What a client that has seen `seen` is told of the observation `now` (maybe nothing)."""
    done = max(now.done, seen.done if seen else 0)
    current = EventId(now.version, done)
    if seen is None or now.version > seen.version:
        data = {
            "run": now.run_id,
            "state": now.state,
            "message": now.message,
            "version": now.version,
            "tasks": now.tasks,
            "counts": now.counts,
            "progress": now.progress,
        }
        return [Event("state", data, current)]
    if done > seen.done and now.version == seen.version:
        data = {"run": now.run_id, "counts": now.counts, "progress": now.progress}
        return [Event("progress", data, current)]
    return []


async def run_events(
    run_id: str, *, after: EventId | None, poll_s: float, max_s: float
) -> AsyncIterator[bytes]:
    """The stream: a reconnection delay, then events until the run ends or `max_s` passes."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_s
    quiet_since = loop.time()
    seen = after
    yield f"retry: {max(100, int(poll_s * 1000))}\n\n".encode()
    while True:
        now = await sync_to_async(polled(observe))(run_id)
        if now is None:
            yield Event("deleted", {"run": run_id}).encode()
            return
        for event in next_events(seen, now):
            yield event.encode()
            seen = event.id
            quiet_since = loop.time()
        if now.ended:
            yield Event("end", {"run": run_id, "state": now.state}).encode()
            return
        remaining = deadline - loop.time()
        if remaining <= 0:
            return
        if loop.time() - quiet_since >= KEEPALIVE_S:
            yield b": keep-alive\n\n"
            quiet_since = loop.time()
        await asyncio.sleep(min(poll_s, remaining))
