"""Following the logs of a task: new complete lines of every attempt, as plain text.

Each line is prefixed with `[<pod>#<attempt>] `. The stream polls every SIMRUN_EVENTS_POLL_S
and ends once the task (or the run) has ended and every log was read to its end, or after
SIMRUN_EVENTS_MAX_S. A log is read up to the backend's byte limit; what lies beyond is not
followed. Like a run's events it is served from the event loop (`runs.edge.streams`), counts
toward its identity's open streams and ends once its token is revoked.
"""

from __future__ import annotations

from django.conf import settings
from django.http.response import HttpResponseBase
from rest_framework.request import Request

from runs.api.events import api_stream
from runs.edge.streams import Recent
from runs.selectors.logs import LogEntry, followed_logs


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


logs: Recent[tuple[str, str], tuple[list[LogEntry], bool] | None] = Recent(
    lambda key: followed_logs(*key)
)


class LogFollow:
    """The watch of a task's logs: the lines not sent yet, at each poll, until it is over."""

    def __init__(self, run_id: str, task_id: str, *, tail: int | None, poll_s: float) -> None:
        self.run_id, self.task_id, self.tail, self.poll_s = run_id, task_id, tail, poll_s
        self.offsets: dict[tuple[str, int], int] = {}
        self.errors: set[tuple[str, int]] = set()
        self.ended = False

    def poll(self) -> list[bytes]:
        found = logs.get((self.run_id, self.task_id), poll_s=self.poll_s)
        if found is None:
            self.ended = True
            return [f"[simrun] run {self.run_id} or its task {self.task_id} is gone\n".encode()]
        entries, over = found
        sent = []
        for entry in entries:
            key = (entry.pod, entry.attempt)
            if entry.error is not None and key not in self.errors:
                self.errors.add(key)
                sent.append(f"[{entry.pod}#{entry.attempt}] log not available: {entry.error}\n")
            if key not in self.offsets:
                self.offsets[key] = 0 if self.tail is None else _last_lines(entry.text, self.tail)
            chunk, self.offsets[key] = new_lines(entry, self.offsets[key], final=over)
            if chunk:
                sent.append(chunk)
        self.ended = over
        return [text.encode() for text in sent]


def log_stream(
    request: Request, run_id: str, task_id: str, *, tail: int | None
) -> HttpResponseBase:
    """The response of `GET /api/runs/<id>/logs/?task=&follow=1`."""
    poll_s = float(settings.SIMRUN_EVENTS_POLL_S)
    return api_stream(
        request,
        LogFollow(run_id, task_id, tail=tail, poll_s=poll_s),
        content_type="text/plain; charset=utf-8",
        revoked=b"[simrun] the token was revoked\n",
        poll_s=poll_s,
    )
