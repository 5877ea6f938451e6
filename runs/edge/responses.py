"""Streaming a file (or a byte range of it) in chunks, never whole in memory.

Under the web process the chunks are handed over to the edge, which sends them from the event
loop (`runs.edge.downloads`): the response a view returns is then the head alone. Elsewhere
(Django's test client, its live server) the response sends them itself. Django consumes an
iterator of the other kind whole (a sync one under ASGI, an async one under WSGI), so the
chunks then come from an iterator of the server's own kind.
"""

from __future__ import annotations

import mimetypes
import re
from collections.abc import AsyncIterator, Callable, Iterator
from typing import IO

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import FileResponse, HttpRequest, StreamingHttpResponse

from runs.edge.downloads import Body
from runs.edge.streams import handover_of
from runs.selectors.outputs import ByteRange, OpenOutput

CHUNK = 256 * 1024
_SAFE = re.compile(r"[^A-Za-z0-9._+-]")


def _chunks(handle: IO[bytes], length: int) -> Iterator[bytes]:
    with handle:
        while length > 0:
            chunk = handle.read(min(CHUNK, length))
            if not chunk:
                return
            length -= len(chunk)
            yield chunk


async def _async_chunks(handle: IO[bytes], length: int) -> AsyncIterator[bytes]:
    read = sync_to_async(handle.read, thread_sensitive=False)
    try:
        while length > 0:
            chunk = await read(min(CHUNK, length))
            if not chunk:
                return
            length -= len(chunk)
            yield chunk
    finally:
        handle.close()


async def _async_pulled(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    """Each chunk of a blocking iterator, made in a worker thread one at a time."""

    def pull() -> bytes | None:
        return next(chunks, None)

    pulled = sync_to_async(pull, thread_sensitive=False)
    while (chunk := await pulled()) is not None:
        yield chunk


def _handed_over(
    request: HttpRequest,
    chunks: Iterator[bytes],
    status: int,
    closers: list[Callable[[], None]],
) -> StreamingHttpResponse | None:
    """The head of a response whose chunks the edge sends (`runs.edge.downloads`); None when
    no edge serves the request."""
    handover = handover_of(request)
    if handover is None:
        return None
    handover.body = Body(chunks, status, closers)
    return StreamingHttpResponse(iter(()), status=status)


def chunks_response(
    request: HttpRequest,
    chunks: Iterator[bytes],
    *,
    content_type: str,
    filename: str,
    unbuffered: bool = True,
) -> StreamingHttpResponse:
    """A download made while it is sent (a crate's zip): chunk by chunk, never whole in memory,
    handed to the edge or from the server's own kind of iterator; `unbuffered`: tells a
    front proxy not to buffer it (X-Accel-Buffering)."""
    response = _handed_over(request, chunks, 200, []) or StreamingHttpResponse(
        _async_pulled(chunks) if isinstance(request, ASGIRequest) else chunks
    )
    response["Content-Type"] = content_type
    response["Content-Disposition"] = f'attachment; filename="{_SAFE.sub("_", filename)}"'
    if unbuffered:
        response["X-Accel-Buffering"] = "no"
    return response


def attachment_response(request: HttpRequest, opened: OpenOutput) -> StreamingHttpResponse:
    """The open file as an attachment with FileResponse's headers, handed to the edge when it
    serves the request; the response (or the edge) closes the file."""
    whole = FileResponse(opened.handle, as_attachment=True, filename=opened.name)
    chunks = _chunks(opened.handle, int(whole["Content-Length"]))
    response = _handed_over(request, chunks, 200, [opened.handle.close])
    if response is None:
        return whole
    for header, value in whole.items():
        response[header] = value
    return response


def file_response(
    request: HttpRequest, opened: OpenOutput, part: ByteRange | None
) -> StreamingHttpResponse:
    """The open file, or the bytes `part` selects (206 with Content-Range); the response
    (or the edge) closes the file."""
    size = opened.size
    start, length = (0, size) if part is None else (part.start, part.length)
    handle = opened.handle
    handle.seek(start)
    status = 200 if part is None else 206
    content_type = mimetypes.guess_type(opened.name)[0] or "application/octet-stream"
    response = _handed_over(request, _chunks(handle, length), status, [handle.close])
    if response is None:
        content = (
            _async_chunks(handle, length)
            if isinstance(request, ASGIRequest)
            else _chunks(handle, length)
        )
        response = StreamingHttpResponse(content, status=status)
    response["Content-Type"] = content_type
    response["Content-Length"] = str(length)
    response["Accept-Ranges"] = "bytes"
    response["Content-Disposition"] = f'inline; filename="{_SAFE.sub("_", opened.name)}"'
    if part is not None:
        response["Content-Range"] = part.content_range(size)
    return response
