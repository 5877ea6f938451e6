"""Following the logs of a task: new complete lines of every attempt, as plain text.

Each line is prefixed with `[<pod>#<attempt>] `. The stream polls every SIMRUN_EVENTS_POLL_S
and ends once the task (or the run) has ended and every log was read to its end, or after
SIMRUN_EVENTS_MAX_S. A log is read up to the backend's byte limit; what lies beyond is not
followed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from asgiref.sync import sync_to_async

from runs.api.connections import polled
from runs.models import Run, Task
from runs.selectors.logs import LogEntry, task_logs
from runs.states import TaskState


def _read(run_id: str, task_id: str) -> tuple[list[LogEntry], bool] | None:
    """The task's logs now and whether it is over (None when the run or task is gone)."""
    run = Run.objects.filter(pk=run_id).first()
    task = Task.objects.filter(run_id=run_id, task_id=task_id).first()
    if run is None or task is None:
        return None
    over = run.ended or task.state in TaskState.final()
    return task_logs(run, task), over


def new_lines(entry: LogEntry, offset: int, *, final: bool) -> tuple[str, int]:
    """The prefixed complete lines of `entry.text` after `offset`, and the new offset.

    A last line without its newline waits for the next poll, unless the attempt has ended.
    """
    text = entry.text[offset:]
    if not entry.ended and not final:
        cut = text.rfind("\n") + 1
        text = text[:cut]
    if not text:
        return "", offset
    prefix = f"[{entry.pod}#{entry.attempt}] "
    lines = text.splitlines()
    return "".join(f"{prefix}{line}\n" for line in lines), offset + len(text)


def _last_lines(text: str, lines: int) -> int:
    """The offset in `text` where its last `lines` complete lines begin."""
    complete = text[: text.rfind("\n") + 1]
    parts = complete.splitlines(keepends=True)
    return len(complete) - sum(len(p) for p in parts[-lines:]) if lines > 0 else len(complete)


async def follow_logs(
    run_id: str, task_id: str, *, tail: int | None, poll_s: float, max_s: float
) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_s
    offsets: dict[tuple[str, int], int] = {}
    errors: set[tuple[str, int]] = set()
    while True:
        found = await sync_to_async(polled(_read))(run_id, task_id)
        if found is None:
            yield f"[simrun] run {run_id} or its task {task_id} is gone\n".encode()
            return
        entries, over = found
        for entry in entries:
            key = (entry.pod, entry.attempt)
            if entry.error is not None and key not in errors:
                errors.add(key)
                yield f"[{entry.pod}#{entry.attempt}] log not available: {entry.error}\n".encode()
            if key not in offsets:
                offsets[key] = 0 if tail is None else _last_lines(entry.text, tail)
            chunk, offsets[key] = new_lines(entry, offsets[key], final=over)
            if chunk:
                yield chunk.encode()
        if over:
            return
        remaining = deadline - loop.time()
        if remaining <= 0:
            return
        await asyncio.sleep(min(poll_s, remaining))
