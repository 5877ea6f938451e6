"""The event stream of a run (S16): server-sent events of its state and progress.

The stream polls the run's row and ledgers every SIMRUN_EVENTS_POLL_S and ends after
SIMRUN_EVENTS_MAX_S (clients reconnect), or as soon as the run has ended. It is served from
the event loop without a thread of its own (`runs.edge.streams`): at most
SIMRUN_STREAMS_PER_IDENTITY per identity (429 beyond), ended once its token is revoked.
Streams of one run share each poll's reads (`observations`).

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

import json
import re
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.http.response import HttpResponseBase
from rest_framework.exceptions import NotAuthenticated, Throttled
from rest_framework.request import Request

from runs.api.auth import Caller
from runs.edge.streams import Recent, Stream, TooManyStreams, Watch, streamed
from runs.selectors.credentials import token_identity
from runs.selectors.run_events import Observation, observe

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


observations: Recent[str, Observation | None] = Recent(observe)


class RunEvents:
    """The watch of a run's stream: what a client that has seen `seen` is told at each poll,
    until the run ends (`end`) or is deleted (`deleted`)."""

    def __init__(self, run_id: str, *, after: EventId | None, poll_s: float) -> None:
        self.run_id, self.seen, self.poll_s = run_id, after, poll_s
        self.ended = False

    def poll(self) -> list[bytes]:
        now = observations.get(self.run_id, poll_s=self.poll_s)
        if now is None:
            self.ended = True
            return [Event("deleted", {"run": self.run_id}).encode()]
        sent = []
        for event in next_events(self.seen, now):
            sent.append(event.encode())
            self.seen = event.id
        if now.ended:
            self.ended = True
            sent.append(Event("end", {"run": self.run_id, "state": now.state}).encode())
        return sent


class TooManyStreamsOpen(Throttled):
    default_code = "too_many_streams"


def api_stream(
    request: Request, watch: Watch, *, content_type: str, **parts: Any
) -> HttpResponseBase:
    """A stream of the API for the caller's token (`runs.edge.streams`): 429 beyond the
    caller's open streams, and an end once the token is revoked or deleted."""
    caller = request.user
    if not isinstance(caller, Caller):
        raise NotAuthenticated()
    identity_id, token_hash = caller.identity.pk, caller.token_hash

    def still_allowed() -> bool:
        found = token_identity(token_hash=token_hash)
        return found is not None and found.pk == identity_id

    stream = Stream(
        watch=watch,
        identity_id=identity_id,
        still_allowed=still_allowed,
        credential=f"token:{token_hash}",
        **parts,
    )
    try:
        return streamed(request._request, stream, content_type=content_type)
    except TooManyStreams as exc:
        raise TooManyStreamsOpen(wait=exc.retry_after_s, detail=str(exc)) from None


def run_event_stream(request: Request, run_id: str, *, after: EventId | None) -> HttpResponseBase:
    """The response of `GET /api/runs/<id>/events/`: a reconnection delay, then events."""
    poll_s = float(settings.SIMRUN_EVENTS_POLL_S)
    return api_stream(
        request,
        RunEvents(run_id, after=after, poll_s=poll_s),
        content_type="text/event-stream",
        preamble=f"retry: {max(100, int(poll_s * 1000))}\n\n".encode(),
        keepalive=b": keep-alive\n\n",
        revoked=b": the token was revoked\n\n",
        poll_s=poll_s,
    )
