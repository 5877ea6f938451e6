"""A pod's log tail that follows while the pod lives (its stream is in `runs.pages.live`),
and downloads of a run's outputs."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render

from runs.edge.responses import attachment_response, chunks_response
from runs.pages.access import HtmxHttpRequest, with_identity
from runs.selectors.logs import LogEntry, task_logs
from runs.selectors.outputs import OutputNotFound, output_file
from runs.selectors.runs_list import get_run
from runs.services.crates import RunNotExportable, exported_zip
from runs.services.runs import RunNotFound

if TYPE_CHECKING:
    from runs.models import Identity, Run, Task

TAIL_LINES = 200
TEMPLATE = "runs/log.html"


@dataclass(frozen=True)
class LogTail:
    """The last lines of a pod's newest attempt, and whether more may come."""

    run_id: str
    task_id: str
    pod: str
    entry: LogEntry | None
    attempts: int
    follow: bool

    @property
    def key(self) -> str:
        """A digest of what the tail shows: the page's stream sends it again when it changes."""
        return hashlib.sha1(repr((self.follow, self.attempts, self.entry)).encode()).hexdigest()[
            :16
        ]


def run_or_404(run_id: str) -> Run:
    try:
        return get_run(run_id)
    except RunNotFound as exc:
        raise Http404(str(exc)) from exc


def task_or_404(run: Run, task_id: str) -> Task:
    task = next((t for t in run.tasks.all() if t.task_id == task_id), None)
    if task is None:
        raise Http404(f"run {run.id} has no task {task_id!r}")
    return task


def pod_or_404(task: Task, pod: str) -> None:
    if pod != task.task_id and not pod.startswith(f"{task.task_id}-"):
        raise Http404(f"{pod!r} is no pod of task {task.task_id!r}")


def log_tail(run: Run, task: Task, pod: str) -> LogTail:
    """The tail of the newest attempt of `pod`; it follows until that attempt has ended."""
    entries = task_logs(run, task, tail_lines=TAIL_LINES, pod=pod)
    entry = max(entries, key=lambda e: e.attempt, default=None)
    ended = entry is not None and (entry.ended or entry.kept)
    follow = not run.ended and not ended
    return LogTail(run.id, task.task_id, pod, entry, len(entries), follow)


@with_identity
def log(
    request: HtmxHttpRequest, identity: Identity, run_id: str, task_id: str, pod: str
) -> HttpResponse:
    """A pod's log page; the tail or the panel when htmx asks (the run page opens it)."""
    run = run_or_404(run_id)
    task = task_or_404(run, task_id)
    pod_or_404(task, pod)
    context = {"run": run, "task": task, "tail": log_tail(run, task, pod)}
    parts = {"log-tail": "tail", "log-panel": "panel"}
    if request.htmx and request.htmx.target in parts:
        return render(request, f"{TEMPLATE}#{parts[request.htmx.target]}", context)
    return render(request, TEMPLATE, context)


@with_identity
def download(
    request: HtmxHttpRequest, identity: Identity, run_id: str, path: str
) -> StreamingHttpResponse:
    """An output file of the run, streamed; `path` is relative to the run's directory."""
    run = run_or_404(run_id)
    try:
        opened = output_file(run.id, f"runs/{run.id}/{path}")
    except OutputNotFound as exc:
        raise Http404(str(exc)) from exc
    return attachment_response(request, opened)


@with_identity
def crate(request: HtmxHttpRequest, identity: Identity, run_id: str) -> HttpResponseBase:
    """The ended run as a Workflow Run RO-Crate (a zip made while it is sent); 409 while it
    is live."""
    run = run_or_404(run_id)
    try:
        chunks = exported_zip(run_id=run.id)
    except RunNotExportable as exc:
        return HttpResponse(str(exc), status=409, content_type="text/plain; charset=utf-8")
    return chunks_response(
        request,
        chunks,
        content_type="application/zip",
        filename=f"simrun-{run.id}.crate.zip",
        unbuffered=False,
    )
