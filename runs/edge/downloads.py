"""Response bodies (a file, a crate's zip) sent from the event loop, not a request thread.

A request thread that sends a large body sends it at the client's pace: a dozen clients that
asked for a 64 MB output and read nothing held every thread (a2wsgi's small queue to the event
loop fills, and the thread waits in its send), and nobody else was answered. So a download's
view, once it has checked everything and opened what it sends, leaves its chunks in the
request's `Handover` (`runs.edge.streams`) and returns the response's head; the edge sends
the body: each chunk made on a reader thread (`runs.edge.readers`, shared by the process),
then sent from the event loop. A client that stops reading holds a coroutine and its
connection, nothing else. One that takes no chunk for SIMRUN_SEND_TIMEOUT_S is cut (its
connection aborted); what the body holds open is closed whatever way it ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from runs.edge.readers import polled, pool
from runs.edge.upload_limit import Message, Receive, Scope, Send

log = logging.getLogger(__name__)

CUT = "simrun.cut"
"""The key, in an ASGI scope, of what aborts the request's connection (`simrun_site.
web_protocol` puts it there): a client cut at its send deadline is not waited for to read
what is on its way."""


@dataclass
class Body:
    """A response's body as its view hands it over: its chunks (made one at a time, on a
    reader thread), and what to close once it ends however it ends."""

    chunks: Iterator[bytes]
    status: int
    closers: list[Callable[[], None]] = field(default_factory=list)

    def close(self) -> None:
        """Close the chunks (a generator) and what they read; called once."""
        close = getattr(self.chunks, "close", None)
        for closer in [*([close] if callable(close) else []), *self.closers]:
            try:
                closer()
            except Exception:
                log.exception("closing a download's body")


class Stalled(Exception):
    """The client took no chunk within SIMRUN_SEND_TIMEOUT_S."""


def _next(chunks: Iterator[bytes]) -> bytes | None:
    return next(chunks, None)


async def until_the_client_leaves(
    receive: Receive, work: Coroutine[Any, Any, None], *, then: Callable[[], None] = lambda: None
) -> BaseException | None:
    """Run `work` (a response's sending) until it ends or the client disconnects; either
    way both are cancelled and waited for, then `then` is called. What `work` raised, if it
    ended by raising."""

    async def client_gone() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    gone = asyncio.ensure_future(client_gone())
    sending = asyncio.ensure_future(work)
    try:
        await asyncio.wait({gone, sending}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        try:
            for task in (gone, sending):
                task.cancel()
            await asyncio.wait({gone, sending})  # ended, whatever they raised
        finally:
            then()
    return sending.exception() if sending.done() and not sending.cancelled() else None


async def send_body(body: Body, scope: Scope, receive: Receive, send: Send) -> None:
    """Send the body's chunks, then its end, until it ends or the client goes away or takes
    no chunk for SIMRUN_SEND_TIMEOUT_S (cut); the body is closed in every case."""
    seconds = float(settings.SIMRUN_SEND_TIMEOUT_S)
    pulling: Future[bytes | None] | None = None
    head_only = scope.get("method") == "HEAD"  # uvicorn would send none of it

    async def timed(message: Message) -> None:
        try:
            async with asyncio.timeout(seconds):
                await send(message)
        except TimeoutError:
            raise Stalled from None

    async def chunks() -> None:
        nonlocal pulling
        while not head_only:
            pulling = pool().submit(polled(_next), body.chunks)
            chunk = await asyncio.wrap_future(pulling)
            pulling = None
            if chunk is None:
                break
            if not chunk:
                continue
            await timed({"type": "http.response.body", "body": chunk, "more_body": True})
        await timed({"type": "http.response.body", "body": b"", "more_body": False})

    def release() -> None:
        in_flight = pulling
        if in_flight is None:
            body.close()
        else:  # a chunk still made on a reader thread: closed once it is
            in_flight.add_done_callback(lambda _: body.close())

    error = await until_the_client_leaves(receive, chunks(), then=release)
    if isinstance(error, Stalled):
        log.info("a client took no chunk of %s for %g s: cut", scope.get("path"), seconds)
        cut = scope.get(CUT)
        if callable(cut):
            cut()
        return
    if error is not None:
        raise error
