"""An ASGI wrapper that refuses oversized uploads before Django reads their body (S15).

Under ASGI Django reads a whole request body into a temporary file before any view runs, so
the upload view alone cannot keep an oversized body off the disk. This wrapper answers 413 at
once when the announced Content-Length of an upload is beyond SIMRUN_MAX_UPLOAD_BYTES, and
cuts a body without a length (chunked) as soon as it passes the limit:

    application = UploadSizeLimit(get_asgi_application())
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from django.conf import settings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

UPLOAD_PATHS = ("/api/snapshots/", "/api/runs/from_crate/")


def _too_large(limit: int) -> tuple[Message, Message]:
    body = json.dumps(
        {"detail": f"the upload is larger than the limit of {limit} bytes", "code": "too_large"}
    ).encode()
    start = {
        "type": "http.response.start",
        "status": 413,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ],
    }
    return start, {"type": "http.response.body", "body": body}


class UploadSizeLimit:
    """Wraps an ASGI app; only POSTs to the upload paths are looked at."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope.get("method") != "POST"
            or scope.get("path") not in UPLOAD_PATHS
        ):
            await self.app(scope, receive, send)
            return
        limit = int(settings.SIMRUN_MAX_UPLOAD_BYTES)
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length", b"").decode("latin-1").strip()
        if length.isdigit() and int(length) > limit:
            for message in _too_large(limit):
                await send(message)
            return
        received = 0
        cut = False
        started = False

        async def counting_receive() -> Message:
            nonlocal received, cut
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    cut = True
                    return {"type": "http.disconnect"}
            return message

        async def watching_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, counting_receive, watching_send)
        if cut and not started:
            for message in _too_large(limit):
                await send(message)
