"""The HTTP protocol of the web process: uvicorn's h11 protocol with the limits it lacks.

    uvicorn simrun_site.asgi:application --http simrun_site.web_protocol:WebProtocol

What uvicorn does with connections by itself (0.54, its h11 protocol): it accepts every
connection the backlog (2048) holds, and counts toward `--limit-concurrency` (none by
default) every open connection; a connection that sends nothing, or a request head byte by
byte, is never timed out: `--timeout-keep-alive` (5 s) starts only once a response was sent,
and any byte received stops it. So a few hundred idle sockets hold file descriptors for ever,
and once the process's limit of descriptors (1024 by default) is reached, nobody connects.

This protocol sets both deliberately from the settings:
- SIMRUN_WEB_MAX_CONNECTIONS: uvicorn's concurrency limit (a request beyond it is answered
  503 by uvicorn at once); the process's soft limit of open files is raised (up to its hard
  limit) to hold that many connections and the files they read.
- SIMRUN_HEADER_TIMEOUT_S: a connection must send a whole request head within that many
  seconds of opening, or of its last response; otherwise it is closed (answered 408 if it
  had sent part of one).
A request's body has its own deadline, counted by the application (`runs.edge.bodies`), and
so has each chunk of a download (`runs.edge.downloads`: the connection is aborted, not left
to send what is on its way to a client that reads nothing, through the scope's CUT);
between requests uvicorn's keep-alive timeout (5 s) closes an idle connection. When the
server stops, it waits for every response to end: open streams are ended at once
(`runs.edge.streams.close_streams`), so a stop takes a poll interval, not a stream's life.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from typing import Any

import h11
from django.conf import settings
from uvicorn.protocols.http.h11_impl import H11Protocol

from runs.edge.downloads import CUT

log = logging.getLogger(__name__)

TIMED_OUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s"
)
DESCRIPTORS_PER_CONNECTION = 2  # its socket, and a file or a database socket it may read


def raise_open_files(connections: int) -> int:
    """Raise this process's soft limit of open files to hold `connections` (at most to the
    hard limit); the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections * DESCRIPTORS_PER_CONNECTION + 256
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    if wanted > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        return wanted
    return soft


def _timeout_body(seconds: float) -> bytes:
    detail = f"the request head did not arrive within {seconds:g} s (SIMRUN_HEADER_TIMEOUT_S)"
    return b'{"detail": "%s", "code": "header_timeout"}' % detail.encode()


class WebProtocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request head and a concurrency limit
    taken from the settings (see the module's docstring)."""

    limits_set = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not WebProtocol.limits_set:  # once per process, at its first connection
            raise_open_files(int(settings.SIMRUN_WEB_MAX_CONNECTIONS))
            WebProtocol.limits_set = True
        self.limit_concurrency = int(settings.SIMRUN_WEB_MAX_CONNECTIONS)
        self.head_timeout_s = float(settings.SIMRUN_HEADER_TIMEOUT_S)
        self.head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_arrived()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not cycle:  # a request head arrived: its body has its own deadline
            self._head_arrived()
            if self.cycle is not None:  # a download cut at its send deadline is aborted
                self.cycle.scope[CUT] = self.transport.abort  # type: ignore[literal-required]

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.cycle_done():
            self._await_head()

    def shutdown(self) -> None:
        """The server stops: it waits for every response to end, so open streams end now
        (the clients reconnect to the next server)."""
        super().shutdown()
        from runs.edge.streams import close_streams  # Django is set up by now

        close_streams()

    def cycle_done(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _await_head(self) -> None:
        self._head_arrived()
        self.head_timer = self.loop.call_later(self.head_timeout_s, self._head_timed_out)

    def _head_arrived(self) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def _head_timed_out(self) -> None:
        self.head_timer = None
        if self.transport.is_closing() or not self.cycle_done():
            return
        partial_head = bool(self.conn.trailing_data[0])  # nothing received: just closed
        if partial_head and self.conn.their_state is h11.IDLE:
            body = _timeout_body(self.head_timeout_s)
            self.transport.write(TIMED_OUT % (len(body), body))
        self.transport.close()
