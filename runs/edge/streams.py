"""Streams handed over by their views to the event loop: no thread per stream, a limit per
identity, and an end once the credential that opened them is gone.

A stream's view runs like any other request, on a request thread: it checks who asks and
what, polls once, and answers with that first part. Under the web process the edge
(`StreamHandover`, in front of the WSGI side) has put a `Handover` in the request's ASGI
scope; the view leaves its `Stream` there and returns. Once the request thread is free, the
edge goes on sending the stream from the event loop: every `poll_s` its watch is polled on a
reader thread (`runs.edge.readers`, a few shared by the whole process), until it ends, or
`max_s` passes, or the client goes away. Between polls a stream holds no thread and no
database connection. This is how a front proxy's internal redirect (nginx's
X-Accel-Redirect) hands a response's body to the server.

Without the edge (Django's test client, its live server) a stream is its first part: the
client reconnects after the `retry` the part begins with, so no thread is held either.

Each identity may hold SIMRUN_STREAMS_PER_IDENTITY open streams in a web process; one more
is refused (`TooManyStreams`: 429). Every SIMRUN_TOKEN_RECHECK_S an open stream asks whether
its credential is still good (a token not revoked or deleted, a session still logged in) and
ends when it is not.
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from django.conf import settings
from django.http import HttpRequest, StreamingHttpResponse

from runs.edge.downloads import Body, send_body, until_the_client_leaves
from runs.edge.readers import read
from runs.edge.upload_limit import App, Message, Receive, Scope, Send

MAX_CREDENTIALS = 10_000  # entries a memo keeps before it starts again
HANDOVER = "simrun.handover"  # the key of the Handover in an ASGI scope
RETRY_AFTER_S = 10  # what a refused client is told to wait: streams end at least that often


class Watch(Protocol):
    """What a stream follows: `poll` (on a reader thread) says what is new, as the bytes to
    send; `ended` once nothing more will come."""

    ended: bool

    def poll(self) -> list[bytes]: ...


@dataclass
class Stream:
    """A stream as its view hands it over."""

    watch: Watch
    identity_id: int
    still_allowed: Callable[[], bool]  # on a reader thread: is the credential still good?
    credential: str  # names the credential (a token's hash, a session): streams share checks
    revoked: bytes  # sent when it is not, before the end
    preamble: bytes = b""  # what the first part begins with (an event stream's `retry`)
    keepalive: bytes | None = None  # sent after KEEPALIVE_S without anything else
    poll_s: float = field(default_factory=lambda: float(settings.SIMRUN_EVENTS_POLL_S))
    max_s: float = field(default_factory=lambda: float(settings.SIMRUN_EVENTS_MAX_S))


KEEPALIVE_S = 15.0


class TooManyStreams(Exception):
    """An identity holds as many open streams as it may."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"at most {limit} streams may be open at once per identity "
            "(SIMRUN_STREAMS_PER_IDENTITY); close one, or follow several runs in one"
        )
        self.retry_after_s = RETRY_AFTER_S


class Slots:
    """Open streams per identity in this process."""

    def __init__(self) -> None:
        # Request threads take and the event loop gives back at once: without it two
        # threads could both take the last slot.
        self._lock = threading.Lock()
        self._open: dict[int, int] = {}

    def take(self, identity_id: int, *, limit: int) -> None:
        with self._lock:
            held = self._open.get(identity_id, 0)
            if held >= limit:
                raise TooManyStreams(limit)
            self._open[identity_id] = held + 1

    def give_back(self, identity_id: int) -> None:
        with self._lock:
            left = self._open.get(identity_id, 0) - 1
            if left > 0:
                self._open[identity_id] = left
            else:
                self._open.pop(identity_id, None)

    def held(self, identity_id: int) -> int:
        with self._lock:
            return self._open.get(identity_id, 0)


slots = Slots()


@dataclass
class Handover:
    """Put in a request's scope by the edge; a stream's view leaves its stream here, a
    download's view its body (`runs.edge.downloads`)."""

    stream: Stream | None = None
    body: Body | None = None


def handover_of(request: HttpRequest) -> Handover | None:
    """The request's Handover when the edge serves it (a2wsgi passes the scope on)."""
    scope = request.META.get("asgi.scope")
    found = scope.get(HANDOVER) if isinstance(scope, dict) else None
    return found if isinstance(found, Handover) else None


def streamed(request: HttpRequest, stream: Stream, *, content_type: str) -> StreamingHttpResponse:
    """The response of a stream's view: its first poll, the rest handed over to the edge.
    TooManyStreams when its identity holds as many as it may (under the edge only)."""
    handover = handover_of(request)
    if handover is not None:
        slots.take(stream.identity_id, limit=int(settings.SIMRUN_STREAMS_PER_IDENTITY))
        handover.stream = stream  # given back by the edge once the stream ends
    try:
        first = [stream.preamble, *stream.watch.poll()]
    except BaseException:
        if handover is not None:
            handover.stream = None
            slots.give_back(stream.identity_id)
        raise
    response = StreamingHttpResponse(iter(first), content_type=content_type)
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Recent(Generic[K, V]):
    """`read(key)` shared by the streams that poll the same key: a result younger than half
    a poll interval is given again, so a hundred streams of one run cost one read a poll."""

    def __init__(self, read: Callable[[K], V]) -> None:
        self._read = read
        # Reader threads (and a view's first poll) note and read at once: without it a note
        # could tear the dict.
        self._lock = threading.Lock()
        self._found: dict[K, tuple[float, V]] = {}

    def get(self, key: K, *, poll_s: float) -> V:
        now = time.monotonic()
        with self._lock:
            found = self._found.get(key)
        if found is not None and now - found[0] < poll_s / 2:
            return found[1]
        value = self._read(key)
        with self._lock:
            if len(self._found) >= MAX_CREDENTIALS:
                self._found.clear()
            self._found[key] = (now, value)
        return value


_closing: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Event] = (
    weakref.WeakKeyDictionary()
)


def closing() -> asyncio.Event:
    """Set once the server of this event loop shuts down (`close_streams`)."""
    return _closing.setdefault(asyncio.get_running_loop(), asyncio.Event())


def close_streams() -> None:
    """The server shuts down: every open stream ends at its next wake (within a poll), so
    the server, which waits for every response to end, stops at once, and clients reconnect
    to the next one. Called in the event loop (`simrun_site.web_protocol`)."""
    closing().set()


class Credentials:
    """When each credential of open streams was last found good: the streams of one token
    (or session) share one look-up per half recheck interval."""

    def __init__(self) -> None:
        # Reader threads note and read at once: without it a note could tear the dict.
        self._lock = threading.Lock()
        self._found: dict[str, tuple[float, bool]] = {}

    def allowed(self, stream: Stream, *, now: float, max_age_s: float) -> bool:
        """On a reader thread: whether the stream's credential is good, as found at most
        `max_age_s` ago."""
        with self._lock:
            found = self._found.get(stream.credential)
        if found is not None and now - found[0] < max_age_s:
            return found[1]
        good = stream.still_allowed()
        with self._lock:
            if len(self._found) >= MAX_CREDENTIALS:
                self._found.clear()
            self._found[stream.credential] = (now, good)
        return good


MIN_RECHECK_S = 0.05
credentials = Credentials()


async def follow(stream: Stream) -> AsyncIterator[bytes]:
    """The rest of a stream after its first poll: polls until it ends, `max_s` passes, the
    server shuts down, or its credential is no longer good. That is looked at every half
    SIMRUN_TOKEN_RECHECK_S (shared with the other streams of the credential, `Credentials`),
    so a stream ends within SIMRUN_TOKEN_RECHECK_S of a revocation; at 0, at every poll."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = started + stream.max_s
    recheck = float(settings.SIMRUN_TOKEN_RECHECK_S)
    recheck_s = max(recheck / 2, MIN_RECHECK_S) if recheck > 0 else stream.poll_s
    checked = last_poll = quiet_since = started
    while not stream.watch.ended:
        now = loop.time()
        due_poll, due_check = last_poll + stream.poll_s, checked + recheck_s
        await asyncio.sleep(max(0.0, min(due_poll, due_check, deadline) - now))
        if closing().is_set():
            return
        now = loop.time()
        if now >= due_check:
            if not await read(credentials.allowed, stream, now=now, max_age_s=recheck_s):
                yield stream.revoked
                return
            checked = now
        if now >= deadline:
            return
        if now < due_poll:
            continue
        last_poll = now
        for chunk in await read(stream.watch.poll):
            yield chunk
            quiet_since = loop.time()
        if stream.keepalive and loop.time() - quiet_since >= KEEPALIVE_S:
            yield stream.keepalive
            quiet_since = loop.time()


class StreamHandover:
    """Wraps the WSGI side's ASGI app: gives each request a Handover, and sends the stream
    (or the body) a view left there from the event loop once the view's thread is done (see
    the module, and `runs.edge.downloads`)."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        handover = Handover()
        scope = {**scope, HANDOVER: handover}

        async def holding_back_the_end(message: Message) -> None:
            if message["type"] == "http.response.start":
                answered = message["status"]  # otherwise after all: a middleware's error
                if answered != 200:
                    drop(handover)
                if handover.body is not None and answered != handover.body.status:
                    drop_body(handover)
            if (
                (handover.stream is not None or handover.body is not None)
                and message["type"] == "http.response.body"
                and not message.get("more_body", False)
            ):
                if message.get("body"):
                    await send({**message, "more_body": True})
                return  # the stream goes on
            await send(message)

        try:
            await self.app(scope, receive, holding_back_the_end)
        except BaseException:
            drop(handover)
            drop_body(handover)
            raise
        if handover.body is not None:
            await send_body(handover.body, scope, receive, send)
            return
        stream = handover.stream
        if stream is None:
            return
        try:
            await _send_until_gone(stream, receive, send)
        finally:
            slots.give_back(stream.identity_id)


def drop(handover: Handover) -> None:
    """Nothing is handed over after all: the stream's slot is given back."""
    if handover.stream is not None:
        slots.give_back(handover.stream.identity_id)
        handover.stream = None


def drop_body(handover: Handover) -> None:
    """No body is handed over after all: what it holds open is closed."""
    if handover.body is not None:
        handover.body.close()
        handover.body = None


async def _send_until_gone(stream: Stream, receive: Receive, send: Send) -> None:
    """Send the stream's parts until it ends or the client goes away."""

    async def parts() -> None:
        async for chunk in follow(stream):
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    error = await until_the_client_leaves(receive, parts())
    if error is not None:
        raise error
