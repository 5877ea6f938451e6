"""The pages' live parts as server-sent events, which htmx's SSE extension swaps in place.

- `/runs/<id>/events/?task=&seen=`: a `live` event with the run page's live partial whenever
  it differs from what the page shows (`seen`, then `Last-Event-ID`: a digest of the HTML).
- `/runs/<id>/tasks/<task>/logs/<pod>/events/?seen=`: a `tail` event with a pod's log tail
  whenever it differs from the one shown (`LogTail.key`), until the tail stops following.
- `/events/?runs=<id>:<key>,…&after=<position>&q=&state=&owner=&group=`: a `run-<id>` event
  with a run's status cell whenever its key (state, what is pending, whole percent) differs
  from the one the list shows; for a first page (`after`: its newest run's position), a
  `newer` event with "N new runs: show them" whenever that number of runs matching its
  filters changes.

Each poll reads through selectors (`runs.selectors.live`); the run page renders its partial
again only when the run's version or units done changed, or REFRESH_S passed (ages,
reports), and the streams of one run share each poll's read (`keys`). The streams end with
`end` once their runs have ended and settled (the page then closes its source), after
SIMRUN_EVENTS_MAX_S (the browser reconnects by itself), and once the user's session is
logged out. Under the web process a view answers with its first poll and hands the rest to
the event loop, which polls without holding a thread (`runs.edge.streams`): at most
SIMRUN_STREAMS_PER_IDENTITY open per identity (429 beyond). A WSGI server (Django's test live
server) sends the first poll alone, then the browser reconnects after `retry`.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from django.template.loader import render_to_string

from runs.edge.streams import Recent, Stream, TooManyStreams, Watch
from runs.edge.streams import streamed as edge_streamed
from runs.pages.access import HtmxHttpRequest, with_identity
from runs.pages.run_files import TEMPLATE as LOG
from runs.pages.run_files import log_tail, pod_or_404, run_or_404, task_or_404
from runs.pages.run_page import TEMPLATE, live_digest, run_context
from runs.selectors.credentials import session_identity
from runs.selectors.live import run_and_task, run_key, run_or_none
from runs.selectors.runs_list import (
    CURSOR,
    BadFilter,
    RunItem,
    newer_runs,
    run_item,
    runs_with_details,
)

if TYPE_CHECKING:  # the rows are read through selectors; their types name what they return
    from runs.models import Identity, Run

LIST = "runs/run_list.html"
REFRESH_S = 10.0
MAX_RUNS = 50
DIGEST = re.compile(r"^[0-9a-f]{1,40}$")
WATCHED = re.compile(r"^([A-Za-z0-9_-]{1,64}):([a-z_.]{1,32}-[0-9]{1,3})$")


keys: Recent[str, tuple[int, int] | None] = Recent(run_key)  # streams of a run share a read


def event(kind: str, html: str, ident: str | None = None) -> bytes:
    """One server-sent event; every line of `html` a `data:` line (the client joins them)."""
    lines = [f"event: {kind}"]
    if ident is not None:
        lines.append(f"id: {ident}")
    lines += [f"data: {line}" for line in html.split("\n")]
    return ("\n".join(lines) + "\n\n").encode()


def session_of(request: HttpRequest) -> str:
    key = request.session.session_key
    return key or ""


def streamed(
    request: HttpRequest, identity: Identity, watch: Watch, *, poll_s: float | None = None
) -> HttpResponseBase:
    """The stream of `watch` for the logged-in user: polled every `poll_s` (by default
    SIMRUN_EVENTS_POLL_S) from the event loop until it ends (`runs.edge.streams`); 429 in
    JSON beyond the identity's open streams; ended once the session is logged out."""
    poll_s = settings.SIMRUN_EVENTS_POLL_S if poll_s is None else poll_s
    session, identity_id = session_of(request), identity.pk

    def still_allowed() -> bool:
        found = session_identity(session_key=session) if session else None
        return found is not None and found.pk == identity_id

    stream = Stream(
        watch=watch,
        identity_id=identity_id,
        still_allowed=still_allowed,
        credential=f"session:{session}",
        revoked=event("end", ""),
        preamble=f"retry: {max(100, int(poll_s * 1000))}\n\n".encode(),
        keepalive=b": keep-alive\n\n",
        poll_s=poll_s,
    )
    try:
        return edge_streamed(request, stream, content_type="text/event-stream")
    except TooManyStreams as exc:
        refused = JsonResponse({"detail": str(exc), "code": "too_many_streams"}, status=429)
        refused["Retry-After"] = str(exc.retry_after_s)
        return refused


def bad_request(message: str) -> HttpResponse:
    return HttpResponse(message, status=400, content_type="text/plain; charset=utf-8")


class RunWatch:
    """The run page's live partial, sent when it differs from the last one the page has."""

    def __init__(
        self,
        request: HttpRequest,
        identity: Identity,
        run: Run,
        *,
        task: str | None,
        seen: str,
        poll_s: float,
    ) -> None:
        self.request, self.identity, self.run_id, self.task = request, identity, run.id, task
        self.seen, self.poll_s = seen, poll_s
        self.key: tuple[int, int] | None = None
        self.rendered_at = -REFRESH_S
        self.ended = False

    def poll(self) -> list[bytes]:
        key = keys.get(self.run_id, poll_s=self.poll_s)
        if key is None:  # deleted meanwhile
            self.ended = True
            return [event("end", "")]
        if key == self.key and time.monotonic() - self.rendered_at < REFRESH_S:
            return []
        self.key, self.rendered_at = key, time.monotonic()
        run = run_or_none(self.run_id)
        if run is None:
            self.ended = True
            return [event("end", "")]
        context = run_context(run, self.identity, task=self.task, pod=None, with_log=False)
        html = render_to_string(f"{TEMPLATE}#live", context, request=self.request)
        sent = []
        if live_digest(html) != self.seen:
            self.seen = live_digest(html)
            sent.append(event("live", html, self.seen))
        if run.ended and not run.pending:  # followed until "cancelling" is over
            self.ended = True
            sent.append(event("end", run.state))
        return sent


@with_identity
def run_events(request: HtmxHttpRequest, identity: Identity, run_id: str) -> HttpResponseBase:
    """The run page's stream (see the module's docstring)."""
    run = run_or_404(run_id)
    seen = request.headers.get("Last-Event-ID") or request.GET.get("seen", "")
    if seen and not DIGEST.match(seen):
        return bad_request(
            f"seen: {seen[:80]!r} is not a digest this page sent (hexadecimal, 1-40)"
        )
    task = request.GET.get("task") or None
    poll_s = settings.SIMRUN_EVENTS_POLL_S
    watch = RunWatch(request, identity, run, task=task, seen=seen, poll_s=poll_s)
    return streamed(request, identity, watch)


def status_key(item: RunItem) -> str:
    """What a run's status cell shows: its state (and what is pending), its whole percent."""
    state = f"{item.state}.{item.pending}" if item.pending else item.state
    return f"{state}-{0 if item.progress is None else round(item.progress * 100)}"


def followed(item: RunItem) -> bool:
    """Whether a run's status cell may still change: active, or cancelling or deleting."""
    return item.progress is not None or bool(item.pending)


@dataclass(frozen=True)
class Newer:
    """What the first page of a list shows: the position of its newest run and its filters."""

    after: str
    filters: dict[str, str]


class RunsWatch:
    """Status cells of the listed runs, each sent when its key differs from the one shown;
    on a first page, a `newer` notice whenever the number of runs newer than the list's
    newest (matching its filters) changes. Without a first page to keep up to date, it ends
    once no listed run may change."""

    def __init__(self, request: HttpRequest, shown: dict[str, str], newer: Newer | None) -> None:
        self.request, self.shown, self.newer = request, shown, newer
        self.newer_count = 0
        self.ended = False

    def poll(self) -> list[bytes]:
        sent = []
        live = False
        for run in runs_with_details().filter(id__in=list(self.shown)):
            item = run_item(run)
            live = live or followed(item)
            key = status_key(item)
            if self.shown.get(item.id) != key:
                self.shown[item.id] = key
                html = render_to_string(f"{LIST}#status", {"run": item}, request=self.request)
                sent.append(event(f"run-{item.id}", html))
        if self.newer is not None:
            sent += self._newer(self.newer)
        elif not live:
            self.ended = True
            sent.append(event("end", ""))
        return sent

    def _newer(self, newer: Newer) -> list[bytes]:
        count = newer_runs(after=newer.after, **newer.filters)
        if count == self.newer_count:
            return []
        self.newer_count = count
        query = urlencode({k if k != "text" else "q": v for k, v in newer.filters.items() if v})
        context = {"newer": count, "query": query}
        return [event("newer", render_to_string(f"{LIST}#newer", context, request=self.request))]


@with_identity
def runs_events(request: HtmxHttpRequest, identity: Identity) -> HttpResponseBase:
    """The list's stream: `runs` names the shown live runs and their keys, `<id>:<key>,…`;
    a first page adds `after` (its newest run's position) and its filters (q, state, owner,
    group)."""
    shown: dict[str, str] = {}
    for part in filter(None, request.GET.get("runs", "").split(",")):
        match = WATCHED.match(part)
        if match is None:
            return bad_request(
                f"runs: {part[:80]!r} is not <run id>:<state>-<percent> "
                "(e.g. ab12:running-40, cd34:cancelled.cancelling-0)"
            )
        shown[match.group(1)] = match.group(2)
    after = request.GET.get("after")
    if (not shown and after is None) or len(shown) > MAX_RUNS:
        return bad_request(f"runs: name 1 to {MAX_RUNS} runs, <id>:<key> separated by commas")
    newer = None
    if after is not None:
        filters = {k: request.GET.get(k, "")[:200] for k in ("state", "owner", "group")}
        newer = Newer(after, {"text": request.GET.get("q", "")[:200], **filters})
        if not re.fullmatch(CURSOR, after):
            return bad_request(
                f"after: {after[:80]!r} is not a position in the list "
                "(<microseconds>-<run id>, as the page gave it)"
            )
        try:
            newer_runs(after=newer.after, **newer.filters)
        except BadFilter as exc:
            return bad_request(str(exc))
    return streamed(request, identity, RunsWatch(request, shown, newer))


class LogWatch:
    """A pod's log tail, sent when it differs from the one shown, until it stops following."""

    def __init__(self, request: HttpRequest, run_id: str, task_id: str, pod: str, seen: str):
        self.request, self.run_id, self.task_id, self.pod = request, run_id, task_id, pod
        self.seen = seen
        self.ended = False

    def poll(self) -> list[bytes]:
        found = run_and_task(self.run_id, self.task_id)
        if found is None:
            self.ended = True
            return [event("end", "")]
        run, task = found
        tail = log_tail(run, task, self.pod)
        sent = []
        if tail.key != self.seen:
            self.seen = tail.key
            context = {"run": run, "task": task, "tail": tail}
            html = render_to_string(f"{LOG}#body", context, request=self.request)
            sent.append(event("tail", html, tail.key))
        if not tail.follow:
            self.ended = True
            sent.append(event("end", ""))
        return sent


@with_identity
def log_events(
    request: HtmxHttpRequest, identity: Identity, run_id: str, task_id: str, pod: str
) -> HttpResponseBase:
    """A pod's log tail as a stream (see the module's docstring)."""
    run = run_or_404(run_id)
    task = task_or_404(run, task_id)
    pod_or_404(task, pod)
    seen = request.headers.get("Last-Event-ID") or request.GET.get("seen", "")
    if seen and not DIGEST.match(seen):
        return bad_request(
            f"seen: {seen[:80]!r} is not a digest this page sent (hexadecimal, 1-40)"
        )
    return streamed(request, identity, LogWatch(request, run.id, task.task_id, pod, seen))
