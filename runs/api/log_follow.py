"""Following the logs of a task: new complete lines of every attempt, as plain text.

Each line is prefixed with `[<pod>#<attempt>] `. The stream polls every SIMRUN_EVENTS_POLL_S
and ends once the task (or the run) has ended and every log was read to its end, or after
SIMRUN_EVENTS_MAX_S. A poll reads what an answer of the task's logs holds
(`runs.selectors.logs`): at most SIMRUN_LOG_ANSWER_MAX_BYTES in all, each log's newest bytes;
bytes of a log that fell out of it before they were sent are left out, and a line
`[simrun] <pod>#<attempt>: <n> bytes left out (...)` says so (bytes are counted in the text
as read: where a log is not UTF-8, a replaced byte counts as its replacement's). A log is
read up to the backend's byte limit; what lies beyond is not followed. Like a run's events it
is served from the event loop (`runs.edge.streams`), counts toward its identity's open
streams and ends once its token is revoked.
"""

from __future__ import annotations

from django.conf import settings
from django.http.response import HttpResponseBase
from rest_framework.request import Request

from runs.api.events import api_stream
from runs.edge.streams import Recent
from runs.selectors.logs import LOG_LIMIT_BYTES, LogEntry, followed_logs

WHY_LEFT_OUT = {
    "answer": "the logs of a task are read at most SIMRUN_LOG_ANSWER_MAX_BYTES at a time",
    "log": f"a log is read at most {LOG_LIMIT_BYTES} bytes",
}


def new_lines(entry: LogEntry, sent: int, *, final: bool) -> tuple[str, int]:
    """The prefixed complete lines of `entry` after byte `sent` of its log, and the byte
    they end at; a note first when bytes between `sent` and its text were left out.

    A last line without its newline waits for the next poll, unless the attempt has ended.
    """
    prefix = f"[{entry.pod}#{entry.attempt}] "
    note = ""
    if sent < entry.start:
        why = WHY_LEFT_OUT.get(entry.cut or "", "")
        note = f"[simrun] {entry.pod}#{entry.attempt}: {entry.start - sent} bytes left out"
        note += f" ({why})\n" if why else "\n"
        sent = entry.start
    data = entry.text.encode()[sent - entry.start :]
    if not entry.ended and not final:
        data = data[: data.rfind(b"\n") + 1]
    if not data:
        return note, sent
    lines = data.decode("utf-8", errors="replace").splitlines()
    return note + "".join(f"{prefix}{line}\n" for line in lines), sent + len(data)


def _last_lines(entry: LogEntry, lines: int) -> int:
    """The byte of the log where the last `lines` complete lines of `entry` begin."""
    data = entry.text.encode()
    complete = data[: data.rfind(b"\n") + 1]
    parts = complete.splitlines(keepends=True)
    kept = sum(len(p) for p in parts[-lines:]) if lines > 0 else 0
    return entry.start + len(complete) - kept


logs: Recent[tuple[str, str], tuple[list[LogEntry], bool] | None] = Recent(
    lambda key: followed_logs(*key)
)


class LogFollow:
    """The watch of a task's logs: the lines not sent yet, at each poll, until it is over."""

    def __init__(self, run_id: str, task_id: str, *, tail: int | None, poll_s: float) -> None:
        self.run_id, self.task_id, self.tail, self.poll_s = run_id, task_id, tail, poll_s
        self.sent: dict[tuple[str, int], int] = {}
        """The byte of each log up to which its lines were sent (or left out)."""
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
            if key not in self.sent:
                self.sent[key] = 0 if self.tail is None else _last_lines(entry, self.tail)
            chunk, self.sent[key] = new_lines(entry, self.sent[key], final=over)
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
